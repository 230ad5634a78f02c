"""The bench harness's data sets and metrics, as training reads them.

This is the one module of the distribution that imports ``rankseam.bench`` (an exemption named
in the lint configuration, docs/architecture.md): training on a bench data set reads it with
the harness's own loaders, and scores every query with the harness's own metrics and sign
test, so that the training command's figures are ``rankseam bench quality``'s figures.

Data set names (``rankseam train --dataset``): ``locomo`` (``locomo-dev.json``), ``scifact``
(the SciFact train claims, ``scifact-train`` with ``qrels/train.tsv``), each found under
``$RANKSEAM_DATA``, else in the first ``shared/data`` folder above the working directory
that holds ``locomo-dev.json``; or
any spec of ``rankseam bench quality --dataset`` (``locomo:PATH``, ``beir:PATH@SPLIT``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rankseam.bench.datasets import (
    HEADLINE_CATEGORIES,
    LOCOMO_FILE,
    Dataset,
    find_locomo,
    load_dataset,
)
from rankseam.bench.metrics import ndcg_at_k, recall_at_k
from rankseam.bench.paired import sign_test
from rankseam.errors import ConfigurationError

__all__ = [
    "HEADLINE_CATEGORIES",
    "METRICS",
    "SCIFACT_FOLDER",
    "Dataset",
    "load",
    "score",
    "sign_test",
]

#: The folder of the SciFact train claims under the shared data folder.
SCIFACT_FOLDER = "scifact-train"
#: The metrics training reports, in order: the keys of :func:`score`.
METRICS = ("R@5", "nDCG@10")


def load(spec: str) -> Dataset:
    """The data set ``spec`` names: ``locomo``, ``scifact`` or a ``rankseam bench quality
    --dataset`` spec."""
    if spec == "scifact":
        # beside locomo-dev.json in the shared data folder (RANKSEAM_DATA, else shared/data
        # above the working directory), found as the bench finds LoCoMo
        folder = find_locomo().parent / SCIFACT_FOLDER
        if not folder.is_dir():
            raise ConfigurationError(
                f"no {SCIFACT_FOLDER} folder beside {LOCOMO_FILE} in {folder.parent}; name the "
                "data set by its path instead: --dataset beir:PATH@train"
            )
        return load_dataset(f"beir:{folder}@train")
    return load_dataset(spec)


def score(ranked_groups: Sequence[str], relevance: Mapping[str, float]) -> dict[str, float]:
    """The metrics of one query's ranked groups (best first), as the bench scores them."""
    return {
        "R@5": recall_at_k(ranked_groups, relevance, 5),
        "nDCG@10": ndcg_at_k(ranked_groups, relevance, 10),
    }
