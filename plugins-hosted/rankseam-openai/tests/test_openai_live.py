"""Live tests against a real OpenAI-compatible server (opt-in: ``nox -s live``).

Skipped unless pytest runs with ``--live`` (the ``live`` nox session passes it) AND
``RANKSEAM_OPENAI_BASE_URL`` names a server. Other variables: ``RANKSEAM_OPENAI_MODEL``
(required), ``OPENAI_API_KEY`` (needed for non-loopback servers), ``RANKSEAM_OPENAI_TIMEOUT_S``
(default 120) and ``RANKSEAM_OPENAI_JSON_MODE`` (default ``auto``). See docs/plugins/openai.md
for starting a local llama.cpp or vLLM server.

The assertions hold for any competent instruction-following model: typed, schema-valid answers
with usage; the verdicts themselves are only checked on questions with an obvious answer.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

from rankseam.plugin.decision import DecisionOutcome, rerank_request, write_gate_request
from rankseam.plugin.generation import validate_output
from rankseam.testing import RANK_SELECTION_SCHEMA, rank_selection_request
from rankseam_openai import make_decision_backend, make_generation_backend

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        not os.environ.get("RANKSEAM_OPENAI_BASE_URL"),
        reason="set RANKSEAM_OPENAI_BASE_URL and RANKSEAM_OPENAI_MODEL to run the live tests",
    ),
]


def _options() -> dict[str, Any]:
    return {
        "timeout_s": float(os.environ.get("RANKSEAM_OPENAI_TIMEOUT_S", "120")),
        "deadline_s": 3 * float(os.environ.get("RANKSEAM_OPENAI_TIMEOUT_S", "120")),
        "json_mode": os.environ.get("RANKSEAM_OPENAI_JSON_MODE", "auto"),
    }


def test_live_decision_backend() -> None:
    backend = make_decision_backend(_options())

    async def ask() -> list[Any]:
        return list(
            await asyncio.gather(
                backend.evaluate(
                    rerank_request(
                        "What colour is the sky on a clear day?",
                        "On a clear day the sky is blue.",
                    )
                ),
                backend.evaluate(
                    rerank_request(
                        "What colour is the sky on a clear day?",
                        "Bob adopted a grey cat named Pixel.",
                    )
                ),
                backend.evaluate(write_gate_request("My passport number expires in June 2031.")),
            )
        )

    relevant, unrelated, gate = asyncio.run(ask())
    for result in (relevant, unrelated, gate):
        assert result.outcome in tuple(DecisionOutcome)
        assert result.usage.calls >= 1 and not result.used_fallback
    assert relevant.outcome is not DecisionOutcome.NO
    assert unrelated.outcome is not DecisionOutcome.YES


def test_live_generation_backend() -> None:
    backend = make_generation_backend(_options())
    texts = (
        "Bob adopted a grey cat named Pixel.",
        "Alice's conference in Lisbon is in May.",
        "The team moved standup to nine thirty.",
    )
    request = rank_selection_request("when is the conference in Lisbon", texts, 1)
    result = asyncio.run(backend.generate(request))
    validate_output(result.output, RANK_SELECTION_SCHEMA)
    assert result.usage.calls >= 1
    assert all(1 <= r <= len(texts) for r in result.output["selected_ranks"])
