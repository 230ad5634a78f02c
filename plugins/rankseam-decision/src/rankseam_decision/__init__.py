"""rankseam-decision: rerank by asking a decision backend one narrow question per candidate.

Registers the ``decision`` reranker. See :mod:`rankseam_decision.reranker` for the policy and
``docs/plugins/decision.md`` for options, failure behaviour and cost.
"""

from __future__ import annotations

from rankseam.plugin import RerankerRegister, hookimpl
from rankseam_decision.reranker import POLICY_ID, DecisionOptions, DecisionReranker, from_options

__all__ = ["POLICY_ID", "DecisionOptions", "DecisionReranker", "from_options"]


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "decision",
        from_options,
        summary="asks a decision backend about each coarse candidate; keeps yes/abstain in order",
        options=DecisionOptions,
    )


#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"
