"""A LangChain vector store over a rankseam ``Memory``."""

from __future__ import annotations

import os
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

import rankseam
from rankseam import Memory
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin.adapters import result_score, search_arguments
from rankseam.types import SearchResult
from rankseam_langchain.arguments import SEARCH_ARGUMENTS, layered, search_settings
from rankseam_langchain.embeddings import EMBEDDER, embedding_config

__all__ = ["RankseamVectorStore"]

#: The reranker ``max_marginal_relevance_search`` runs (the rankseam-mmr plugin).
MMR = "mmr"
_OWNER = "RankseamVectorStore"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class RankseamVectorStore(VectorStore):
    """A rankseam ``Memory`` as a LangChain ``VectorStore``: the memory store of a LangChain
    application, searched by rankseam (lexical and vector channels fused, filters inside the
    search, an optional reranker through the governed rerank seam).

    A document is a memory: ``Document.id`` is the memory id, ``page_content`` its text and
    ``metadata`` exactly the metadata stored with it (the citation, scores and trace are
    :class:`~rankseam_langchain.RankseamRetriever`'s). Adding a document under an id that
    exists writes a new revision of that memory (the previous one stays readable by its
    ref); ``delete`` tombstones (``forget=True``: hard-deletes).

    ``importance`` (rankseam's prior, in [0, 1]): ``add_documents(..., importance=0.9)``
    (one number, or one per document), else the number under ``metadata[importance_key]``
    (default ``"importance"``; it stays in the metadata too), else the memory's previous
    importance (a new memory: rankseam's default, 0.5).

    Searches take ``filter`` (rankseam's ``where``, read as :class:`RankseamRetriever` reads
    it: docs/filters.md) and rankseam's search keywords (``namespace``, ``reranker``,
    ``reranker_options``, ``pool``, ``on_error``, ``where``, ``thread``, ``since``,
    ``until``, ``min_score``); a call's keyword overrides the store's setting of the same
    name (``search_settings``: its ``namespace``, ``reranker`` and ``reranker_options``; a
    call's ``reranker`` comes without the store's ``reranker_options``).
    ``reranker=None`` (default) is the memory's configured reranker; ``"none"`` the coarse
    order. A score is the hit's: the reranker's when it gave one, else the coarse
    (fused) score, higher is better.

    ``memory``: an open ``Memory`` you own and close; or let :meth:`open` / :meth:`from_texts`
    open one, which :meth:`close` (or ``with``) closes.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        namespace: str | None = None,
        reranker: Any = None,
        reranker_options: Mapping[str, Any] | None = None,
        importance_key: str | None = "importance",
    ) -> None:
        if not isinstance(memory, Memory):
            raise TypeError(
                f"{_OWNER} needs an open rankseam Memory (rankseam.open_memory(...)), got "
                f"{type(memory).__name__}; or use {_OWNER}.open(path, embedding=...)"
            )
        self.memory = memory
        self.importance_key = importance_key
        #: The store's search settings, which a call's keywords of the same names override.
        self.search_settings: dict[str, Any] = {
            "namespace": namespace,
            "reranker": reranker,
            "reranker_options": reranker_options,
        }
        self._owns_memory = False

    @property
    def namespace(self) -> str | None:
        """The namespace the store writes, reads and searches (``None``: the memory's)."""
        return self.search_settings["namespace"]  # type: ignore[no-any-return]

    # -- opening and closing ---------------------------------------------------------------

    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str] | None = None,
        *,
        embedding: Embeddings | None = None,
        namespace: str | None = None,
        reranker: Any = None,
        reranker_options: Mapping[str, Any] | None = None,
        importance_key: str | None = "importance",
        **open_memory: Any,
    ) -> RankseamVectorStore:
        """Open (or create) the store at ``target`` (``rankseam.open_memory``'s target: a path
        or a store URL) as a vector store that closes it with :meth:`close`. ``embedding``: a
        LangChain ``Embeddings`` the store embeds with (rankseam's ``langchain`` embedder;
        its other options under ``open_memory["config"]["embedders"]["langchain"]``); without
        it, the configured rankseam embedder. Other keywords go to ``open_memory``
        (``config``, ``config_file``, ``create``, ...)."""
        if embedding is not None:
            if open_memory.get("embedder") not in (None, EMBEDDER):
                raise TypeError(
                    f"{_OWNER}.open got both embedding= and embedder="
                    f"{open_memory['embedder']!r}; give one"
                )
            open_memory["config"] = embedding_config(embedding, open_memory.get("config"))
            open_memory["embedder"] = EMBEDDER
        store = cls(
            rankseam.open_memory(target, **open_memory),
            namespace=namespace,
            reranker=reranker,
            reranker_options=reranker_options,
            importance_key=importance_key,
        )
        store._owns_memory = True
        return store

    def close(self) -> None:
        """Close the memory when this store opened it (:meth:`open`, :meth:`from_texts`); a
        memory you passed in is yours to close."""
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> RankseamVectorStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings | None = None,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        target: str | os.PathLike[str] | None = None,
        memory: Memory | None = None,
        **kwargs: Any,
    ) -> RankseamVectorStore:
        """A store holding ``texts``: on ``memory`` when given (yours to close), else opened
        at ``target`` with ``embedding`` as :meth:`open` does (close it). ``kwargs``:
        ``importance`` for the texts, else the store's and :meth:`open`'s settings."""
        importance = kwargs.pop("importance", None)
        if memory is not None:
            if embedding is not None:
                raise TypeError(
                    f"{_OWNER}.from_texts embeds with the memory's own embedder when memory= "
                    "is given; leave embedding out (or open the memory with it: "
                    f"{_OWNER}.open(path, embedding=...))"
                )
            store = cls(memory, **kwargs)
        else:
            store = cls.open(target, embedding=embedding, **kwargs)
        try:
            store.add_texts(texts, metadatas, ids=ids, importance=importance)
        except BaseException:
            store.close()
            raise
        return store

    @property
    def embeddings(self) -> Embeddings | None:
        """The LangChain ``Embeddings`` the memory embeds with (rankseam's ``langchain``
        embedder), else ``None`` (a rankseam embedder)."""
        found = getattr(self.memory.embedder, "embeddings", None)
        return found if isinstance(found, Embeddings) else None

    # -- writes ----------------------------------------------------------------------------

    def _records(
        self,
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any] | None] | None,
        ids: Sequence[str | None] | None,
        importance: float | Sequence[float] | None,
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """The ids (given, else new random ones) and the ``Memory.ingest`` records."""
        n = len(texts)
        for name, given in (("metadatas", metadatas), ("ids", ids)):
            if given is not None and len(given) != n:
                raise ValueError(f"{_OWNER} got {len(given)} {name} for {n} texts; give one each")
        if importance is None or _is_number(importance):
            importances: Sequence[Any] = [importance] * n
        elif isinstance(importance, Sequence) and not isinstance(importance, str):
            if len(importance) != n:
                raise ValueError(
                    f"{_OWNER} got {len(importance)} importances for {n} texts; give one "
                    "number, or one each"
                )
            importances = importance
        else:
            raise TypeError(
                f"{_OWNER}: importance must be a number in [0, 1] or one per text, got "
                f"{importance!r}"
            )
        out_ids: list[str] = []
        records: list[dict[str, Any]] = []
        for i, text in enumerate(texts):
            memory_id = (ids[i] if ids is not None else None) or uuid.uuid4().hex
            metadata = dict((metadatas[i] if metadatas is not None else None) or {})
            record: dict[str, Any] = {"id": memory_id, "text": text, "metadata": metadata}
            weight = importances[i]
            if weight is None and self.importance_key is not None:
                weight = metadata.get(self.importance_key)
                weight = weight if _is_number(weight) else None
            if weight is not None:
                record["importance"] = weight
            out_ids.append(memory_id)
            records.append(record)
        return out_ids, records

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        importance: float | Sequence[float] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store ``texts`` (one memory each, in one transaction per 500) and return their
        ids: ``ids`` when given (an existing id gets a new revision when its text, metadata
        or importance changed), else new random ones."""
        _no_extra("add_texts", kwargs)
        out_ids, records = self._records(list(texts), metadatas, ids, importance)
        self.memory.ingest(records, namespace=self.namespace)
        return out_ids

    def _documents_records(
        self, documents: Sequence[Document], kwargs: dict[str, Any]
    ) -> tuple[list[str], list[dict[str, Any]]]:
        """``add_documents``' ids (``ids=`` first, else the documents' own) and records."""
        ids = kwargs.pop("ids", None)
        importance = kwargs.pop("importance", None)
        _no_extra("add_documents", kwargs)
        if ids is None and any(d.id for d in documents):
            ids = [d.id for d in documents]
        texts = [d.page_content for d in documents]
        return self._records(texts, [d.metadata for d in documents], ids, importance)

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store ``documents`` and return their ids: ``ids=`` when given, else each
        document's own ``id``, else a new random one. ``importance=``: see the class."""
        out_ids, records = self._documents_records(documents, kwargs)
        self.memory.ingest(records, namespace=self.namespace)
        return out_ids

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """:meth:`add_documents` on the memory's async twin."""
        out_ids, records = self._documents_records(documents, kwargs)
        await self.memory.aingest(records, namespace=self.namespace)
        return out_ids

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the memories ``ids`` (an id that is not stored, or already deleted, is
        skipped). A tombstone by default: searches and :meth:`get_by_ids` no longer find
        them, their revisions stay readable through rankseam (``Memory.history``);
        ``forget=True`` hard-deletes them (text, metadata and vectors leave the store and
        its indexes: ``Memory.forget``)."""
        remove = self.memory.forget if _delete_arguments(ids, kwargs) else self.memory.delete
        for memory_id in ids or ():
            _unless_missing(remove, memory_id, self.namespace)
        return True

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """:meth:`delete` on the memory's async twins (``Memory.adelete`` / ``aforget``)."""
        remove = self.memory.aforget if _delete_arguments(ids, kwargs) else self.memory.adelete
        for memory_id in ids or ():
            await _aunless_missing(remove(memory_id, namespace=self.namespace))
        return True

    # -- reads -----------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents of ``ids`` (current revisions), in the order given; an id
        that is not stored, or deleted, is left out. One listing per 1,000 ids."""
        listed = self.memory.list
        found = [m for where in _id_filters(ids) for m in listed(self.namespace, where=where)]
        return _in_order(ids, found)

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """:meth:`get_by_ids` on the memory's async twin (``Memory.alist``)."""
        found: list[Any] = []
        for where in _id_filters(ids):
            found += await self.memory.alist(self.namespace, where=where)
        return _in_order(ids, found)

    def _search_kwargs(
        self, filter: Mapping[str, Any] | None, kwargs: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The ``Memory.search`` keywords of one call: the store's settings overridden by the
        call's (``filter`` is ``where``, checked as the retriever checks it)."""
        given = dict(kwargs)
        if filter is not None:
            given["filter"] = filter
        call = search_settings(
            given, "keyword argument(s)", owner=_OWNER, accepted=SEARCH_ARGUMENTS
        )
        return search_arguments(**layered(SEARCH_ARGUMENTS, self.search_settings, call))

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """The ``k`` best documents for ``query`` with their scores (higher is better)."""
        return _scored(self.memory.search(query, k, **self._search_kwargs(filter, kwargs)))

    async def asimilarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """:meth:`similarity_search_with_score` on ``Memory.asearch``."""
        arguments = self._search_kwargs(filter, kwargs)
        return _scored(await self.memory.asearch(query, k, **arguments))

    def similarity_search(
        self,
        query: str,
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The ``k`` best documents for ``query``, best first."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    async def asimilarity_search(
        self,
        query: str,
        k: int = 4,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`similarity_search` on ``Memory.asearch``."""
        found = await self.asimilarity_search_with_score(query, k, filter, **kwargs)
        return [doc for doc, _ in found]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """A hit's score is already a relevance (higher is better; the fused coarse score is
        in [0, 1]): ``similarity_search_with_relevance_scores`` and the
        ``similarity_score_threshold`` retriever use it as it is."""
        return _same

    def _mmr_kwargs(
        self,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: Mapping[str, Any] | None,
        kwargs: Mapping[str, Any],
    ) -> dict[str, Any]:
        taken = sorted({"reranker", "reranker_options", "pool"} & set(kwargs))
        if taken:
            raise TypeError(
                f"{_OWNER}.max_marginal_relevance_search got {taken}: it runs the {MMR!r} "
                "reranker with lambda_mult over a pool of fetch_k; use similarity_search(..., "
                "reranker=...) for another reranker"
            )
        if MMR not in self.memory.context.available("reranker"):
            raise ConfigurationError(
                f"{_OWNER}.max_marginal_relevance_search runs rankseam's {MMR!r} reranker, "
                "which is not installed: pip install rankseam-mmr"
            )
        mmr = {
            "reranker": MMR,
            "reranker_options": {"lambda": lambda_mult},
            "pool": max(fetch_k, k),
        }
        return self._search_kwargs(filter, {**kwargs, **mmr})

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """Maximal marginal relevance through rankseam's ``mmr`` reranker (the rankseam-mmr
        plugin; a clear error without it): the coarse pool of ``fetch_k`` candidates (at most
        200), reranked for ``k`` documents, ``lambda_mult`` 1 = pure relevance, 0 = pure
        diversity (LangChain's direction), over the memories' stored vectors. Its async twin
        is LangChain's (this method in an executor thread)."""
        arguments = self._mmr_kwargs(k, fetch_k, lambda_mult, filter, kwargs)
        return [doc for doc, _ in _scored(self.memory.search(query, k, **arguments))]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, **kwargs: Any
    ) -> list[Document]:
        """Not supported: rankseam searches by text (its channels, lexical and vector,
        answer one query text, and the memory's embedder embeds it)."""
        raise NotImplementedError(_BY_VECTOR)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        """Not supported: see :meth:`similarity_search_by_vector`."""
        raise NotImplementedError(_BY_VECTOR)


