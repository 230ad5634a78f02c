"""A fitted scikit-learn classifier as a model file's head: plain numbers.

scikit-learn is imported inside these functions only (the ``train`` extra): loading and
scoring a model never import it. :func:`rankseam_learned.model.export` writes the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["boosting_document", "head_document"]


def head_document(estimator: Any, features: tuple[str, ...]) -> dict[str, Any]:
    """The head of a model file (plain numbers) of the fitted ``estimator`` over ``features``
    (see :func:`rankseam_learned.model.export` for what is accepted)."""
    from sklearn.ensemble import HistGradientBoostingClassifier  # the train extra
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    width = getattr(estimator, "n_features_in_", None)
    if width != len(features):
        raise ValueError(
            f"the estimator was fitted on {width} columns, but {len(features)} feature names "
            "were given"
        )
    classes = getattr(estimator, "classes_", None)
    if classes is None or len(classes) != 2:
        raise ValueError("only a fitted binary classifier can be exported (two classes)")
    mean = np.zeros(len(features))
    scale = np.ones(len(features))
    final = estimator
    if isinstance(estimator, Pipeline):
        steps = [step for _, step in estimator.steps if step not in (None, "passthrough")]
        final = steps[-1]
        for step in steps[:-1]:
            if not isinstance(step, StandardScaler):
                raise ValueError(
                    f"a Pipeline step {type(step).__name__} cannot be exported; only "
                    "StandardScaler may come before the classifier"
                )
            step_mean = step.mean_ if step.mean_ is not None else np.zeros(len(features))
            step_scale = step.scale_ if step.scale_ is not None else np.ones(len(features))
            # (x - m1) / s1 then (y - m2) / s2 = (x - (m1 + m2 s1)) / (s1 s2)
            mean = mean + step_mean * scale
            scale = scale * step_scale
        if not isinstance(final, LogisticRegression):
            raise ValueError("a Pipeline can be exported only when it ends in LogisticRegression")
    if isinstance(final, LogisticRegression):
        coef = np.asarray(final.coef_, dtype=np.float64)
        if coef.shape != (1, len(features)):
            raise ValueError(
                f"a binary LogisticRegression has one row of coefficients, not {coef.shape}"
            )
        return {
            "kind": "logistic",
            "features": list(features),
            "coef": coef[0].tolist(),
            "intercept": float(np.asarray(final.intercept_).reshape(-1)[0]),
            "mean": mean.tolist(),
            "scale": scale.tolist(),
        }
    if isinstance(final, HistGradientBoostingClassifier):
        return boosting_document(final, features)
    raise ValueError(
        f"{type(final).__name__} cannot be exported; export HistGradientBoostingClassifier or "
        "LogisticRegression (optionally after a StandardScaler in a Pipeline)"
    )


def boosting_document(estimator: Any, features: tuple[str, ...]) -> dict[str, Any]:
    """The ``gradient_boosting`` head of a fitted binary ``HistGradientBoostingClassifier``."""
    # scikit-learn offers no public export of its histogram trees: the fitted predictors
    # (a list per iteration of TreePredictor, whose ``nodes`` is a structured array) and the
    # baseline are read from the estimator's attributes; the load-back check in export() and
    # the tests against predict_proba catch a change of their layout.
    if getattr(estimator, "n_trees_per_iteration_", 1) != 1:
        raise ValueError("only a binary HistGradientBoostingClassifier can be exported")
    is_categorical = getattr(estimator, "is_categorical_", None)
    if is_categorical is not None and np.asarray(is_categorical).any():
        raise ValueError(
            "categorical features cannot be exported (the model format holds numeric "
            "splits only); fit with categorical_features=None"
        )
    predictors = vars(estimator)["_predictors"]
    baseline = float(np.asarray(vars(estimator)["_baseline_prediction"]).reshape(-1)[0])
    trees = []
    for iteration in predictors:
        (predictor,) = iteration
        nodes = predictor.nodes
        if nodes["is_categorical"].any():
            raise ValueError("a tree splits on a categorical feature; it cannot be exported")
        leaf = nodes["is_leaf"].astype(bool)
        trees.append(
            {
                "feature": np.where(leaf, -1, nodes["feature_idx"]).astype(int).tolist(),
                # a split of the missing values from all others has the threshold +inf, which
                # JSON cannot hold: the largest float sends every finite value the same way
                "threshold": np.where(
                    leaf, 0.0, np.minimum(nodes["num_threshold"], np.finfo(np.float64).max)
                ).tolist(),
                "left": np.where(leaf, -1, nodes["left"].astype(np.int64)).tolist(),
                "right": np.where(leaf, -1, nodes["right"].astype(np.int64)).tolist(),
                "missing_left": np.where(leaf, 0, nodes["missing_go_to_left"]).astype(int).tolist(),
                "value": np.where(leaf, nodes["value"], 0.0).tolist(),
            }
        )
    return {
        "kind": "gradient_boosting",
        "features": list(features),
        "baseline": baseline,
        "trees": trees,
    }
