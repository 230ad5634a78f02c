"""Replies of the loopback server (:class:`Reply`), the requests it records, the responders
that answer from a request's body, and the named faults (:data:`FAULTS`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = [
    "DEFAULT_USAGE",
    "FAULTS",
    "RecordedRequest",
    "Reply",
    "Responder",
    "decision_responder",
    "generation_responder",
    "user_payload",
]

DEFAULT_USAGE = (21, 5)


@attrs.frozen
class Reply:
    """One scripted answer. ``action``: ``respond``, ``reset`` or ``hang``. ``reason``: the
    status line's reason phrase (the standard one when None)."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    action: str = "respond"
    reason: str | None = None

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def content(
        cls,
        text: str,
        *,
        usage: tuple[int, int] | None = DEFAULT_USAGE,
        finish_reason: str = "stop",
        model: str = "fake-model",
    ) -> Reply:
        """A chat completion whose assistant message is ``text``."""
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
        }
        if usage is not None:
            body["usage"] = {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1],
            }
        return cls.raw(json.dumps(body).encode())

    @classmethod
    def json(cls, value: Any, *, usage: tuple[int, int] | None = DEFAULT_USAGE) -> Reply:
        """A chat completion whose assistant message is ``value`` as JSON."""
        return cls.content(json.dumps(value), usage=usage)

    @classmethod
    def prose_around_json(cls, value: Any, **kwargs: Any) -> Reply:
        return cls.content(
            f"Sure! Here is my answer:\n{json.dumps(value)}\nHope it helps.", **kwargs
        )

    @classmethod
    def raw(
        cls, body: bytes, *, status: int = 200, content_type: str = "application/json"
    ) -> Reply:
        return cls(status, body, (("Content-Type", content_type),))

    @classmethod
    def error(
        cls,
        status: int,
        message: str = "",
        *,
        headers: Mapping[str, str] | None = None,
        reason: str | None = None,
    ) -> Reply:
        """An OpenAI-style error body with ``status`` (and ``reason`` as the reason phrase)."""
        body = json.dumps(
            {
                "error": {
                    "message": message or f"fake error {status}",
                    "type": "fake",
                    "code": status,
                }
            }
        ).encode()
        extra = tuple((headers or {}).items())
        return cls(status, body, (("Content-Type", "application/json"), *extra), reason=reason)

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Reply:
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return cls.error(429, "rate limit reached", headers=headers)

    @classmethod
    def reset(cls) -> Reply:
        """Close the connection with a TCP reset, without answering."""
        return cls(action="reset")

    @classmethod
    def hanging_body(cls) -> Reply:
        """Status and headers (Content-Length 4096), a few body bytes, then silence."""
        return cls(
            200,
            b'{"id": "chatcmpl-hang", "choices": [',
            (("Content-Type", "application/json"), ("Content-Length", "4096")),
            action="hang",
        )

    @classmethod
    def endless_body(cls, chunk: bytes = b" " * 65536) -> Reply:
        """HTTP 200, JSON content type, no Content-Length, and ``chunk`` repeated until the
        client hangs up (a server gone wrong; the client must cap what it reads)."""
        return cls(200, chunk, (("Content-Type", "application/json"),), action="endless")

    @classmethod
    def malformed_body(cls) -> Reply:
        return cls.raw(b'{"id": "chatcmpl-bad", "choices": [{"message": {"content": "ye')

    @classmethod
    def wrong_content_type(cls) -> Reply:
        return cls.raw(b"<html><body>Sign in to continue</body></html>", content_type="text/html")

    def delayed(self, seconds: float) -> Reply:
        return attrs.evolve(self, delay_s=seconds)

    def with_reason(self, reason: str) -> Reply:
        """This reply with ``reason`` as its status line's reason phrase (a server may echo
        anything there, the caller's key included)."""
        return attrs.evolve(self, reason=reason)


@attrs.frozen
class RecordedRequest:
    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    received_at: float


Responder = Callable[[Any], Reply]


def user_payload(body: Any) -> Any:
    """The JSON the backend put in the last user message of a chat request (or None)."""
    try:
        messages = body["messages"]
        text = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
        return json.loads(text)
    except (KeyError, TypeError, StopIteration, ValueError):
        return None


def decision_responder(decide: Callable[[str, tuple[str, ...]], str]) -> Responder:
    """A responder for the decision backend: ``decide(subject, evidence)`` returns the answer
    (``"yes"``, ``"no"`` or ``"abstain"``)."""

    def respond(body: Any) -> Reply:
        payload = user_payload(body) or {}
        answer = decide(str(payload.get("subject", "")), tuple(payload.get("evidence", ())))
        return Reply.json({"answer": answer})

    return respond


def generation_responder(make: Callable[[Any, Any], Any]) -> Responder:
    """A responder for the generation backend: ``make(input, schema) -> output value``."""

    def respond(body: Any) -> Reply:
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema")
        return Reply.json(make(user_payload(body), schema))

    return respond


def _prose(good: Reply) -> Reply:
    try:
        text = json.loads(good.body)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        text = '{"answer": "yes"}'
    return Reply.content(f"Here you go:\n```json\n{text}\n```\nAnything else?")


#: Fault name -> the reply that replaces a good reply when the fault is injected.
FAULTS: dict[str, Callable[[Reply], Reply]] = {
    "delay": lambda good: good.delayed(30.0),
    "rate_limit": lambda good: Reply.rate_limited("0"),
    "http_500": lambda good: Reply.error(500),
    "http_503": lambda good: Reply.error(503),
    "connection_reset": lambda good: Reply.reset(),
    "malformed_json": lambda good: Reply.malformed_body(),
    "schema_violation": lambda good: Reply.json({"verdict": "maybe", "ranks": "one"}),
    "prose_around_json": _prose,
    "hanging_body": lambda good: Reply.hanging_body(),
    "wrong_content_type": lambda good: Reply.wrong_content_type(),
    "endless_body": lambda good: Reply.endless_body(),
}