_BY_VECTOR = (
    f"{_OWNER} searches by query text, not by vector (rankseam fuses a lexical and a vector "
    "channel over one query text, embedded by the memory's embedder); use similarity_search "
    "or max_marginal_relevance_search with the text"
)


def _missing(exc: KeyError) -> None:
    """Re-raise ``exc`` unless it is rankseam's "no such memory" (``MemoryNotFoundError``,
    a ``ValidationError`` and a ``KeyError``): deleting what is not stored does nothing."""
    if not isinstance(exc, ValidationError):
        raise exc


def _unless_missing(remove: Callable[..., object], memory_id: str, namespace: str | None) -> None:
    try:
        remove(memory_id, namespace=namespace)
    except KeyError as exc:
        _missing(exc)


async def _aunless_missing(removing: Awaitable[object]) -> None:
    try:
        await removing
    except KeyError as exc:
        _missing(exc)


#: How many values rankseam's ``$in`` takes at most (docs/filters.md).
_IN_MAX = 1000


def _id_filters(ids: Sequence[str]) -> list[dict[str, Any]]:
    """The ``where`` filters that list the memories ``ids``, 1,000 ids each."""
    unique = list(dict.fromkeys(ids))
    return [{"memory_id": {"$in": unique[i : i + _IN_MAX]}} for i in range(0, len(unique), _IN_MAX)]


