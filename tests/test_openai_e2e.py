"""End to end: the ``rankseam search`` command with the OpenAI-compatible backends.

The two headline searches run the command as a real subprocess; the other cases call the same
command in-process (``rankseam.cli.main``) to keep the suite fast. The backends reach the
loopback server (``rankseam_openai.testing.FakeOpenAIServer``) through
``RANKSEAM_OPENAI_BASE_URL`` / ``RANKSEAM_OPENAI_MODEL``. Call and token counts in the
``--json --trace`` output must equal what the server saw and reported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

openai_testing = pytest.importorskip(
    "rankseam_openai.testing", reason="rankseam-openai is not installed (nox -s integration)"
)
pytest.importorskip("rankseam_decision", reason="rankseam-decision is not installed")
pytest.importorskip("rankseam_listwise", reason="rankseam-listwise is not installed")

from rankseam import open_memory  # noqa: E402
from rankseam_openai.backends import DECISION_INSTRUCTIONS  # noqa: E402

FakeOpenAIServer = openai_testing.FakeOpenAIServer
Reply = openai_testing.Reply
user_payload = openai_testing.user_payload

KEY = "sk-e2e-SECRET-31337"
PROMPT_TOKENS, COMPLETION_TOKENS = 40, 3
MEMORIES = (
    ("m1", "Alice booked a flight to Lisbon for the conference in May."),
    ("m2", "Bob adopted a grey cat named Pixel."),
    ("m3", "The conference hotel in Lisbon is near the river."),
    ("m4", "The team moved the standup to nine thirty."),
    ("m5", "Dinner with Dana is on Friday at the Thai place."),
)
QUERY = "when is the conference in Lisbon"


def _respond(body: Any) -> Any:
    usage = (PROMPT_TOKENS, COMPLETION_TOKENS)
    payload = user_payload(body)
    if body["messages"][0]["content"] == DECISION_INSTRUCTIONS:
        answer = "yes" if "Lisbon" in payload["subject"] else "no"
        return Reply.json({"answer": answer}, usage=usage)
    ranks = [c["rank"] for c in payload["candidates"]][::-1]
    return Reply.json({"selected_ranks": ranks[: payload["max_results"]]}, usage=usage)


@pytest.fixture
def server() -> Iterator[Any]:
    with FakeOpenAIServer(_respond, api_key=KEY) as srv:
        yield srv


@pytest.fixture
def db(tmp_path: Any) -> str:
    path = str(tmp_path / "memory.sqlite3")
    with open_memory(path) as memory:
        for memory_id, text in MEMORIES:
            memory.add(text, memory_id=memory_id)
    return path


def _env(server: Any) -> dict[str, str]:
    env = {"RANKSEAM_OPENAI_BASE_URL": server.base_url, "RANKSEAM_OPENAI_MODEL": "fake-model"}
    if server.api_key:
        env["OPENAI_API_KEY"] = server.api_key
    return env


def rankseam(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``rankseam`` command in a subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "OPENAI_"))}
    env.update(_env(server))
    return subprocess.run(
        [sys.executable, "-c", "from rankseam.cli import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def rankseam_inproc(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """The same command, in this process: ``run(server, *args) -> (exit code, out, err)``."""
    from rankseam.cli import main

    def run(server: Any, *args: str) -> subprocess.CompletedProcess[str]:
        for name in [k for k in os.environ if k.startswith(("RANKSEAM_", "OPENAI_"))]:
            monkeypatch.delenv(name)
        for name, value in _env(server).items():
            monkeypatch.setenv(name, value)
        capsys.readouterr()
        code = 0
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(list(args), code, out, err)

    return run


def search_json(server: Any, db: str, *args: str, run: Any = rankseam) -> dict[str, Any]:
    done = run(server, "search", QUERY, "--db", db, "-k", "3", "--json", "--trace", *args)
    assert done.returncode == 0, done.stderr
    assert KEY not in done.stdout and KEY not in done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def test_search_rerank_decision_openai(server: Any, db: str) -> None:
    out = search_json(server, db, "--rerank", "decision", "--decision-backend", "openai")
    trace = out["trace"]
    rerank = trace["rerank"]
    assert rerank["status"] == "ok" and rerank["policy_id"] == "rankseam.rerank.decision.v1"
    coarse_ids = [c["memory_id"] for c in trace["coarse"]]
    assert [h["memory_id"] for h in out["hits"]] == [m for m in coarse_ids if m in ("m1", "m3")]
    calls = len(server.chat_requests)
    assert calls == len(coarse_ids)  # window 1, only two kept: every candidate was asked
    assert rerank["usage"] == {
        "calls": calls,
        "input_tokens": calls * PROMPT_TOKENS,
        "output_tokens": calls * COMPLETION_TOKENS,
    }
    assert len(rerank["records"]) == calls
    assert all(r["usage"]["calls"] == 1 for r in rerank["records"])
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.chat_requests)


def test_search_rerank_listwise_openai(server: Any, db: str) -> None:
    out = search_json(server, db, "--rerank", "listwise", "--listwise-backend", "openai")
    rerank = out["trace"]["rerank"]
    assert rerank["status"] == "ok" and rerank["policy_id"] == "rankseam.rerank.listwise.v1"
    coarse_ids = [c["memory_id"] for c in out["trace"]["coarse"]]
    assert [h["memory_id"] for h in out["hits"]] == coarse_ids[::-1][:3]
    assert len(server.chat_requests) == 1
    assert rerank["usage"] == {
        "calls": 1,
        "input_tokens": PROMPT_TOKENS,
        "output_tokens": COMPLETION_TOKENS,
    }


def test_search_counts_retried_attempts(server: Any, db: str, rankseam_inproc: Any) -> None:
    server.script(Reply.error(503))
    out = search_json(
        server, db, "--rerank", "listwise", "--listwise-backend", "openai", run=rankseam_inproc
    )
    rerank = out["trace"]["rerank"]
    assert rerank["status"] == "ok"
    assert len(server.chat_requests) == 2
    # the refused attempt counts as a call with zero tokens
    assert rerank["usage"] == {
        "calls": 2,
        "input_tokens": PROMPT_TOKENS,
        "output_tokens": COMPLETION_TOKENS,
    }


def test_search_fails_closed_with_a_clear_message(
    server: Any, db: str, rankseam_inproc: Any
) -> None:
    server.inject("http_503")
    done = rankseam_inproc(
        server, "search", QUERY, "--db", db, "--rerank", "decision", "--decision-backend", "openai"
    )
    assert done.returncode == 1
    assert "unavailable" in done.stderr and "HTTP 503" in done.stderr
    assert KEY not in done.stderr and KEY not in done.stdout


def test_search_with_on_error_coarse_is_visibly_degraded(
    server: Any, db: str, rankseam_inproc: Any
) -> None:
    server.inject("wrong_content_type")
    out = search_json(
        server,
        db,
        "--rerank",
        "listwise",
        "--listwise-backend",
        "openai",
        "--on-error",
        "coarse",
        run=rankseam_inproc,
    )
    assert out["trace"]["status"] == "degraded"
    assert out["trace"]["rerank"]["reason"].startswith("invalid_output")
    coarse_ids = [c["memory_id"] for c in out["trace"]["coarse"]]
    assert [h["memory_id"] for h in out["hits"]] == coarse_ids[:3]


def test_missing_key_fails_at_assembly_with_a_fix(db: str, rankseam_inproc: Any) -> None:
    class Remote:
        base_url = "https://llm.example.invalid/v1"
        api_key = None

    done = rankseam_inproc(
        Remote(),
        "search",
        QUERY,
        "--db",
        db,
        "--rerank",
        "decision",
        "--decision-backend",
        "openai",
    )
    assert done.returncode == 1
    assert "OPENAI_API_KEY" in done.stderr and "require_key" in done.stderr
