"""Vectors the index cannot hold (issue #39, case 3). The HNSW index of an L2-normalised space
holds its vectors in half precision, whose largest value is 65 504 (``HALF_MAX``): a vector
with a component beyond it is refused on every way in (add, update, ingest, re-embedding's
``put_vectors``, a snapshot's import, a query) with a ``ValidationError`` that names the value,
the space and the fix, before anything commits (the host refuses such a vector of an
L2-normalised space first, on every way through it: its norm is not 1; a snapshot's import is
the kit's VectorLimitContract); a space that is not normalised (full-precision index) still
takes it. A stored vector that breaks an index build (an earlier release stored
it) is named, the failed build leaves no INVALID index behind, and once the memory is fixed
the index builds."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest

import rankseam
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin import hookimpl
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.plugin.stores import VectorItem
from rankseam.testing import installed_plugin
from rankseam_postgres.schema import HALF_MAX

DIMS = 8


class _Loud:
    """Declares its vectors L2-normalised (or not, with ``normalization="none"``) but answers
    a component of 1e5 for a text that holds the word ``loud``; unit vectors otherwise."""

    def __init__(self, name: str, normalization: str) -> None:
        self.descriptor = EmbedderDescriptor(name, DIMS, normalization=normalization)

    def embed(self, texts: Any) -> np.ndarray:
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row, zlib.crc32(text.encode("utf-8")) % DIMS] = 1.0
            if "loud" in text.split():
                out[row, 3] = 1e5
        return out


class _Plugin:
    @hookimpl
    def register_embedders(self, register: Any) -> None:
        register("loud", lambda options, context: _Loud("loud", "l2"), summary="test")
        register("loud-raw", lambda options, context: _Loud("loud-raw", "none"), summary="test")


@pytest.fixture(autouse=True)
def _loud_embedders() -> Iterator[None]:
    with installed_plugin(_Plugin(), name="rankseam-pg-test-loud"):
        yield


RECORDS = [{"id": f"q{i}", "text": f"quiet note {i} about the harbour"} for i in range(30)]


def _refused(err: pytest.ExceptionInfo[BaseException], space: str) -> None:
    """The error says the value, the space, the limit and the fix."""
    text = str(err.value)
    assert "100000" in text and space in text and f"{HALF_MAX:g}" in text, text
    assert "normalization" in text and "unit vectors" in text, text


def _indexes(pg_server: Any, schema: str) -> dict[str, bool]:
    """The indexes of the store's vectors table besides its primary key -> valid."""
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = "
            "i.indexrelid JOIN pg_class t ON t.oid = i.indrelid JOIN pg_namespace n ON "
            "n.oid = t.relnamespace WHERE n.nspname = %s AND t.relname = 'vectors' "
            "AND c.relname <> 'vectors_pkey'",
            (schema,),
        ).fetchall()
    return {str(name): bool(valid) for name, valid in rows}


def test_every_write_refuses_a_vector_half_precision_cannot_hold(pg_url: str) -> None:
    """The host refuses first: a vector of an L2-normalised space has norm 1, so the embedder
    that answers 1e5 is refused on add, update, ingest and the query, before the store sees
    it. The store refuses on its own too, where a vector reaches it without the host's check
    (``put_vectors``, a query handed to its reader)."""
    with rankseam.open_memory(pg_url, embedder="loud", reranker=None) as memory:
        space = memory.embedder.descriptor.key
        memory.ingest(RECORDS)
        for write in (
            lambda: memory.add("a loud memory", memory_id="bad"),
            lambda: memory.update("q1", "now a loud note"),
            lambda: memory.ingest(
                [{"id": "n1", "text": "fine"}, {"id": "n2", "text": "a loud one"}]
            ),
            lambda: memory.search("loud harbour", 3),
        ):
            with pytest.raises(ConfigurationError, match="returned one of norm 100000"):
                write()
        # the store's own check: re-embedding's put_vectors, past the host
        with memory.store.read() as reader:
            key = reader.resolve(memory.get("q2").ref)
        assert key is not None
        vector = np.zeros(DIMS, dtype=np.float32)
        vector[5] = -1e5
        with pytest.raises(ValidationError) as err:
            memory.store.put_vectors([VectorItem(key, "default", vector)], space=space)
        assert "'q2'" in str(err.value) and "-100000" in str(err.value)
        # nothing of the refused writes was stored
        assert memory.stats()["memories"] == len(RECORDS)
        assert memory.get("q1").ref.revision == 1
        assert memory.search("quiet harbour", 3).hits
        stored = memory.store.vectors_of([key], memory.embedder.descriptor)
        assert float(np.abs(np.asarray(stored)).max()) == 1.0
        # the space's index builds over what was stored
        assert memory.store.maintain_index("default", memory.embedder.descriptor, force=True)
        # a query the index cannot hold, handed to the store's reader: refused, never a raw
        # server error
        memory.store.exact_below = 1
        query = np.zeros(DIMS, dtype=np.float32)
        query[3] = 1e5
        with memory.store.read() as reader, pytest.raises(ValidationError) as err:
            reader.vector("default", memory.embedder.descriptor, query, 3)
        _refused(err, space)
        assert "the query" in str(err.value)


def test_a_space_that_is_not_normalised_takes_large_components(pg_url: str) -> None:
    with rankseam.open_memory(pg_url, embedder="loud-raw", reranker=None) as memory:
        memory.ingest(RECORDS)
        assert memory.add("a loud memory", memory_id="big").ref is not None
        assert memory.store.maintain_index("default", memory.embedder.descriptor, force=True)
        memory.store.exact_below = 1
        assert memory.search("loud", 3).hits


def test_a_failed_index_build_leaves_no_invalid_index_and_can_be_repeated(
    pg_server: Any, pg_url: str
) -> None:
    """A vector an earlier release stored (written here with SQL, past the store's checks)
    breaks the half-precision build: the error names the memory, no INVALID index is left,
    and once the memory is deleted the build succeeds."""
    schema = pg_url.rsplit("schema=", 1)[1]
    with rankseam.open_memory(pg_url, embedder="loud", reranker=None) as memory:
        memory.ingest(RECORDS)
        descriptor = memory.embedder.descriptor
        with memory.store.read() as reader:
            key = reader.resolve(memory.get("q7").ref)
        with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
            conn.execute(
                f"UPDATE {schema}.vectors SET vector = '[0,0,0,1e5,0,0,0,0]' WHERE rid = %s",
                (key,),
            )
        for _attempt in range(2):  # the same, each time: nothing left behind in between
            with pytest.raises(ValidationError) as err:
                memory.store.maintain_index("default", descriptor, force=True)
            text = str(err.value)
            assert "'q7'" in text and descriptor.key in text and "maintain_index again" in text
            assert _indexes(pg_server, schema) == {}
        assert memory.search("quiet harbour", 3).hits  # searches compare every vector
        memory.delete("q7")
        built = memory.store.maintain_index("default", descriptor, force=True)
        assert built is not None
        assert _indexes(pg_server, schema) == {built["index"]: True}
        memory.store.exact_below = 1
        assert memory.search("quiet harbour", 3).hits
