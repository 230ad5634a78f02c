"""A Haystack ``Document`` as a rankseam memory, and back.

===================  ===========================================================================
Haystack             rankseam
===================  ===========================================================================
``id``               the memory id
``content``          the memory's text (required: rankseam stores and searches text)
``meta``             the memory's metadata, key for key; a key whose value is ``None`` is kept
                     as absent (its name is remembered, so it reads back as ``None``)
``embedding``        kept exactly (float64, in the reserved metadata key ``_haystack``) and
                     returned as it was given; rankseam does not search with it: its own
                     embedder embeds the text
``sparse_embedding`` kept exactly, the same way
``score``            not kept: a score belongs to a query's answer (the retriever sets it)
``blob``             refused: rankseam stores text, not bytes
===================  ===========================================================================

The reserved key ``_haystack`` holds what a document has beyond its text and meta; a document
whose meta has that key is refused, and a filter may not name it.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from haystack.dataclasses import Document, SparseEmbedding

from rankseam.errors import ValidationError
from rankseam_haystack.filters import RESERVED_KEY

__all__ = ["RESERVED_KEY", "document_meta", "from_record", "to_record"]


def _encode_vector(values: Sequence[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}d", *values)).decode("ascii")


def _decode_vector(text: str) -> list[float]:
    raw = base64.b64decode(text)
    return list(struct.unpack(f"<{len(raw) // 8}d", raw))


def to_record(document: object, at: str) -> dict[str, Any]:
    """The ``Memory.ingest`` record of ``document`` (``at`` names it in errors:
    ``documents[3]``): ``id``, ``text`` and ``metadata`` (always given, so that a new
    revision replaces the previous one's metadata whole). A ``ValidationError`` (a
    ``ValueError``) says what cannot be stored and what to do."""
    if not isinstance(document, Document):
        raise ValidationError(f"{at} must be a haystack Document, got {type(document).__name__}")
    name = f"{at} (id {document.id!r})"
    if not isinstance(document.content, str) or not document.content.strip():
        raise ValidationError(
            f"{name} has no text content; rankseam stores and searches text (convert the "
            "file to text first, e.g. with a Haystack converter)"
        )
    if document.blob is not None:
        raise ValidationError(
            f"{name} has a blob; rankseam stores text, not bytes: keep the blob elsewhere "
            "and store its text as content (and a reference to it in meta)"
        )
    meta = dict(document.meta or {})
    if RESERVED_KEY in meta:
        raise ValidationError(
            f"{name}: the meta key {RESERVED_KEY!r} is reserved by rankseam-haystack; rename it"
        )
    extra: dict[str, Any] = {}
    nulls = sorted(key for key, value in meta.items() if value is None)
    if nulls:
        extra["null_keys"] = nulls
    if document.embedding is not None:
        extra["embedding"] = _encode_vector(document.embedding)
    if document.sparse_embedding is not None:
        extra["sparse_embedding"] = document.sparse_embedding.to_dict()
    metadata = {key: value for key, value in meta.items() if value is not None}
    if extra:
        metadata[RESERVED_KEY] = extra
    return {"id": document.id, "text": document.content, "metadata": metadata}


def document_meta(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``metadata`` as a document's ``meta`` (the reserved key taken out, ``None`` values put
    back) and the ``Document`` keywords it holds (``embedding``, ``sparse_embedding``)."""
    meta = dict(metadata)
    extra = meta.pop(RESERVED_KEY, None) or {}
    for key in extra.get("null_keys", ()):
        meta.setdefault(key, None)
    fields: dict[str, Any] = {}
    if "embedding" in extra:
        fields["embedding"] = _decode_vector(extra["embedding"])
    if "sparse_embedding" in extra:
        fields["sparse_embedding"] = SparseEmbedding.from_dict(dict(extra["sparse_embedding"]))
    return meta, fields


def from_record(memory_id: str, text: str, metadata: Mapping[str, Any]) -> Document:
    """The Haystack document a stored memory holds (no score: the store's answer is not a
    query's)."""
    meta, fields = document_meta(metadata)
    return Document(id=memory_id, content=text, meta=meta, **fields)
