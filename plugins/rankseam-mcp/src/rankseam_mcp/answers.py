"""Answers to the lines the MCP SDK cannot read as a JSON-RPC message.

Every request gets an answer (JSON-RPC 2.0, section 5.1): a line that is not JSON gets a parse
error (-32700); JSON that is not a request object (``null``, a number, a batch, an object
without ``method``) gets an invalid-request error (-32600), with the request's ``id`` where it
can be read and ``null`` otherwise. A ``tools/call`` whose text is not valid Unicode (a lone
surrogate such as ``"\\ud800"``, or bytes that are not UTF-8) and a request line longer than
the server reads get a tool error (``isError``) the calling model can act on; other methods get
an invalid-params or invalid-request error. A request whose ``id`` is not a string or an
integer (``[7]``, ``{}``, ``true``, ``1.5``, ``1e400``, ``null``) is not a notification either
(the SDK reads it as one and never answers): it gets an invalid-request error with ``id: null``
(:func:`answer_invalid`). Each answer is one line of JSON (bytes, no newline).
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "answer_bad_line",
    "answer_invalid",
    "answer_oversized",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_SURROGATE = re.compile("[\ud800-\udfff]")
_STR = rb'"(?:[^"\\]|\\.)*"'
_SCALAR = _STR + rb"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null"
_MEMBER = re.compile(rb"\s*(" + _STR + rb")\s*:\s*(" + _SCALAR + rb")\s*")
_OPEN = re.compile(rb"\s*\{")
_SEP = re.compile(rb",")
_CLOSE = re.compile(rb"\}\s*\Z")


def _dumps(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _tool_error(rid: Any, text: str) -> dict[str, Any]:
    content = [{"type": "text", "text": text}]
    return {"jsonrpc": "2.0", "id": rid, "result": {"content": content, "isError": True}}


def _request_id(item: Any) -> str | int | None:
    """The ``id`` of a request, where it is one JSON-RPC allows (a string or an integer)."""
    if not isinstance(item, dict):
        return None
    rid = item.get("id")
    return (
        rid
        if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool))
        else None
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _first_invalid_text(data: Any) -> tuple[str, int] | None:
    """The path of the first string (key or value) holding a lone surrogate, and where."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            found = _SURROGATE.search(value)
            if found:
                return path, found.start()
        elif isinstance(value, dict):
            for key, item in reversed(list(value.items())):
                found = _SURROGATE.search(key)
                if found:
                    return f"{path}.{key!a}" if path else f"{key!a}", found.start()
                stack.append((f"{path}.{key}" if path else key, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value))))
    return None


def _why_invalid(data: dict[str, Any]) -> str:
    if data.get("jsonrpc") != "2.0":
        return 'its "jsonrpc" member must be "2.0"'
    if "method" not in data:
        return 'it has no "method" (a request names the method it calls)'
    if not isinstance(data["method"], str):
        return 'its "method" must be a string'
    if "id" in data and _request_id(data) is None:
        return 'its "id" must be a string or an integer'
    if "params" in data and not isinstance(data["params"], dict):
        return 'its "params" must be an object'
    return "it is not a JSON-RPC 2.0 request, notification or response this server reads"


