"""A Haystack document store over a rankseam ``Memory``."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from haystack.dataclasses import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DuplicatePolicy

import rankseam
from rankseam.errors import ValidationError
from rankseam_haystack.components import Serialised
from rankseam_haystack.documents import from_record, to_record
from rankseam_haystack.filters import where_from_filters

__all__ = ["RankseamDocumentStore"]

#: How many ids one ``$in`` of an existence check holds (rankseam's filters take up to 1000).
_IDS_PER_QUERY = 1000


class RankseamDocumentStore(Serialised):
    """Haystack's ``DocumentStore`` protocol over a rankseam memory store: each document is a
    memory of one namespace (its ``id`` the memory id, its ``content`` the text, its ``meta``
    the metadata; rankseam_haystack.documents says what else is kept and what is not).

    ``target``: the store, as ``rankseam.open_memory`` takes it (a SQLite file path, or a URL
    of an installed store plugin); ``namespace``: the namespace the documents live in
    (default: the configuration's, ``"default"``); ``config_file``: a ``rankseam.toml``;
    ``open_options``: further ``open_memory`` keywords (``{"embedder": "hashed"}``). Or
    ``memory``: an open ``Memory`` the caller owns (``target`` and the options must then be
    left out). The store opens its own memory when made and closes it in :meth:`close`.

    ``write_documents`` takes a ``DuplicatePolicy``: ``FAIL`` (and ``NONE``, its default here)
    refuses the whole batch, writing nothing, when an id is already stored (or repeated in the
    batch); ``SKIP`` writes only the new ids; ``OVERWRITE`` writes a new revision of a stored
    id (rankseam keeps the previous revisions readable by their ref). Each batch of 500 is one
    transaction. ``delete_documents`` tombstones (rankseam's ``delete``: the revisions stay
    readable by ref), or, with ``hard_delete=True``, forgets them (rankseam's ``forget``: the
    text and vectors are gone from the store). Deleting an id that is not stored does nothing.

    ``filter_documents`` returns the live documents that pass Haystack's filters
    (rankseam_haystack.filters maps them onto rankseam's), in write order. The async methods
    run the same operations in a worker thread.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | None = None,
        *,
        namespace: str | None = None,
        config_file: str | os.PathLike[str] | None = None,
        open_options: Mapping[str, Any] | None = None,
        hard_delete: bool = False,
        memory: rankseam.Memory | None = None,
    ) -> None:
        self.namespace = namespace
        self.config_file = None if config_file is None else os.fspath(config_file)
        self.open_options = dict(open_options or {})
        self.hard_delete = bool(hard_delete)
        if memory is not None:
            if target is not None or config_file is not None or open_options:
                raise TypeError(
                    "RankseamDocumentStore got memory= and target/config_file/open_options; "
                    "give an open Memory, or what to open, not both"
                )
            self.target: str | None = memory.path
            self._memory, self._owned = memory, False
        else:
            self.target = None if target is None else os.fspath(target)
            self._memory = rankseam.open_memory(
                self.target, config_file=self.config_file, **self.open_options
            )
            self._owned = True

    @property
    def memory(self) -> rankseam.Memory:
        """The rankseam memory the documents are stored in."""
        return self._memory

    def close(self) -> None:
        """Close the memory when this store opened it (a ``memory=`` given stays open)."""
        if self._owned:
            self._memory.close()

    def __repr__(self) -> str:
        return f"RankseamDocumentStore({self.target!r}, namespace={self.namespace!r})"

    # -- serialisation ---------------------------------------------------------------------

    #: What ``to_dict`` writes: the target is never a password (rankseam's ``Memory.path``
    #: leaves it out; give it through the environment).
    SETTINGS = ("target", "namespace", "config_file", "open_options", "hard_delete")

    # -- the DocumentStore protocol -----------------------------------------------------------

    def count_documents(self) -> int:
        """How many live documents the namespace holds."""
        counts = self._memory.stats()["namespaces"].get(self._namespace(), {})
        return int(counts.get("memories", 0))

    def filter_documents(self, filters: dict[str, Any] | None = None) -> list[Document]:
        """The live documents that pass ``filters`` (Haystack's syntax), in write order."""
        where = where_from_filters(filters)
        return [
            from_record(m.ref.memory_id, m.text, m.metadata)
            for m in self._memory.list(self.namespace, where=where)
        ]

    def write_documents(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        """Write ``documents`` under ``policy`` and return how many were written."""
        if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
            raise ValidationError(
                f"documents must be a list of haystack Documents, got {type(documents).__name__}"
            )
        policy = DuplicatePolicy(policy)
        records: dict[str, dict[str, Any]] = {}
        for i, document in enumerate(documents):
            record = to_record(document, f"documents[{i}]")
            if record["id"] in records:
                if policy in (DuplicatePolicy.FAIL, DuplicatePolicy.NONE):
                    raise DuplicateDocumentError(
                        f"documents[{i}]: the id {record['id']!r} is repeated in the batch "
                        "(DuplicatePolicy.FAIL); nothing was written"
                    )
                if policy == DuplicatePolicy.SKIP:
                    continue
            records[record["id"]] = record  # OVERWRITE: the last one wins
        stored = self._live_ids(list(records))
        if stored and policy in (DuplicatePolicy.FAIL, DuplicatePolicy.NONE):
            shown = ", ".join(repr(i) for i in sorted(stored)[:5])
            raise DuplicateDocumentError(
                f"{len(stored)} document id(s) are already stored ({shown}); nothing was "
                "written. Use DuplicatePolicy.OVERWRITE to write new revisions, or SKIP"
            )
        if policy == DuplicatePolicy.SKIP:
            records = {key: r for key, r in records.items() if key not in stored}
        if records:
            self._memory.ingest(list(records.values()), namespace=self.namespace)
        return len(records)

    def delete_documents(self, document_ids: list[str]) -> None:
        """Delete the live documents of these ids (tombstoned, or forgotten with
        ``hard_delete``); an id that is not stored is left alone."""
        if isinstance(document_ids, str) or not isinstance(document_ids, Sequence):
            raise ValidationError(
                f"document_ids must be a list of ids, got {type(document_ids).__name__}"
            )
        delete = self._memory.forget if self.hard_delete else self._memory.delete
        for memory_id in self._ordered_live(document_ids):
            delete(memory_id, namespace=self.namespace)

    # -- beyond the protocol: what Haystack's extended suites test ----------------------------

    def count_documents_by_filter(self, filters: dict[str, Any]) -> int:
        """How many live documents pass ``filters``."""
        where = where_from_filters(filters)
        return sum(1 for _ in self._memory.list(self.namespace, where=where))

    def delete_by_filter(self, filters: dict[str, Any]) -> int:
        """Delete the live documents that pass ``filters`` (as :meth:`delete_documents`
        does); returns how many."""
        ids = [d.id for d in self.filter_documents(filters)]
        self.delete_documents(ids)
        return len(ids)

    def update_by_filter(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        """Merge ``meta`` into the meta of the live documents that pass ``filters``: each gets
        a new revision (the previous one stays readable); returns how many."""
        if not isinstance(meta, Mapping):
            raise ValidationError(f"meta must be a mapping, got {type(meta).__name__}")
        updated = [
            dataclasses.replace(d, meta={**d.meta, **meta}) for d in self.filter_documents(filters)
        ]
        return self.write_documents(updated, policy=DuplicatePolicy.OVERWRITE)

    def delete_all_documents(self, recreate_index: bool = False) -> None:
        """Delete every live document of the namespace (as :meth:`delete_documents` does).
        ``recreate_index=True`` starts the namespace afresh instead: rankseam's ``reset``
        forgets every memory of it, its history and tombstones too."""
        if recreate_index:
            self._memory.reset(self._namespace(), confirm=True)
            return
        self.delete_documents([m.ref.memory_id for m in self._memory.list(self.namespace)])

    # -- async twins ----------------------------------------------------------------------

    async def count_documents_async(self) -> int:
        return await asyncio.to_thread(self.count_documents)

    async def filter_documents_async(self, filters: dict[str, Any] | None = None) -> list[Document]:
        return await asyncio.to_thread(self.filter_documents, filters)

    async def write_documents_async(
        self, documents: list[Document], policy: DuplicatePolicy = DuplicatePolicy.NONE
    ) -> int:
        return await asyncio.to_thread(self.write_documents, documents, policy)

    async def delete_documents_async(self, document_ids: list[str]) -> None:
        await asyncio.to_thread(self.delete_documents, document_ids)

    async def count_documents_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.count_documents_by_filter, filters)

    async def delete_by_filter_async(self, filters: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.delete_by_filter, filters)

    async def update_by_filter_async(self, filters: dict[str, Any], meta: dict[str, Any]) -> int:
        return await asyncio.to_thread(self.update_by_filter, filters, meta)

    async def delete_all_documents_async(self, recreate_index: bool = False) -> None:
        await asyncio.to_thread(self.delete_all_documents, recreate_index)

    # -- helpers ----------------------------------------------------------------------------

    def _namespace(self) -> str:
        return self._memory.config.namespace if self.namespace is None else self.namespace

    def _live_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` are stored and live."""
        found: set[str] = set()
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = list(ids[start : start + _IDS_PER_QUERY])
            where = {"memory_id": {"$in": chunk}}
            found.update(m.ref.memory_id for m in self._memory.list(self.namespace, where=where))
        return found

    def _ordered_live(self, ids: Sequence[str]) -> Iterator[str]:
        wanted = [i for i in dict.fromkeys(ids) if isinstance(i, str) and i]
        live = self._live_ids(wanted)
        return (i for i in wanted if i in live)
