"""``local``: a deterministic, dependency-free generation backend for tests and demos.

It is **not a model**. It answers only rank-selection requests (input ``query``,
``max_results``, ``candidates`` of ``{rank, text}``; output ``{"selected_ranks": [...]}``) with
a fixed heuristic: the candidates sharing the most distinct query terms with the query (terms
are lower-cased word tokens of two or more characters, minus a short English stop-word list),
most shared terms first, ties in input order, at most ``max_results``; candidates sharing no
term are not selected (so a pool with no overlap gets an empty answer and the listwise reranker
falls back to coarse ranks). Any other request is refused with
:class:`~rankseam.errors.BackendUnavailableError`.

Its answer goes through :func:`rankseam.generation.parse_output` like a model's would. Usage:
one call per request, zero tokens (no model ran).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from rankseam.errors import BackendUnavailableError
from rankseam.plugin import is_int
from rankseam.plugin.generation import GenerationRequest, GenerationResult, parse_output
from rankseam.types import Usage

__all__ = ["LOCAL_POLICY_ID", "LocalGenerationBackend", "make_local_backend", "terms"]

LOCAL_POLICY_ID = "rankseam.generation.local.term-overlap.v1"

_TOKEN = re.compile(r"\w\w+")
_STOP = frozenset(
    "a an and are as at be but by did do does for from had has have he her his how i if in is it "
    "its me my of on or our she so that the their them they this to was we were what when where "
    "which who whom why will with you your".split()
)


def terms(text: str) -> frozenset[str]:
    """The distinct comparable terms of ``text`` (stop words dropped unless nothing else is
    left)."""
    words = frozenset(_TOKEN.findall(text.casefold()))
    content = words - _STOP
    return content or words


def _refuse(request: GenerationRequest, why: str) -> BackendUnavailableError:
    return BackendUnavailableError(
        f"the local generation backend refused request {request.name!r}: {why}. It is a "
        "heuristic that only answers rank-selection requests (input query, max_results, "
        "candidates [{rank, text}]; output {selected_ranks: [int]}); configure a model backend "
        "for anything else"
    )


class LocalGenerationBackend:
    """Deterministic term-overlap heuristic behind the generation port (see the module doc)."""

    policy_id = LOCAL_POLICY_ID
    deterministic = True
    descriptor: Mapping[str, Any] = {"name": "local", "kind": "heuristic", "model": None}

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        data = request.input
        props = request.output_schema.get("properties") or {}
        if set(props) != {"selected_ranks"}:
            raise _refuse(request, "the output schema does not ask for selected_ranks")
        query = data.get("query")
        max_results = data.get("max_results")
        candidates = data.get("candidates")
        if not isinstance(query, str):
            raise _refuse(request, "input.query is not a string")
        if not is_int(max_results) or max_results < 0:
            raise _refuse(request, "input.max_results is not a non-negative integer")
        if not isinstance(candidates, tuple) or not all(
            isinstance(c, Mapping)
            and isinstance(c.get("rank"), int)
            and isinstance(c.get("text"), str)
            for c in candidates
        ):
            raise _refuse(request, "input.candidates is not a list of {rank, text}")

        wanted = terms(query)
        scored = []
        for position, candidate in enumerate(candidates):
            overlap = len(wanted & terms(candidate["text"]))
            if overlap:
                scored.append((-overlap, position, candidate["rank"]))
        scored.sort()
        ranks = [rank for _, _, rank in scored[:max_results]]
        raw_text = json.dumps({"selected_ranks": ranks})
        output = parse_output(raw_text, request.output_schema)
        return GenerationResult(output, raw_text, Usage(calls=1, input_tokens=0, output_tokens=0))

    def __repr__(self) -> str:
        return "LocalGenerationBackend()"


def make_local_backend(options: Mapping[str, Any], context: Any) -> LocalGenerationBackend:
    """Factory of the ``local`` generation backend (it takes no options: registered with
    ``options=()``, so the host refuses any)."""
    return LocalGenerationBackend()
