"""The decision role: the port through which a plugin asks one narrow yes/no/abstain question
(the backend Protocol, the request, the result, the roles that decide how a failure is treated,
and the two questions the host asks). docs/plugin-api/decision.md says what each name is for,
docs/decision-port.md how the port works; a backend registers itself with
:class:`rankseam.plugin.DecisionBackendRegister`.

The names are defined in the host's internal modules and re-exported here, the one place a
plugin imports them from.
"""

from __future__ import annotations

from rankseam.decision import (
    RERANK_DECISION_KIND,
    RERANK_QUESTION,
    RERANK_ROLE,
    WRITE_GATE_ROLE,
    DecisionBackend,
    DecisionFailurePolicy,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    Role,
    checked_result,
    rerank_request,
    unwrap,
    write_gate_request,
)

__all__ = [
    "RERANK_DECISION_KIND",
    "RERANK_QUESTION",
    "RERANK_ROLE",
    "WRITE_GATE_ROLE",
    "DecisionBackend",
    "DecisionFailurePolicy",
    "DecisionOutcome",
    "DecisionRequest",
    "DecisionResult",
    "Role",
    "checked_result",
    "rerank_request",
    "unwrap",
    "write_gate_request",
]
