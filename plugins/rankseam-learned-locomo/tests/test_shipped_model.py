"""The shipped model: installed under its name, small, loadable, carrying its training report;
and, where the LoCoMo dev data is present, the same figures through ``Memory.search(reranker=
"learned")`` and ``rankseam search --rerank learned`` as the training command reported."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rankseam.testing import invoke_cli
from rankseam_learned.features import FEATURE_SET
from rankseam_learned.installed import installed_models, resolve_model
from rankseam_learned.model import load
from rankseam_learned_locomo import model_path

MAX_BYTES = 1_000_000


def test_the_model_is_installed_by_name_and_loads() -> None:
    assert "locomo" in installed_models()
    model, label = resolve_model("locomo")
    assert label == "locomo"
    assert model.feature_set == FEATURE_SET
    assert model.decision is not None  # the decision backend's head
    assert model_path().stat().st_size <= MAX_BYTES


def test_the_model_carries_its_training_report() -> None:
    summary = load(model_path()).summary
    assert summary["source"] == "dataset locomo"
    assert summary["folds"] == 5 and summary["groups"] == 5  # leave-one-conversation-out
    assert summary["loses_to_default"] is False
    cv = summary["cross_validated"]
    assert cv["R@5"]["model"] >= 0.66 and cv["nDCG@10"]["model"] >= 0.60
    assert cv["nDCG@10"]["model"] > cv["nDCG@10"]["default"]


def test_the_licence_is_the_data_s() -> None:
    root = Path(__file__).resolve().parents[1]
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert 'license = "CC-BY-NC-4.0"' in text
    assert "CC BY-NC 4.0" in (root / "LICENSE").read_text(encoding="utf-8")
    assert "CC BY-NC 4.0" in (root / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_searches_with_the_shipped_model_match_the_training_figures() -> None:
    """Every headline LoCoMo dev question through Memory.search(reranker="learned"): R@5 and
    nDCG@10 equal the figures the training command reported for this model on those questions
    (its ``dev`` figures), to the last digit."""
    from rankseam_learned.benchdata import score
    from rankseam_learned.judgements import dataset_stores

    if not os.environ.get("RANKSEAM_DATA") and not _data_above():
        pytest.skip("the LoCoMo dev data is not here: set RANKSEAM_DATA to the shared/data folder")
    dev = load(model_path()).summary["dev"]
    got: dict[str, list[float]] = {"R@5": [], "nDCG@10": []}
    with dataset_stores("locomo") as stores:
        for store in stores:
            group_of = store.group_of or {}
            for judgement in store.judgements:
                if not judgement.headline:
                    continue
                result = _with_model(store.memory, judgement.query)
                groups = [group_of.get(h.ref.memory_id, h.ref.memory_id) for h in result.hits]
                for metric, value in score(groups, judgement.relevance).items():
                    got[metric].append(value)
        first = stores[0]
        question = next(j for j in first.judgements if j.headline)
        assert first.memory.path is not None
        cli = invoke_cli(
            [
                "search",
                question.query,
                "--db",
                str(first.memory.path),
                "--rerank",
                "learned",
                "--learned-model",
                "locomo",
                "--limit",
                "10",
                "--pool",
                "30",
                "--json",
            ]
        )
        assert cli.exit_code == 0, cli.output
        api = _with_model(first.memory, question.query)
        assert [h["memory_id"] for h in json.loads(cli.stdout)["hits"]] == [
            h.ref.memory_id for h in api.hits
        ]
    assert len(got["R@5"]) == load(model_path()).summary["headline_queries"]
    for metric, values in got.items():
        assert round(sum(values) / len(values), 6) == pytest.approx(dev[metric], abs=1e-6)


def _with_model(memory: Any, question: str) -> Any:
    """The top 10 of ``question`` reranked by the shipped model, as the training scored it."""
    return memory.search(
        question, limit=10, pool=30, reranker="learned", reranker_options={"model": "locomo"}
    )


def _data_above() -> bool:
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        for parent in (start, *start.parents):
            if (parent / "shared" / "data" / "locomo-dev.json").is_file():
                return True
    return False
