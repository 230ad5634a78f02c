"""The ``learned`` decision backend: yes / no / abstain from a model's probability.

A decision request carries one candidate's text (``subject``) and the query (``evidence``),
no pool: the backend scores the pair with the model's ``decision`` head, which reads only
:data:`~rankseam_learned.features.PAIR_FEATURES` (the columns computed from the query and one
text; a model file without a ``decision`` head is refused at assembly, naming the file).

Thresholds (options, docs/plugins/learned.md "Decision thresholds"): the probability ``p``

- ``p >= yes_threshold`` (default 0.5): ``YES``;
- ``p < no_threshold`` (default 0.05): ``NO``;
- in between: ``ABSTAIN`` (the ``decision`` reranker keeps ``YES`` and ``ABSTAIN`` by default).

Each result carries ``p`` as its ``confidence`` and in its ``rationale`` (``"p=0.123456"``).
The write gate's question (is this
text worth storing?) is not what the model learned: it abstains, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from rankseam.errors import ConfigurationError
from rankseam.plugin import OptionError, option, parse_options
from rankseam.plugin.decision import (
    RERANK_DECISION_KIND,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
)
from rankseam.types import Usage
from rankseam_learned.features import PAIR_FEATURES, compute_pairs
from rankseam_learned.installed import model_option, resolve_model
from rankseam_learned.model import Model
from rankseam_learned.reranker import model_descriptor

__all__ = ["POLICY_VERSION", "LearnedDecisionBackend", "LearnedDecisionOptions"]

#: The backend's policy; the model's checksum is appended as for the reranker.
POLICY_VERSION = "rankseam.decision.learned.v1"
_NO_USAGE = Usage.zero()


def _below_yes(inst: LearnedDecisionOptions, _attribute: object, value: float) -> None:
    if not value < inst.yes_threshold:
        raise OptionError(
            "no_threshold",
            f"({value}) must be below yes_threshold ({inst.yes_threshold}); a probability "
            "between them abstains",
        )


@attrs.frozen
class LearnedDecisionOptions:
    """The options of the ``learned`` decision backend (``[decision_backends.learned]``)."""

    model: str = model_option()
    yes_threshold: float = option(
        0.5, ge=0, le=1, help="probability from which a candidate is a yes"
    )
    no_threshold: float = option(
        0.05,
        ge=0,
        le=1,
        help="probability below which a candidate is a no (between the two: abstain)",
        validator=_below_yes,
    )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> LearnedDecisionOptions:
        return parse_options(cls, options, "decision_backends.learned")


@attrs.frozen(eq=False)
class LearnedDecisionBackend:
    """Answers the rerank question from the ``decision`` head's probability."""

    deterministic: ClassVar[bool] = True

    model: Model
    label: str = "<model>"
    yes_threshold: float = 0.5
    no_threshold: float = 0.05

    def __attrs_post_init__(self) -> None:
        if self.model.decision is None:
            raise ConfigurationError(
                f"model file {self.model.source!r} has no decision head, which the learned "
                "decision backend needs (a probability from the query and one text alone); "
                "retrain it with one (docs/plugins/learned.md, 'Training'), or use the learned "
                "reranker instead"
            )

    @classmethod
    def from_options(
        cls, options: LearnedDecisionOptions | Mapping[str, Any]
    ) -> LearnedDecisionBackend:
        opts = (
            options
            if isinstance(options, LearnedDecisionOptions)
            else LearnedDecisionOptions.from_mapping(options)
        )
        model, label = resolve_model(opts.model)
        return cls(model, label, opts.yes_threshold, opts.no_threshold)

    @property
    def policy_id(self) -> str:
        return f"{POLICY_VERSION}+sha256:{self.model.sha256[:16]}"

    @property
    def descriptor(self) -> Mapping[str, Any]:
        out = model_descriptor(self.model, self.label)
        head = self.model.decision
        if head is not None:
            out["kind"] = head.kind
        return {
            "name": "learned",
            **out,
            "yes_threshold": self.yes_threshold,
            "no_threshold": self.no_threshold,
        }

    def probability(self, query: str, text: str) -> float:
        """The decision head's probability that ``text`` answers ``query``."""
        head = self.model.decision
        assert head is not None  # checked at construction
        rows = Model.columns(compute_pairs(query, [text]), head, PAIR_FEATURES)
        return float(head.predict_proba(rows)[0, 1])

    def decide(self, request: DecisionRequest) -> DecisionResult:
        """The verdict, synchronously (``evaluate`` is the async port method)."""
        if request.decision_kind != RERANK_DECISION_KIND:
            return DecisionResult(
                DecisionOutcome.ABSTAIN,
                self.policy_id,
                _NO_USAGE,
                rationale=f"the learned model answers the rerank question only, not "
                f"{request.decision_kind!r}",
            )
        query = " ".join(request.evidence)
        p = self.probability(query, request.subject)
        if p >= self.yes_threshold:
            outcome = DecisionOutcome.YES
        elif p < self.no_threshold:
            outcome = DecisionOutcome.NO
        else:
            outcome = DecisionOutcome.ABSTAIN
        return DecisionResult(
            outcome, self.policy_id, _NO_USAGE, rationale=f"p={p:.6f}", confidence=p
        )

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        return self.decide(request)
