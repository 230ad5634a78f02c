"""Non-finite numbers are refused at the boundary: vectors an embedder plugin returns (on the
write path and for a query), and fusion weights and scales in the configuration (NaN,
infinite, negative, or naming no configured source). Snapshot vectors: test_snapshot_limits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rankseam import ConfigurationError, open_memory
from rankseam.embedding import EmbedderDescriptor
from rankseam.search.fusion import ScoreSpec

#: The ``install`` fixture (conftest.py) takes ``(entry_point_name, module_source)``.
Install = Callable[..., None]

# An embedder plugin that answers NaN, +inf or a value too large for float32 for texts that
# contain a trigger word, and a sound vector otherwise.
_PLUGIN = """
import numpy as np
import rankseam
from rankseam.plugin.embedders import EmbedderDescriptor

BAD = {"nan": np.nan, "inf": np.inf, "huge": 1e300}


class Flaky:
    descriptor = EmbedderDescriptor("flaky", 8)

    def embed(self, texts):
        out = np.zeros((len(texts), 8), dtype=np.float64)
        for i, text in enumerate(texts):
            out[i, i % 8] = 1.0
            for word, value in BAD.items():
                if word in text.split():
                    out[i, 3] = value
        return out


@rankseam.hookimpl
def register_embedders(register):
    register("flaky", lambda options, context: Flaky(), summary="NaN for some texts (test)")
"""


@pytest.mark.parametrize("word", ["nan", "inf", "huge"])
def test_an_embedder_that_returns_non_finite_vectors_is_refused(
    install: Install, tmp_path: Path, word: str
) -> None:
    install("flaky", _PLUGIN)
    with open_memory(tmp_path / "m.sqlite3", embedder="flaky") as memory:
        memory.add("a sound memory about rivers", memory_id="ok")
        with pytest.raises(ConfigurationError, match="NaN or infinite values"):
            memory.add(f"a {word} memory", memory_id="bad")
        with pytest.raises(ConfigurationError, match="NaN or infinite values"):
            memory.ingest([{"text": "fine"}, {"text": f"then {word} here"}])
        assert memory.stats()["memories"] == 1  # nothing of the refused writes was stored
        # a query the embedder answers with NaN: a clear error, not a crash in fusion
        with pytest.raises(ConfigurationError, match="NaN or infinite values"):
            memory.search(f"rivers {word}")
        assert [h.ref.memory_id for h in memory.search("rivers").hits] == ["ok"]


_LOOSE = """
import numpy as np
import rankseam
from rankseam.plugin.embedders import EmbedderDescriptor


class Loose:
    # declares L2-normalised vectors; answers a component of 1e5 for texts saying "loud"
    descriptor = EmbedderDescriptor("loose", 8, normalization="l2")

    def embed(self, texts):
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i, i % 8] = 1e5 if "loud" in text.split() else 1.0
        return out


@rankseam.hookimpl
def register_embedders(register):
    register("loose", lambda options, context: Loose(), summary="unnormalised (test)")
"""


def test_an_embedder_that_declares_l2_and_does_not_normalise_is_refused(
    install: Install, tmp_path: Path
) -> None:
    # a component no store's index can hold (PostgreSQL's half-precision index stops at
    # 65,504) never reaches a store: every vector of an L2-normalised space has norm 1
    install("loose", _LOOSE)
    with open_memory(tmp_path / "m.sqlite3", embedder="loose") as memory:
        memory.add("a quiet memory", memory_id="ok")
        with pytest.raises(ConfigurationError, match="returned one of norm 100000"):
            memory.add("a loud memory", memory_id="bad")
        with pytest.raises(ConfigurationError, match="normalise the vectors, or declare"):
            memory.ingest([{"text": "fine"}, {"text": "then loud here"}])
        assert memory.stats()["memories"] == 1


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
@pytest.mark.parametrize(
    ("search", "words"),
    [
        ({"weights": {"vector": float("nan")}}, "numbers >= 0"),
        ({"weights": {"vector": float("inf")}}, "numbers >= 0"),
        ({"weights": {"lexical": -0.5}}, "numbers >= 0"),
        ({"weights": {"lexcial": 1.0}}, "did you mean 'lexical'"),
        ({"weights": {"vector": 0.5, "vectors": 0.3}}, "not configured sources"),
        ({"scales": {"vectr": "max"}}, "did you mean 'vector'"),
        ({"scales": {"vector": "log"}}, "must be one of"),
        ({"sources": ["lexical"], "weights": {"vector": 0.5}}, "the sources are ['lexical']"),
    ],
)
def test_bad_fusion_weights_and_scales_are_configuration_errors(
    search: dict[str, object], words: str, fusion: str
) -> None:
    with pytest.raises(ConfigurationError, match="search.") as info:
        open_memory(":memory:", config={"search": {**search, "fusion": fusion}})
    assert words in str(info.value)


def test_declared_weights_must_be_finite() -> None:
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(ValueError, match="finite number >= 0"):
            ScoreSpec("max", bad)
        with pytest.raises(ValueError, match="finite number >= 0"):
            EmbedderDescriptor("e", 4, fusion_weight=bad)


def test_good_weights_still_work() -> None:
    search = {"sources": ["lexical", "vector"], "weights": {"lexical": 1.0, "vector": 0.0}}
    config = {"search": {**search, "scales": {"vector": "max"}}}
    with open_memory(":memory:", config=config) as memory:
        memory.add("lanterns by the river", memory_id="r")
        hit = memory.search("river lanterns").hits[0]
        assert hit.ref.memory_id == "r" and hit.score == pytest.approx(1.0)
