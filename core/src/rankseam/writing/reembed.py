"""Re-embedding a store into another embedder space, piece by piece (what
``Memory.reembed`` runs; docs/store.md, "Re-embedding"): the pass over the revisions that
lack a vector in the space, what its progress callback gets and what it reports, and the lock
that keeps a Memory's writes out of the end of a re-embed."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

from rankseam.embedding import Embedder, embed_checked
from rankseam.store.contract import Store
from rankseam.store.rows import VectorItem

__all__ = [
    "ReembedProgress",
    "ReembedReport",
    "SharedExclusive",
    "reembed_pass",
    "reembed_progress",
]


@attrs.frozen
class ReembedProgress:
    """Where a running :meth:`Memory.reembed` stands, handed to its ``progress`` callback
    when it starts and after every batch. ``remaining`` is an estimate: the live memories
    without a vector in ``space`` when the call started, less those embedded since (writes of
    other processes during the run add to it; this Memory's own writes do not)."""

    space: str
    embedded: int
    remaining: int

    @property
    def fraction(self) -> float:
        """The share of this call's work done, in [0, 1]."""
        total = self.embedded + self.remaining
        return self.embedded / total if total else 1.0


@attrs.frozen
class ReembedReport:
    """What :meth:`Memory.reembed` did. ``complete``: every live memory had a vector in
    ``space`` when it returned (False when it stopped at ``max_memories``: call it again to
    continue). ``switched``: the Memory now searches and writes with the new embedder."""

    space: str
    embedded: int
    seconds: float
    complete: bool = True
    switched: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "space": self.space,
            "embedded": self.embedded,
            "seconds": round(self.seconds, 3),
            "complete": self.complete,
            "switched": self.switched,
        }


class SharedExclusive:
    """A lock held shared by writes and exclusively by the end of a re-embed (a waiting
    exclusive holder goes before new shared ones, so a steady stream of writes cannot starve
    it)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0

    @contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


def reembed_pass(
    store: Store,
    embedder: Embedder,
    batch_size: int,
    limit: int | None,
    page_done: Callable[[int], None],
) -> bool:
    """One pass over the live revisions without a vector in ``embedder``'s space (pages of
    at most ``batch_size``, in key order: only one page's texts and vectors are held at a
    time), each page embedded and stored in ONE transaction; ``page_done`` gets each page's
    size. True when it stopped at ``limit`` memories."""
    space = embedder.descriptor.key
    total = 0
    for page in store.iter_missing_vectors(space, page=batch_size):
        if limit is not None:
            if total >= limit:
                return True
            page = page[: limit - total]
        vectors = embed_checked(embedder, [p.text for p in page])
        store.put_vectors(
            [VectorItem(p.key, p.namespace, v) for p, v in zip(page, vectors, strict=True)],
            space=space,
        )
        total += len(page)
        page_done(len(page))
    return False


def reembed_progress(
    progress: bool | Callable[[ReembedProgress], None], space: str, remaining: int
) -> tuple[Callable[[ReembedProgress], None], Callable[[], None]]:
    """The ``progress`` callback of a re-embed, or (``True``) a tqdm bar on stderr when tqdm
    is installed, and what closes it."""
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return (lambda _p: None), (lambda: None)
    try:
        from tqdm import tqdm
    except ImportError:
        return (lambda _p: None), (lambda: None)
    bar = tqdm(total=remaining, unit="mem", desc=f"reembed {space}", file=sys.stderr)

    def tick(p: ReembedProgress) -> None:
        bar.total = p.embedded + p.remaining
        bar.n = p.embedded
        bar.refresh()

    return tick, bar.close
