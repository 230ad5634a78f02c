"""The bench harness's data sets and metrics, as training reads them.

This is the one module of the distribution that imports ``rankseam.bench`` (an exemption named
in the lint configuration, docs/architecture.md): training on a bench data set reads it with
the harness's own loaders, and scores every query with the harness's own metrics and sign
test, so that the training command's figures are ``rankseam bench quality``'s figures.

Data set names (``rankseam train --dataset``): ``locomo`` (``locomo-dev.json``), ``scifact``
(the SciFact train claims, ``scifact-train`` with ``qrels/train.tsv``), each found under
``$RANKSEAM_DATA``, else in the first ``shared/data`` folder above the working directory; or
any spec of ``rankseam bench quality --dataset`` (``locomo:PATH``, ``beir:PATH@SPLIT``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from rankseam.bench.datasets import HEADLINE_CATEGORIES, Dataset, load_dataset
from rankseam.bench.metrics import ndcg_at_k, recall_at_k
from rankseam.bench.paired import sign_test
from rankseam.errors import ConfigurationError

__all__ = [
    "HEADLINE_CATEGORIES",
    "METRICS",
    "SCIFACT_FOLDER",
    "Dataset",
    "find_shared",
    "load",
    "score",
    "sign_test",
]

#: The folder of the SciFact train claims under the shared data folder.
SCIFACT_FOLDER = "scifact-train"
#: The metrics training reports, in order: the keys of :func:`score`.
METRICS = ("R@5", "nDCG@10")


def find_shared(name: str) -> Path:
    """``name`` under ``$RANKSEAM_DATA``, else under the first ``shared/data`` folder above
    the working directory or this package that holds it."""
    env = os.environ.get("RANKSEAM_DATA")
    if env:
        path = Path(env) / name
        if path.exists():
            return path
        raise ConfigurationError(
            f"RANKSEAM_DATA={env!r} holds no {name}; point it at the folder that has it"
        )
    for start in (Path.cwd().resolve(), Path(__file__).resolve().parent):
        for parent in (start, *start.parents):
            path = parent / "shared" / "data" / name
            if path.exists():
                return path
    raise ConfigurationError(
        f"could not find {name}: set RANKSEAM_DATA to the folder that holds it, or name the "
        "data set by its path (locomo:PATH, beir:PATH@SPLIT)"
    )


def load(spec: str) -> Dataset:
    """The data set ``spec`` names: ``locomo``, ``scifact`` or a ``rankseam bench quality
    --dataset`` spec."""
    if spec == "scifact":
        return load_dataset(f"beir:{find_shared(SCIFACT_FOLDER)}@train")
    return load_dataset(spec)


def score(ranked_groups: Sequence[str], relevance: Mapping[str, float]) -> dict[str, float]:
    """The metrics of one query's ranked groups (best first), as the bench scores them."""
    return {
        "R@5": recall_at_k(ranked_groups, relevance, 5),
        "nDCG@10": ndcg_at_k(ranked_groups, relevance, 10),
    }
