"""The built-in ``heuristic`` decision backend: deterministic, no model, for demos and tests.

It is a *heuristic*, not a judgement of meaning. It answers from word overlap only:

- With evidence (the rerank question: subject = candidate text, evidence = (query,)): the
  *coverage* is the share of the evidence's content terms that also occur in the subject.
  ``coverage >= yes_threshold`` -> YES, ``coverage <= no_threshold`` -> NO, otherwise ABSTAIN.
  Evidence without any content term (only stop words) -> ABSTAIN.
- Without evidence (the write gate: "is this worth remembering?"): the number of distinct
  content terms of the subject. ``>= min_terms`` -> YES, none -> NO, otherwise ABSTAIN.

Terms are lower-cased Unicode word runs, minus a short English stop-word list, with a crude
suffix strip (``-ing``, ``-ed``, ``-es``, ``-s``) so that "flights" meets "flight". The
verdict never depends on anything but the request, so the backend is deterministic and safe
to call concurrently. It reports zero token usage (no model is called).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from rankseam.plugin import DecisionBackendRegister, OptionError, hookimpl, option
from rankseam.plugin.decision import DecisionOutcome, DecisionRequest, DecisionResult
from rankseam.types import Usage

__all__ = ["HeuristicDecisionBackend", "HeuristicOptions", "content_terms"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have he her
    his how i if in into is it its me my no not of on or our she so than that the their them
    then there these they this to up us was we were what when where which who whom why will
    with would you your""".split()
)
_SUFFIXES = ("ing", "ed", "es", "s")


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_terms(text: str) -> frozenset[str]:
    """The distinct content terms of ``text`` as the heuristic sees them."""
    return frozenset(
        _stem(w) for w in (m.group(0).casefold() for m in _WORD.finditer(text)) if w not in _STOP
    )


class HeuristicDecisionBackend:
    """Query-term coverage (with evidence) or informativeness (without) -> yes/abstain/no."""

    policy_id = "rankseam.decision.heuristic.v1"
    deterministic = True

    def __init__(
        self, *, yes_threshold: float = 0.5, no_threshold: float = 0.0, min_terms: int = 3
    ) -> None:
        self.yes_threshold = yes_threshold
        self.no_threshold = no_threshold
        self.min_terms = min_terms

    @property
    def descriptor(self) -> Mapping[str, Any]:
        return {
            "name": "heuristic",
            "yes_threshold": self.yes_threshold,
            "no_threshold": self.no_threshold,
            "min_terms": self.min_terms,
        }

    def decide(self, request: DecisionRequest) -> DecisionResult:
        """The verdict, synchronously (``evaluate`` is the async port method)."""
        subject = content_terms(request.subject)
        if request.evidence:
            wanted = frozenset(t for e in request.evidence for t in content_terms(e))
            if not wanted:
                return self._result(DecisionOutcome.ABSTAIN, "evidence has no content term", None)
            covered = len(wanted & subject)
            coverage = covered / len(wanted)
            why = f"coverage {covered}/{len(wanted)} evidence terms"
            if coverage >= self.yes_threshold:
                return self._result(DecisionOutcome.YES, why, coverage)
            if coverage <= self.no_threshold:
                return self._result(DecisionOutcome.NO, why, coverage)
            return self._result(DecisionOutcome.ABSTAIN, why, coverage)
        count = len(subject)
        why = f"{count} distinct content term(s)"
        if count >= self.min_terms:
            return self._result(DecisionOutcome.YES, why, None)
        if count == 0:
            return self._result(DecisionOutcome.NO, why, None)
        return self._result(DecisionOutcome.ABSTAIN, why, None)

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        return self.decide(request)

    def _result(
        self, outcome: DecisionOutcome, rationale: str, confidence: float | None
    ) -> DecisionResult:
        return DecisionResult(
            outcome, self.policy_id, Usage.zero(), rationale=rationale, confidence=confidence
        )

    def __repr__(self) -> str:
        return (
            f"HeuristicDecisionBackend(yes_threshold={self.yes_threshold}, "
            f"no_threshold={self.no_threshold}, min_terms={self.min_terms})"
        )


@attrs.frozen
class HeuristicOptions:
    """The options of the ``heuristic`` decision backend (``[decision_backends.heuristic]``)."""

    yes_threshold: float = option(
        0.5, ge=0, le=1, help="query-term coverage from which a candidate is a yes"
    )
    no_threshold: float = option(
        0.0, ge=0, le=1, help="query-term coverage up to which a candidate is a no"
    )
    min_terms: int = option(
        3, ge=1, help="distinct content terms from which the write gate says yes"
    )

    def __attrs_post_init__(self) -> None:
        if not self.no_threshold < self.yes_threshold:
            raise OptionError(
                "no_threshold",
                f"({self.no_threshold}) must be below yes_threshold ({self.yes_threshold}); "
                "coverage between them abstains",
            )


def _factory(options: HeuristicOptions, context: object) -> HeuristicDecisionBackend:
    return HeuristicDecisionBackend(
        yes_threshold=options.yes_threshold,
        no_threshold=options.no_threshold,
        min_terms=options.min_terms,
    )


@hookimpl
def register_decision_backends(register: DecisionBackendRegister) -> None:
    register(
        "heuristic",
        _factory,
        summary="deterministic, no model: query-term coverage -> yes / abstain / no (a heuristic)",
        options=HeuristicOptions,
    )
