"""Same data, same ranking: the check behind ``StoreContract.test_ranks_like_the_embedded_store``.

The same records go into the store under test and into an embedded SQLite store; the same
queries are searched on both (exactly: a store this small is never searched through an
approximate index), once with the built-in hashed embedder and once with
:class:`MinmaxEmbedder`, a small deterministic embedder that declares the ``minmax`` fusion
scale. The host owns every channel's scale, weight and fusion, so

- a search over the channels that do not depend on text analysis (vector + importance) gives
  the same ranked memories with the same scores (to 6 decimals) on every store;
- the full default search (lexical too) gives top-10 lists that overlap by at least
  :data:`MIN_OVERLAP` (a store's own text analysis, e.g. PostgreSQL's stemmer, may differ).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.hookspecs import hookimpl

__all__ = ["MINMAX_EMBEDDER", "MIN_OVERLAP", "MinmaxEmbedder", "check_same_ranking"]

#: Least share of the default search's top-10 memories that both stores must have in common.
MIN_OVERLAP = 0.95
#: The name the kit registers :class:`MinmaxEmbedder` under while the check runs.
MINMAX_EMBEDDER = "rankseam-kit-minmax"
#: Scores must agree to this many decimals.
DECIMALS = 6

_WORDS = (
    "harbour lantern ferry island gull heron marsh tide cliff beacon orchard apple cider "
    "barley mill river stone bridge meadow fox badger owl kettle copper lamp candle window "
    "garden shed ladder rope anchor sail compass map letter ink quill clock bell tower"
).split()
_FILLER = "the a of at on with near and from by".split()
_QUERIES = (
    "ferry to the island",
    "heron in the marsh at high tide",
    "copper kettle and lamp",
    "orchard apple cider",
    "old stone bridge over the river",
    "owl and badger in the meadow",
    "anchor rope and sail",
    "map compass letter",
    "clock tower bell",
    "candle by the window",
)


def corpus(n: int = 160) -> list[dict[str, Any]]:
    """``n`` deterministic records: a few of :data:`_WORDS` each, with filler words, varied
    importance."""
    rng = random.Random(24)
    out = []
    for i in range(n):
        words = rng.sample(_WORDS, rng.randint(3, 7))
        text = " ".join(w if rng.random() < 0.7 else f"{rng.choice(_FILLER)} {w}" for w in words)
        out.append({"id": f"r{i:03d}", "text": f"{text} {i}", "importance": rng.randint(1, 9) / 10})
    return out


class MinmaxEmbedder:
    """A small deterministic embedder whose cosines crowd into a narrow band (as a semantic
    model's do) and that therefore declares the ``minmax`` fusion scale: hashed lower-cased
    words (CRC-32, signed) plus a constant component shared by every text, L2-normalised."""

    dimensions = 64

    def __init__(self) -> None:
        self.descriptor = EmbedderDescriptor(
            name=MINMAX_EMBEDDER,
            dimensions=self.dimensions,
            normalization="l2",
            revision="1",
            fusion_weight=0.8,
            fusion_scale="minmax",
        )

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, 0] = 2.0  # shared by every text: cosines crowd into a narrow band
            for word in text.lower().split():
                h = zlib.crc32(word.encode("utf-8"))
                out[row, 1 + h % (self.dimensions - 1)] += 1.0 if h & 0x80000000 else -1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


class _MinmaxPlugin:
    """The kit's test plugin: registers :class:`MinmaxEmbedder` as :data:`MINMAX_EMBEDDER`."""

    @hookimpl
    def register_embedders(self, register: Any) -> None:
        register(
            MINMAX_EMBEDDER, lambda options, context: MinmaxEmbedder(), summary="kit test embedder"
        )


@contextmanager
def minmax_embedder_registered() -> Iterator[None]:
    """:class:`MinmaxEmbedder` registered (as :data:`MINMAX_EMBEDDER`) while the block runs,
    by a plugin loaded as an installed one would be (the registry is restored afterwards)."""
    from rankseam.plugins import get_registry, plugin_installed

    if get_registry().get("embedder", MINMAX_EMBEDDER) is not None:
        yield
        return
    with plugin_installed("rankseam-kit-minmax", _MinmaxPlugin()):
        yield


Opener = Callable[..., AbstractContextManager[Any]]


def _ranked(memory: Any, query: str) -> list[tuple[str, float]]:
    return [(h.ref.memory_id, h.score) for h in memory.search(query, 10)]


def _searches(open_: Opener, target: str, embedder: str) -> tuple[list[Any], list[Any]]:
    """Per query: the vector + importance ranking and the default search's ranking."""
    with open_(target, embedder=embedder, sources=["vector", "importance"]) as m:
        exact = [_ranked(m, q) for q in _QUERIES]
    with open_(target, embedder=embedder) as m:
        full = [_ranked(m, q) for q in _QUERIES]
    return exact, full


def check_same_ranking(open_: Opener, target: str, reference: str) -> None:
    """Load :func:`corpus` into ``target`` and into the SQLite file ``reference`` (opened
    with ``open_(target, **overrides)``) and compare their rankings (module docstring)."""
    records = corpus()
    with minmax_embedder_registered():
        for where in (target, reference):
            with open_(where) as m:
                assert m.stats()["memories"] == 0, "store_target must be an empty store"
                m.ingest(records, batch_size=64)
            with open_(where, embedder=MINMAX_EMBEDDER) as m:
                m.reembed()
        for embedder in ("hashed", MINMAX_EMBEDDER):
            exact, full = _searches(open_, target, embedder)
            want_exact, want_full = _searches(open_, reference, embedder)
            for query, got, want in zip(_QUERIES, exact, want_exact, strict=True):
                assert [i for i, _s in got] == [i for i, _s in want], (
                    f"vector + importance search {query!r} with the {embedder!r} embedder "
                    f"ranks differently from the embedded store: {got} != {want}"
                )
                for (mid, score), (_mid, expected) in zip(got, want, strict=True):
                    assert abs(score - expected) < 10**-DECIMALS, (
                        f"vector + importance search {query!r} with the {embedder!r} embedder "
                        f"scores {mid!r} {score:.8f}; the embedded store {expected:.8f}"
                    )
            shared = sum(
                len({i for i, _s in got} & {i for i, _s in want})
                for got, want in zip(full, want_full, strict=True)
            )
            total = sum(len(want) for want in want_full)
            assert total and shared / total >= MIN_OVERLAP, (
                f"the default search with the {embedder!r} embedder shares {shared} of "
                f"{total} top-10 memories with the embedded store; at least "
                f"{MIN_OVERLAP:.0%} must be the same"
            )
