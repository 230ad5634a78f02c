"""The embedder contract: what every embedder must do, as a pytest base class.

    from rankseam.testing import EmbedderContract

    class TestMyEmbedder(EmbedderContract):
        def make_embedder(self):
            return MyEmbedder()

Standard tests: the descriptor is an :class:`~rankseam.embedding.EmbedderDescriptor`;
``embed`` returns float32 of shape ``(len(texts), dimensions)`` (also for an empty list);
output is finite and deterministic (same text, same vector, whatever the batch); with
``normalization = "l2"`` every row has norm 1 (or 0 for a text without features, such as the
empty string); empty and odd texts never raise; different texts can be told apart.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.testing.base import Capability, ContractBase

__all__ = ["EmbedderContract"]

_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Ada drinks green tea every morning",
    "日本語のテキストも埋め込める",
    "emoji 🙂 and accents: café, naïve, Ærøskøbing",
    "x",
    "1234 5678",
]
_ODD = ["", " ", "\n\t", "!!!", "a" * 20_000]


class EmbedderContract(ContractBase):
    """Subclass and implement :meth:`make_embedder`."""

    _is_contract = True
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.DETERMINISTIC})
    known_capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.DETERMINISTIC})

    def make_embedder(self) -> Any:
        raise NotImplementedError("implement make_embedder() to return your embedder")

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.make_embedder().embed(texts)

    def test_descriptor(self) -> None:
        emb = self.make_embedder()
        d = emb.descriptor
        assert isinstance(d, EmbedderDescriptor)
        assert d.key == self.make_embedder().descriptor.key
        assert d.normalization in ("l2", "none")

    def test_shape_and_dtype(self) -> None:
        emb = self.make_embedder()
        dims = emb.descriptor.dimensions
        out = emb.embed(_TEXTS)
        assert isinstance(out, np.ndarray)
        assert out.dtype == np.float32
        assert out.shape == (len(_TEXTS), dims)
        empty = emb.embed([])
        assert empty.shape == (0, dims) and empty.dtype == np.float32

    def test_finite(self) -> None:
        assert np.isfinite(self._embed(_TEXTS + _ODD)).all()

    def test_deterministic_across_instances_and_batches(self) -> None:
        self.require(Capability.DETERMINISTIC)
        one = self.make_embedder().embed(_TEXTS)
        two = self.make_embedder().embed(list(reversed(_TEXTS)))[::-1]
        single = np.vstack([self.make_embedder().embed([t]) for t in _TEXTS])
        np.testing.assert_allclose(one, two, rtol=0, atol=1e-6)
        np.testing.assert_allclose(one, single, rtol=0, atol=1e-6)

    def test_normalisation(self) -> None:
        emb = self.make_embedder()
        if emb.descriptor.normalization != "l2":
            return
        norms = np.linalg.norm(emb.embed(_TEXTS + _ODD), axis=1)
        ok = np.isclose(norms, 1.0, atol=1e-4) | np.isclose(norms, 0.0, atol=1e-6)
        assert ok.all(), f"row norms {norms} are neither 1 nor 0"
        assert np.isclose(norms[: len(_TEXTS)], 1.0, atol=1e-4).all()

    def test_empty_and_odd_texts(self) -> None:
        out = self._embed(_ODD)
        assert out.shape[0] == len(_ODD)

    def test_distinguishes_texts(self) -> None:
        out = self._embed(_TEXTS[:2])
        assert not np.allclose(out[0], out[1])