def _in_order(ids: Sequence[str], found: Iterable[Any]) -> list[Document]:
    """The listed memories as documents, in the order of ``ids``."""
    by_id = {m.ref.memory_id: m for m in found}
    return [
        _document(i, by_id[i].text, by_id[i].metadata) for i in dict.fromkeys(ids) if i in by_id
    ]


def _same(score: float) -> float:
    return score


def _document(memory_id: str, text: str, metadata: Mapping[str, Any]) -> Document:
    return Document(id=memory_id, page_content=text, metadata=dict(metadata))


def _scored(result: SearchResult) -> list[tuple[Document, float]]:
    return [
        (
            _document(hit.ref.memory_id, hit.text, hit.metadata),
            float(result_score(hit.score, hit.rerank_score)),  # type: ignore[arg-type]
        )
        for hit in result.hits
    ]


def _no_extra(method: str, kwargs: Mapping[str, Any]) -> None:
    if kwargs:
        raise TypeError(
            f"{_OWNER}.{method} got unexpected keyword argument(s) {sorted(kwargs)}; it "
            "accepts ids and importance"
        )


def _delete_arguments(ids: list[str] | None, kwargs: Mapping[str, Any]) -> bool:
    """``delete``'s ``forget`` flag; deleting everything is refused (``ids=None``)."""
    unknown = sorted(set(kwargs) - {"forget"})
    if unknown:
        raise TypeError(
            f"{_OWNER}.delete got unexpected keyword argument(s) {unknown}; it accepts forget"
        )
    if ids is None:
        raise ValueError(
            f"{_OWNER}.delete needs the ids to delete; to empty a whole namespace, use "
            "rankseam's Memory.reset(namespace, confirm=True)"
        )
    return bool(kwargs.get("forget", False))
