"""Credentials come from the URL, the PG* environment variables or ``[stores.postgres]
password = {"$env" = ...}``, and never appear in a repr, stats, a trace, a log record or an
error. The server checks passwords for the role used here (scram-sha-256 on its socket)."""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

import pytest
from conftest import SECRET

import rankseam
from rankseam.errors import ConfigurationError


def _url(pg_server, password: str | None, schema: str) -> str:
    auth = "alice" if password is None else f"alice:{quote(password, safe='')}"
    return (
        f"postgresql://{auth}@/postgres?host={quote(pg_server.socket_dir, safe='')}&schema={schema}"
    )


def _everything(memory: rankseam.Memory) -> str:
    result = memory.search("lighthouse", 5, reranker="identity")
    return "\n".join(
        [
            repr(memory),
            memory.path,
            json.dumps(memory.stats(), default=str),
            json.dumps(result.trace.to_dict(), default=str),
            repr(memory.store),
        ]
    )


def test_password_in_the_url_is_never_shown(pg_server, alice_role, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    with rankseam.open_memory(_url(pg_server, SECRET, "sec_url")) as memory:
        memory.add("the lighthouse keeper", memory_id="k")
        shown = _everything(memory)
    assert SECRET not in shown
    assert "alice:***@" in memory.path
    assert SECRET not in caplog.text


def test_password_from_the_environment(pg_server, alice_role, monkeypatch) -> None:
    monkeypatch.setenv("PGPASSWORD", SECRET)
    with rankseam.open_memory(_url(pg_server, None, "sec_env")) as memory:
        memory.add("the lighthouse keeper", memory_id="k")
        assert SECRET not in _everything(memory)


def test_password_from_an_env_reference_in_the_config(pg_server, alice_role, monkeypatch) -> None:
    monkeypatch.setenv("MY_PG_PASSWORD", SECRET)
    config = {"stores": {"postgres": {"password": {"$env": "MY_PG_PASSWORD"}}}}
    with rankseam.open_memory(_url(pg_server, None, "sec_ref"), config=config) as memory:
        memory.add("the lighthouse keeper", memory_id="k")
        assert SECRET not in _everything(memory)


@pytest.mark.parametrize("how", ["url", "env", "config"])
def test_a_wrong_password_is_a_clear_error_without_it(
    pg_server, alice_role, monkeypatch, caplog, how
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wr0ng-" + SECRET[::-1]
    config = None
    if how == "url":
        url = _url(pg_server, wrong, "sec_bad")
    else:
        url = _url(pg_server, None, "sec_bad")
        if how == "env":
            monkeypatch.setenv("PGPASSWORD", wrong)
        else:
            monkeypatch.setenv("MY_PG_PASSWORD", wrong)
            config = {"stores": {"postgres": {"password": {"$env": "MY_PG_PASSWORD"}}}}
    with pytest.raises(ConfigurationError) as err:
        rankseam.open_memory(url, config=config)
    message = str(err.value)
    assert "password authentication failed" in message
    assert "PGPASSWORD" in message  # says where credentials come from
    for text in (message, repr(err.value), caplog.text):
        assert wrong not in text and quote(wrong, safe="") not in text


def test_unreachable_server_error_names_the_redacted_url(tmp_path, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"postgresql://bob:{SECRET}@/db?host={quote(str(tmp_path), safe='')}&connect_timeout=2"
    with pytest.raises(ConfigurationError) as err:
        rankseam.open_memory(url)
    message = str(err.value)
    assert "postgresql://bob:***@" in message
    assert SECRET not in message and SECRET not in caplog.text
