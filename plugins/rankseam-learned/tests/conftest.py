"""Shared test set-up: every test runs off the network; small models trained here with
scikit-learn (the test extra) and written as model files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rankseam.testing import block_off_host_connections
from rankseam_learned.features import FEATURE_SET, FEATURES, PAIR_FEATURES
from rankseam_learned.model import export

#: The column the test models learn from: query-term coverage (the share of query terms a
#: candidate holds), so a trained model prefers the candidate that holds them all.
SIGNAL = "term_coverage"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network (loopback still works)."""
    block_off_host_connections(monkeypatch)


def training_rows(width: int, column: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Random rows whose label follows ``column`` (above 0.6: relevant), with noise."""
    rng = np.random.default_rng(seed)
    x = rng.random((1500, width))
    y = (x[:, column] + 0.1 * rng.normal(size=len(x)) > 0.6).astype(int)
    return x, y


def fit_model_bytes(kind: str = "gradient_boosting", decision: bool = True) -> bytes:
    """A model file: a rerank head of ``kind`` and (``decision``) a logistic decision head,
    both learning that query-term coverage means relevance."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = training_rows(len(FEATURES), FEATURES.index(SIGNAL))
    if kind == "gradient_boosting":
        rerank = HistGradientBoostingClassifier(max_iter=30, random_state=0).fit(x, y)
    else:
        rerank = make_pipeline(StandardScaler(), LogisticRegression()).fit(x, y)
    head = None
    if decision:
        xp, yp = training_rows(len(PAIR_FEATURES), PAIR_FEATURES.index(SIGNAL), seed=1)
        head = make_pipeline(StandardScaler(), LogisticRegression()).fit(xp, yp)
    return export(rerank, FEATURE_SET, {"data": "synthetic test rows"}, decision=head)


@pytest.fixture(scope="session")
def model_bytes() -> bytes:
    return fit_model_bytes()


@pytest.fixture
def model_file(tmp_path: Path, model_bytes: bytes) -> Path:
    path = tmp_path / "model.json"
    path.write_bytes(model_bytes)
    return path


@pytest.fixture
def logistic_model_file(tmp_path: Path) -> Path:
    path = tmp_path / "logistic.json"
    path.write_bytes(fit_model_bytes("logistic"))
    return path


@pytest.fixture
def rerank_only_model_file(tmp_path: Path) -> Path:
    """A model file without a decision head."""
    path = tmp_path / "rerank-only.json"
    path.write_bytes(fit_model_bytes(decision=False))
    return path
