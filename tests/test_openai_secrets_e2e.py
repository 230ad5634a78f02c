"""End to end: a server that echoes the API key never gets it into a message, a log, a trace,
a gate verdict or the ``rankseam`` command's output.

The loopback server echoes the key in the shapes of ``rankseam_openai.testing.echo_shapes``
(split by line breaks, across the excerpt's cut, escaped) in error bodies and in the model's
rationale -- and, when the shape fits on one line, in the reason phrase and a header, which
httpx and httpcore log (every logger runs at DEBUG) -- for the decision reranker (fail-closed
and coarse), the listwise reranker and the write gate (fail-open and fail-closed), through
``open_memory`` and through the CLI in a subprocess. The plugin's own tests (``test_openai_secret_echo.py``) cover every shape at the
backend.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

openai_testing = pytest.importorskip(
    "rankseam_openai.testing", reason="rankseam-openai is not installed (nox -s integration)"
)
pytest.importorskip("rankseam_decision", reason="rankseam-decision is not installed")
pytest.importorskip("rankseam_listwise", reason="rankseam-listwise is not installed")

from rankseam import RerankError, RerankStatus, WriteGateError, open_memory  # noqa: E402
from rankseam_openai.backends import DECISION_INSTRUCTIONS  # noqa: E402

FakeOpenAIServer = openai_testing.FakeOpenAIServer
Reply = openai_testing.Reply
echo_shapes = openai_testing.echo_shapes
exception_texts = openai_testing.exception_texts
leaked_fragment = openai_testing.leaked_fragment
user_payload = openai_testing.user_payload

KEY = "sk-proj-e2eQ3x9Zt7LmN2vB8kR4wY6pH1sD5fG0"
MEMORIES = (
    ("m1", "Alice booked a flight to Lisbon for the conference in May."),
    ("m2", "Bob adopted a grey cat named Pixel."),
    ("m3", "The conference hotel in Lisbon is near the river."),
)
QUERY = "when is the conference in Lisbon"
#: A sample of the shapes: line breaks at several positions, cut points, every escape.
SHAPES = [
    text
    for name, text in echo_shapes(KEY)
    if not name.startswith(("split-space", "split-crlf", "cut-"))
    or name.endswith(("-5", "-17", "-30"))
    or name in {f"cut-{n}" for n in range(150, 205, 6)}
][::2]


def assert_clean(texts: Iterable[str] | str, where: str = "") -> None:
    for text in {texts} if isinstance(texts, str) else set(texts):
        found = leaked_fragment(text, (KEY,))
        assert found is None, f"key fragment {found!r} leaked {where}: {text[:400]!r}"


class Echo:
    """Responds with the key echoed in the next shape: an HTTP 400 error, or (``healthy``) a
    real answer whose rationale echoes it."""

    def __init__(self) -> None:
        self.healthy = False
        self._shapes = iter(())  # type: Iterator[str]
        self.reset()

    def reset(self) -> None:
        self._shapes = iter(SHAPES * 50)

    def __call__(self, body: Any) -> Any:
        text = next(self._shapes)
        reply = self._answer(body, text)
        if "\r" in text or "\n" in text or len(text) > 4000:
            return reply
        # a shape that fits on one line is echoed in the reason phrase and a header too
        return attrs.evolve(reply, headers=(*reply.headers, ("X-Echo", text)), reason=text)

    def _answer(self, body: Any, text: str) -> Any:
        if not self.healthy:
            return Reply.error(400, text)
        payload = user_payload(body)
        if body["messages"][0]["content"] == DECISION_INSTRUCTIONS:
            return Reply.json({"answer": "yes", "rationale": text})
        ranks = [c["rank"] for c in payload["candidates"]][: payload["max_results"]]
        return Reply.json({"selected_ranks": ranks})


@pytest.fixture(scope="module")
def echo() -> Echo:
    return Echo()


@pytest.fixture(scope="module")
def server(echo: Echo) -> Iterator[Any]:
    with FakeOpenAIServer(echo) as srv:
        yield srv


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("secrets") / "memory.sqlite3")
    with open_memory(path) as memory:
        for memory_id, text in MEMORIES:
            memory.add(text, memory_id=memory_id)
    return path


def _backend(server: Any) -> dict[str, Any]:
    return {"base_url": server.base_url, "model": "m", "api_key": KEY, "max_attempts": 1}


def _config(server: Any, role: str, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"search": {"pool": len(MEMORIES)}}
    if role == "listwise":
        config["generation_backends"] = {"openai": _backend(server)}
        config["rerankers"] = {"listwise": {"backend": "openai"}}
        config["search"].update(reranker="listwise", on_error="coarse")
    else:
        config["decision_backends"] = {"openai": _backend(server)}
        config["rerankers"] = {"decision": {"backend": "openai"}}
        config["write_gate"] = {"backend": "openai", "enabled": False}
        config["search"].update(reranker="decision", on_error="raise")
    config["search"].update(extra)
    return config


def _records(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Every record (httpx's INFO lines and httpcore's DEBUG trace of the headers a server
    sent included), as a handler formats it and attribute by attribute."""
    assert {"httpx", "httpcore.http11"} <= {r.name for r in caplog.records}
    return [
        json.dumps({k: repr(v) for k, v in vars(r).items()})
        + r.getMessage()
        + caplog.handler.format(r)
        for r in caplog.records
    ]


