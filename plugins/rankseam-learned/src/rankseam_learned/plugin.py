"""The hooks of rankseam-learned: the reranker ``learned`` and the decision backend
``learned`` (docs/plugins/learned.md), and the command ``rankseam train``
(:mod:`rankseam_learned.commands`). The reranker and the backend load their model when they
are built (at assembly), so a missing, mismatched or damaged model file fails there, naming
the file."""

from __future__ import annotations

from typing import Any

from rankseam.plugin import DecisionBackendRegister, RerankerRegister, hookimpl
from rankseam_learned.commands import register_commands
from rankseam_learned.decision import LearnedDecisionBackend, LearnedDecisionOptions
from rankseam_learned.reranker import LearnedOptions, LearnedReranker

__all__ = ["register_commands", "register_decision_backends", "register_rerankers"]


def _reranker(options: LearnedOptions, context: Any) -> LearnedReranker:
    return LearnedReranker.from_options(options)


def _backend(options: LearnedDecisionOptions, context: Any) -> LearnedDecisionBackend:
    return LearnedDecisionBackend.from_options(options)


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "learned",
        _reranker,
        summary="a learned model over pool features (scores, terms, neighbours, sources)",
        options=LearnedOptions,
    )


@hookimpl
def register_decision_backends(register: DecisionBackendRegister) -> None:
    register(
        "learned",
        _backend,
        summary="yes / no / abstain from a learned model's probability (thresholds: options)",
        options=LearnedDecisionOptions,
    )
