"""rankseam-learned: a reranker and a decision backend that learn from judgements.

Registers the reranker ``learned`` and the decision backend ``learned`` (docs/plugins/learned.md).
The runtime needs numpy only: a model file is data (plain arrays in a checksummed JSON file,
:mod:`rankseam_learned.model`), scored without scikit-learn. Training (scikit-learn, the
``train`` extra) fits a model from judgements and exports it to that format.

Modules: :mod:`~rankseam_learned.features` (the versioned feature set),
:mod:`~rankseam_learned.pools` (recording the rows of real searches),
:mod:`~rankseam_learned.model` (the model file: export, load, checks),
:mod:`~rankseam_learned.heads` (scoring a model's heads with numpy),
:mod:`~rankseam_learned.sklearn_export` (a fitted scikit-learn classifier as a head),
:mod:`~rankseam_learned.installed` (which file a ``model`` option names),
:mod:`~rankseam_learned.reranker` and :mod:`~rankseam_learned.decision` (the two components),
:mod:`~rankseam_learned.stagecost` (the rerank stage's cost on real pools).
"""

from __future__ import annotations

#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"