def test_errors_traces_verdicts_and_logs_hold_no_key(
    server: Any, echo: Echo, db: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    for logger in (None, "httpx", "httpcore"):  # every logger at DEBUG, the HTTP library's too
        caplog.set_level(logging.DEBUG, logger=logger)
    echo.healthy, seen = False, []
    echo.reset()
    rounds = len(SHAPES) // 4
    with open_memory(db, config=_config(server, "decision")) as memory:
        for _ in range(rounds):  # the decision reranker fails closed
            with pytest.raises(RerankError) as info:
                memory.search(QUERY, 2)
            seen.extend(exception_texts(info.value))
        result = memory.search(QUERY, 2, on_error="coarse")  # ... or degrades visibly
        assert result.status is RerankStatus.DEGRADED
        seen.append(json.dumps(result.to_dict()))
    with open_memory(db, config=_config(server, "listwise")) as memory:
        for _ in range(rounds):
            result = memory.search(QUERY, 2)
            assert result.status is RerankStatus.DEGRADED
            seen.append(json.dumps(result.to_dict()))
    gate_db = str(tmp_path / "gate.sqlite3")
    with open_memory(gate_db, config=_config(server, "decision")) as memory:
        for _ in range(rounds):  # the fail-open gate stores, degraded
            added = memory.add("remember this", gate=True)
            assert added.stored and added.gate is not None and added.gate.degraded
            seen.extend([repr(added), json.dumps(added.gate.to_dict())])
    closed = _config(server, "decision")
    closed["write_gate"]["failure_policy"] = "fail_closed"
    with open_memory(gate_db, config=closed) as memory:
        for _ in range(rounds):  # the fail-closed gate refuses with a typed error
            with pytest.raises(WriteGateError) as gate_info:
                memory.add("remember this", gate=True)
            seen.extend(exception_texts(gate_info.value))
    assert any("HTTP 400" in text for text in seen)
    assert_clean(seen)
    assert_clean(_records(caplog), "in a log record")


def test_healthy_answers_echoing_the_key_hold_no_key(
    server: Any, echo: Echo, db: str, tmp_path: Path
) -> None:
    echo.healthy, seen = True, []
    echo.reset()
    try:
        with open_memory(db, config=_config(server, "decision")) as memory:
            for _ in range(len(SHAPES) // 6):
                result = memory.search(QUERY, 2)
                assert result.status is RerankStatus.OK
                seen.append(json.dumps(result.to_dict()))
        with open_memory(str(tmp_path / "g.sqlite3"), config=_config(server, "decision")) as m:
            for _ in range(len(SHAPES) // 6):
                added = m.add("remember this", gate=True)
                assert added.gate is not None and added.gate.rationale is not None
                seen.extend([repr(added), json.dumps(added.gate.to_dict())])
    finally:
        echo.healthy = False
    assert_clean(seen)


def _cli(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "OPENAI_"))}
    env.update(
        OPENAI_API_KEY=KEY,
        RANKSEAM_OPENAI_BASE_URL=server.base_url,
        RANKSEAM_OPENAI_MODEL="m",
    )
    return subprocess.run(
        [sys.executable, "-c", "from rankseam.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_cli_output_holds_no_key(server: Any, echo: Echo, db: str, tmp_path: Path) -> None:
    """The ``rankseam`` command in a subprocess: a failed search, a degraded one with its
    trace, a healthy traced search echoing the key, and a fail-closed gated add."""
    config = tmp_path / "rankseam.toml"
    config.write_text(
        "[decision_backends.openai]\nmax_attempts = 1\n"
        "[generation_backends.openai]\nmax_attempts = 1\n"
        '[rerankers.decision]\nbackend = "openai"\n[rerankers.listwise]\nbackend = "openai"\n'
        '[write_gate]\nenabled = false\nbackend = "openai"\nfailure_policy = "fail_closed"\n',
        encoding="utf-8",
    )
    common = ("--db", db, "--config", str(config))
    echo.healthy = False
    echo.reset()
    outputs = []
    failed = _cli(server, "search", QUERY, *common, "--rerank", "decision", "--trace", "--json")
    assert failed.returncode == 1 and "HTTP 400" in failed.stderr, failed.stderr
    outputs.append(failed)
    degraded = _cli(
        server,
        "search",
        QUERY,
        *common,
        "--rerank",
        "listwise",
        "--on-error",
        "coarse",
        "--trace",
        "--json",
    )
    assert degraded.returncode == 0 and '"degraded"' in degraded.stdout, degraded.stderr
    outputs.append(degraded)
    gated = ("--db", str(tmp_path / "c.sqlite3"), "--config", str(config))
    refused = _cli(server, "add", "remember this", "--gate", *gated)
    assert refused.returncode == 1 and "NOT stored" in refused.stderr, refused.stderr
    outputs.append(refused)
    echo.healthy = True
    try:
        traced = _cli(server, "search", QUERY, *common, "--rerank", "decision", "--trace")
    finally:
        echo.healthy = False
    assert traced.returncode == 0, traced.stderr
    outputs.append(traced)
    for done in outputs:
        assert_clean(done.stdout, "on stdout")
        assert_clean(done.stderr, "on stderr")
