"""rankseam-rerankers: relevance rerankers (cross-encoders and more) through AnswerDotAI's
rerankers library, with their scores.

Registers the reranker ``rerankers``. Options (``[rerankers.rerankers]`` or
``--rerankers-<option>``): ``model`` (required: a local model directory or a name as the library
takes it), ``model_type`` (the library's, e.g. ``"cross-encoder"``), ``lang``, ``batch_size``,
``device``, ``dtype``, ``max_length``, ``local_files_only``, ``api_key``, ``url`` and
``deterministic``.

Importing or registering this module imports neither torch nor the library; building the
reranker loads the model, once per process and configuration. See docs/plugins/rerankers.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.plugin import RerankerRegister, hookimpl
from rankseam_rerankers.options import RerankersOptions
from rankseam_rerankers.reranker import POLICY_ID, RerankersReranker, decision_from_results

__all__ = [
    "POLICY_ID",
    "RerankersOptions",
    "RerankersReranker",
    "decision_from_results",
    "make_reranker",
    "register_rerankers",
]


def make_reranker(options: RerankersOptions | Mapping[str, Any], context: Any) -> RerankersReranker:
    """Factory: load the model (or find it loaded), so a model that cannot load is a
    configuration error when the reranker is assembled, not a failed search. ``options``: as
    the host checked them, or the ``[rerankers.rerankers]`` table (checked here)."""
    if not isinstance(options, RerankersOptions):
        options = RerankersOptions.from_mapping(options)
    return RerankersReranker(options)


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "rerankers",
        make_reranker,
        summary="relevance reranker via the rerankers library (cross-encoder, T5, ColBERT, "
        "APIs), with its scores; option model = local directory or hub name",
        options=RerankersOptions,
    )


#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"
