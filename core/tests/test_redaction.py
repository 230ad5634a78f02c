"""Secrets in a plugin's descriptor never reach traces, logs or the command's JSON: the host
masks them whatever the plugin (docs/seam.md, "Trace"); the conformance kit reports them."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.redaction import MASK, is_secret_key, mask_secrets, shown_secrets
from rankseam.types import Candidate, RerankDecision

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUv0123"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


class Leaky:
    """A third-party reranker that puts its secrets in its descriptor."""

    policy_id = "thirdparty.leaky.v1"
    needs_event_loop = False

    def __init__(self) -> None:
        self.descriptor = {
            "name": "leaky",
            "api_key": KEY,
            "endpoint": "https://bob:hunter2pass@api.example.com/v1",
            "headers": {"Authorization": "Bearer abcdefghijklmnop", "X-Trace": "on"},
            "notes": [f"called with {KEY}", "plain"],
            "session": JWT,
            "max_tokens": 128,
            "token_set": "set",
        }

    def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        return RerankDecision(tuple(range(1, limit + 1)))


def _no_secret(text: str) -> None:
    for secret in (KEY, "hunter2pass", "abcdefghijklmnop", JWT):
        assert secret not in text


def test_a_third_party_descriptor_is_masked_in_the_trace_and_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rankseam")
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("the walrus sleeps on ice")
        memory.add("a walrus swims")
        result = memory.search("walrus", 2, reranker=Leaky())
    shown = result.trace.rerank.descriptor
    assert shown["api_key"] == MASK
    assert shown["endpoint"] == f"https://bob:{MASK}@api.example.com/v1"
    assert shown["headers"] == {"Authorization": MASK, "X-Trace": "on"}
    assert shown["notes"] == [f"called with {MASK}", "plain"]
    assert shown["session"] == MASK
    assert shown["max_tokens"] == 128 and shown["token_set"] == "set"
    _no_secret(json.dumps(result.trace.to_dict()))
    _no_secret(caplog.text)


def test_secret_keys_and_credential_shapes() -> None:
    for name in ("api_key", "apiKey", "OPENAI_KEY", "key", "X-Auth-Token", "password", "auth"):
        assert is_secret_key(name), name
    for name in ("max_tokens", "model", "keep", "author", "tokenizer", "monkey_business"):
        assert not is_secret_key(name), name
    assert mask_secrets({"a": ("AKIAABCDEFGHIJKLMNOP", 3)}) == {"a": [MASK, 3]}
    assert mask_secrets({"password": None, "key": 7, "token": {"x": 1}}) == {
        "password": None,
        "key": 7,
        "token": MASK,
    }
    assert shown_secrets({"api_key": "unset", "m": "ok"}) == []
    assert shown_secrets({"cfg": {"api_key": "abc"}, "u": ["ghp_" + "a" * 20]}) == [
        "descriptor['cfg']['api_key']",
        "descriptor['u'][0]",
    ]


def test_over_answering_is_visible_in_the_status(tmp_path: Path) -> None:
    class Eager:
        policy_id = "thirdparty.eager.v1"
        needs_event_loop = False

        def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
            return RerankDecision(tuple(range(len(candidates), 0, -1)))

    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        for i in range(5):
            memory.add(f"walrus number {i}")
        result = memory.search("walrus", 2, reranker=Eager())
    rerank = result.trace.rerank
    assert rerank.status.value == "repaired"
    assert rerank.over_limit_count == 3
    assert rerank.selected_ranks == (5, 4)  # the valid selection, up to the limit, is kept
    assert "over-answered" in (rerank.reason or "")
