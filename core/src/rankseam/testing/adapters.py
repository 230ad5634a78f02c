"""The kit's helpers for framework adapters (``rankseam.testing``): an integration whose
surface is classes for another framework (it may register rankseam components too, as
rankseam-langchain registers its ``langchain`` embedder and rankseam-mcp its command)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rankseam.testing.host import invoke_cli

if TYPE_CHECKING:
    from rankseam import Memory

__all__ = ["FILTER_SAMPLE", "SAMPLE_MEMORIES", "assert_integration", "sample_memory"]

#: What :func:`sample_memory` holds, as (memory id, text): two near-duplicate memories about
#: the same dinner (a diversifying reranker keeps one of them), and two others.
SAMPLE_MEMORIES = (
    ("dinner-1", "Dana's birthday dinner is on Friday at the Thai place"),
    ("dinner-2", "Dana's birthday dinner is Friday at the Thai place on Main Street"),
    ("standup", "Moved the weekly standup to 9:30"),
    ("cat", "Bob's cat only eats salmon-flavoured food"),
)

_START, _DAY = 1_796_083_200, 86_400  # 2026-12-01T00:00:00+00:00, one day

#: Records for ``Memory.ingest`` (``sample_memory(path, FILTER_SAMPLE)``) that an adapter's
#: filter tests search: four memories about a birthday dinner, of two users
#: (``metadata["user"]``: ``"dana"``, ``"sam"``) and two years (``metadata["year"]``), one of
#: them in the thread ``"chat-7"`` (position 1), stored a day apart from 2026-12-01T00:00:00Z
#: (``created_at``, epoch seconds), in the order ``d1``, ``d2``, ``s1``, ``c1``.
FILTER_SAMPLE: tuple[Mapping[str, Any], ...] = (
    {"id": "d1", "text": "Dana's birthday dinner is at Luigi's",
     "metadata": {"user": "dana", "year": 2026}, "created_at": _START},
    {"id": "d2", "text": "Dana prefers window seats at dinner",
     "metadata": {"user": "dana", "year": 2024}, "created_at": _START + _DAY},
    {"id": "s1", "text": "Sam's birthday dinner is in May",
     "metadata": {"user": "sam", "year": 2026}, "created_at": _START + 2 * _DAY},
    {"id": "c1", "text": "planning the birthday dinner in the chat", "thread": "chat-7",
     "position": 1, "created_at": _START + 3 * _DAY},
)  # fmt: skip


@contextlib.contextmanager
def sample_memory(
    path: str | os.PathLike[str], records: Iterable[Mapping[str, Any]] | None = None
) -> Iterator[Memory]:
    """A ``rankseam.Memory`` at ``path`` holding :data:`SAMPLE_MEMORIES` (each with metadata
    ``{"source": "test"}``), or ``records`` (``Memory.ingest``'s records, e.g.
    :data:`FILTER_SAMPLE`) when given, closed when the block ends: what an adapter's tests
    search."""
    import rankseam

    with rankseam.open_memory(path) as memory:
        if records is not None:
            memory.ingest([dict(record) for record in records])
        else:
            for memory_id, text in SAMPLE_MEMORIES:
                memory.add(text, memory_id=memory_id, metadata={"source": "test"})
        yield memory


def assert_integration(
    plugin: str,
    *,
    distribution: str,
    framework: str,
    package: str | None = None,
    hooks: Sequence[str] | None = None,
) -> None:
    """Assert that ``rankseam plugins`` lists the integration ``plugin`` (its entry-point name)
    as loaded cleanly from ``distribution``, with exactly the hooks ``hooks`` (their names, in
    any order; ``[]`` for an integration that implements none; ``None``: not checked), and
    that importing its entry point ``package.plugin`` and ``package`` itself (default: the
    distribution's name with ``_`` for ``-``), in a fresh interpreter, imports no module whose
    name starts with ``framework`` (so the integration costs the ``rankseam`` command
    nothing)."""
    package = package or distribution.replace("-", "_")
    result = invoke_cli(["plugins"])
    if result.exit_code != 0:
        raise AssertionError(f"rankseam plugins failed: {result.output}")
    listed = {p["name"]: p for p in json.loads(result.output)}
    info = listed.get(plugin)
    if info is None:
        raise AssertionError(f"rankseam plugins does not list {plugin!r} ({sorted(listed)})")
    if info["status"] != "ok":
        raise AssertionError(f"plugin {plugin!r} is {info['status']}: {info}")
    if info["distribution"] != distribution:
        raise AssertionError(
            f"plugin {plugin!r} comes from {info['distribution']!r}, not {distribution!r}"
        )
    if hooks is not None and sorted(info["hooks"]) != sorted(hooks):
        raise AssertionError(
            f"plugin {plugin!r} implements the hooks {sorted(info['hooks'])}, not {sorted(hooks)}"
        )
    code = (
        f"import sys, {package}.plugin, {package}; "
        f"print(sorted(m for m in sys.modules if m.startswith({framework!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    if out.stdout.strip() != "[]":
        raise AssertionError(f"importing {package} imported {framework} modules: {out.stdout}")