def answer_invalid(line: bytes) -> bytes | None:
    """The answer to a message the SDK would read although JSON-RPC refuses it: one with an
    ``id`` member that is not a string or an integer (the SDK takes it for a notification and
    never answers). None for every other line (the SDK reads it, or refuses it:
    :func:`answer_bad_line`). Call it for the lines the SDK reads as notifications."""
    if b'"id"' not in line:
        return None
    try:
        data = json.loads(line.decode("utf-8", "surrogateescape"), parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None  # not JSON: the SDK refuses it, answer_bad_line answers
    if not isinstance(data, dict) or "id" not in data or _request_id(data) is not None:
        return None
    if not isinstance(data.get("method"), str):
        return None  # a response, or no message at all: answer_bad_line's
    return _dumps(
        _error(
            None,
            INVALID_REQUEST,
            'Invalid Request: its "id" must be a string or an integer (JSON-RPC 2.0; MCP '
            f"allows no null id), not {_shown_id(data['id'])}",
        )
    )


def _shown_id(rid: Any) -> str:
    try:
        text = json.dumps(rid, ensure_ascii=True, allow_nan=False)
    except ValueError:  # 1e400 reads as infinity, which JSON cannot write
        text = "a number too large for a float"
    return text if len(text) <= 40 else text[:37] + "..."


def answer_bad_line(line: bytes) -> bytes | None:
    """The answer to ``line``, which the SDK refused; None for a notification (never answered)."""
    try:
        data = json.loads(line.decode("utf-8", "surrogateescape"), parse_constant=_reject_constant)
    except RecursionError:
        return _dumps(_error(None, PARSE_ERROR, "Parse error: the JSON is nested too deeply"))
    except ValueError as exc:
        return _dumps(_error(None, PARSE_ERROR, f"Parse error: the line is not JSON ({exc})"))
    if isinstance(data, list):
        if not data:
            return _dumps(_error(None, INVALID_REQUEST, "Invalid Request: an empty batch"))
        why = (
            "Invalid Request: this server does not read JSON-RPC batches (MCP removed them); "
            "send each request as its own line"
        )
        return _dumps([_error(_request_id(item), INVALID_REQUEST, why) for item in data])
    if not isinstance(data, dict):
        kind = {type(None): "null", bool: "true or false", str: "a string"}.get(
            type(data), "a number"
        )
        return _dumps(
            _error(
                None, INVALID_REQUEST, f"Invalid Request: a message is a JSON object, not {kind}"
            )
        )
    rid = _request_id(data)
    invalid = _first_invalid_text(data)
    if invalid is None:
        return _dumps(_error(rid, INVALID_REQUEST, f"Invalid Request: {_why_invalid(data)}"))
    if "id" not in data and isinstance(data.get("method"), str):
        return None  # a notification: never answered, even when its text is bad
    path, at = invalid
    if data.get("method") == "tools/call" and rid is not None:
        where = path.removeprefix("params.arguments.")
        where = f"the argument {where!r}" if where != path else repr(path)
        return _dumps(
            _tool_error(
                rid,
                f"{where} holds a character that is not valid Unicode at position {at} (a lone "
                "surrogate such as \\ud800, or a byte that is not UTF-8): send it as valid "
                "Unicode text; nothing was changed",
            )
        )
    code = INVALID_PARAMS if path.startswith("params") else INVALID_REQUEST
    label = "Invalid params" if code == INVALID_PARAMS else "Invalid Request"
    return _dumps(
        _error(
            rid,
            code,
            f"{label}: {path!r} holds a character that is not valid Unicode at position {at} "
            "(a lone surrogate, or a byte that is not UTF-8)",
        )
    )


def _scalar_members(text: bytes, pos: int) -> tuple[dict[str, Any], int] | None:
    """The ``"key": scalar`` members from ``pos`` on, separated by commas, and where they end."""
    members: dict[str, Any] = {}
    while True:
        match = _MEMBER.match(text, pos)
        if match is None:
            return (members, pos) if members else None
        try:
            members[json.loads(match.group(1))] = json.loads(match.group(2))
        except ValueError:
            return None
        pos = match.end()
        sep = _SEP.match(text, pos)
        if sep is None:
            return members, pos
        pos = sep.end()


def _outer_members(head: bytes, tail: bytes) -> dict[str, Any]:
    """The top-level scalar members a request line shows at its start (before the first
    object or array) and at its end (after the last): where clients write ``id`` and
    ``method``. Best effort: the rest of the line was never kept."""
    found: dict[str, Any] = {}
    opened = _OPEN.match(head)
    if opened:
        got = _scalar_members(head, opened.end())
        if got:
            found.update(got[0])
    for start in (m.start() for m in re.finditer(rb"[,{]", tail)):
        got = _scalar_members(tail, start + 1)
        if got and _CLOSE.match(tail, got[1]):
            found.update(got[0])
            break
    return found


def answer_oversized(head: bytes, tail: bytes, size: int, limit: int) -> bytes:
    """The answer to a request line of ``size`` bytes (at least) over ``limit``; ``head`` and
    ``tail`` are its first and last bytes, which are all that was kept of it."""
    members = _outer_members(head, tail)
    rid = _request_id(members)
    text = (
        f"the request is {size} bytes long, more than the {limit} bytes this server reads "
        "(rankseam.toml: [plugins.mcp] max_message_bytes); a memory's text holds at most "
        "1,000,000 characters: send a shorter one; nothing was changed"
    )
    if members.get("method") == "tools/call" and rid is not None:
        return _dumps(_tool_error(rid, text[0].upper() + text[1:]))
    return _dumps(_error(rid, INVALID_REQUEST, f"Invalid Request: {text}"))
