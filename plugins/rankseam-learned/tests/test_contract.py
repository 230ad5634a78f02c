"""The conformance kit: the reranker kit and the decision backend kit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankseam.testing import DecisionBackendContract, RerankerContract
from rankseam_learned.decision import LearnedDecisionBackend
from rankseam_learned.reranker import LearnedReranker


class WithModelFile:
    """The test's model file as ``self.model_path`` (the kits build components without
    fixtures)."""

    model_path: Path

    @pytest.fixture(autouse=True)
    def _model(self, model_file: Path) -> None:
        self.model_path = model_file


class TestLearnedRerankerContract(WithModelFile, RerankerContract):
    def make_reranker(self) -> Any:
        return LearnedReranker.from_options({"model": str(self.model_path)})


class TestLearnedDecisionContract(WithModelFile, DecisionBackendContract):
    def make_backend(self) -> Any:
        return LearnedDecisionBackend.from_options({"model": str(self.model_path)})
