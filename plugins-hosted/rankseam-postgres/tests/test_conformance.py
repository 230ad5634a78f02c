"""The PostgreSQL store passes the host's store conformance kit
(rankseam.testing.StoreContract): a fresh schema of the session's server per test, and once
more with a password in the URL that the server checks (the kit's secrets test then has a
secret to look for)."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from rankseam.testing import StoreContract


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store_target(self, pg_url: str) -> str:
        return pg_url


class TestPostgresStoreWithPassword(StoreContract):
    # the same standard tests through a URL that carries a password; the costly process
    # test runs once, above
    waived_tests = {
        "test_concurrent_writers_in_processes_lose_nothing": "covered by TestPostgresStore"
    }

    @pytest.fixture
    def store_target(self, pg_server, alice_role: tuple[str, str]) -> str:
        user, password = alice_role
        host = quote(pg_server.socket_dir, safe="")
        schema = pg_server.url().rsplit("schema=", 1)[1]
        return f"postgres://{user}:{quote(password, safe='')}@/postgres?host={host}&schema={schema}"
