"""The reranker conformance kit, with the tiny cross-encoder through the real library."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from rankseam.testing import RerankerContract
from rankseam_rerankers import make_reranker


class TestRerankersContract(RerankerContract):
    model_dir: ClassVar[Path | None] = None

    @pytest.fixture(autouse=True)
    def _tiny_model(self, tiny_model: Path) -> None:
        type(self).model_dir = tiny_model

    def make_reranker(self) -> Any:
        assert self.model_dir is not None
        return make_reranker({"model": str(self.model_dir), "model_type": "cross-encoder"}, None)
