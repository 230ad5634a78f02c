"""The hashed embedder's pure-Python path (small batches: a query) gives exactly the vectors of
scikit-learn's compiled path (large batches), so a search never needs to import scikit-learn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rankseam.default_plugins.hashed_embedder import SMALL_BATCH, HashedEmbedder, murmurhash3_32

sklearn_murmur = pytest.importorskip("sklearn.utils").murmurhash3_32

SETTINGS = [
    {},
    {"word_ngrams": (1, 3), "char_ngrams": (2, 4), "dimensions": 1000, "char_weight": 0.3},
    {"word_ngrams": (2, 3), "char_ngrams": (1, 1), "dimensions": 17, "char_weight": 1.0},
]
text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=80) | st.sampled_from(
    ["", "  ", "!!!", "A  b\tc\n\nd", "漢字 テスト 🙂 ünïcødé", "I a I"]
)


def both_paths(embedder: HashedEmbedder, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    padded = texts + ["padding so the batch is large"] * (SMALL_BATCH + 1)
    compiled = embedder.embed(padded)[: len(texts)]
    pure = np.concatenate([embedder.embed(texts[i : i + 1]) for i in range(len(texts))])
    return compiled, pure


@given(st.binary(max_size=40))
def test_murmurhash_matches_scikit_learn(data: bytes) -> None:
    assert murmurhash3_32(data) == sklearn_murmur(data, 0, positive=False)


@settings(max_examples=150, deadline=None)
@given(st.lists(text, min_size=1, max_size=6), st.sampled_from(range(len(SETTINGS))))
def test_small_and_large_batches_embed_identically(texts: list[str], which: int) -> None:
    compiled, pure = both_paths(HashedEmbedder(**SETTINGS[which]), texts)
    assert np.array_equal(compiled, pure)


def test_identical_on_real_dialogue() -> None:
    data = Path(os.environ.get("RANKSEAM_DATA", Path(__file__).parents[3] / "shared" / "data"))
    path = data / "locomo-dev.json"
    if not path.exists():
        pytest.skip(f"LoCoMo dev data not found at {path}; put ../shared/data next to the checkout")
    texts: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
        elif isinstance(node, str) and len(node) > 15:
            texts.append(node)

    walk(json.loads(path.read_text()))
    compiled, pure = both_paths(HashedEmbedder(), texts[:1500])
    assert np.array_equal(compiled, pure)


def test_a_search_does_not_import_scikit_learn(tmp_path: Path) -> None:
    code = (
        "import sys, rankseam\n"
        f"m = rankseam.open_memory({str(tmp_path / 'm.sqlite3')!r})\n"
        "m.add('Dana\\'s birthday dinner is on Friday', memory_id='d')\n"
        "assert m.search('dinner with dana', 3).hits[0].ref.memory_id == 'd'\n"
        "print(sorted(n for n in sys.modules if n.split('.')[0] in ('sklearn', 'scipy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
