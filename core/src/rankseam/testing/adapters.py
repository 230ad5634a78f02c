"""The kit's helpers for framework adapters (``rankseam.testing``): an integration whose
surface is classes for another framework (it may register rankseam components too, as
rankseam-langchain registers its ``langchain`` embedder and rankseam-mcp its command)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from rankseam.testing.host import invoke_cli

if TYPE_CHECKING:
    from rankseam import Memory

__all__ = ["SAMPLE_MEMORIES", "assert_integration", "sample_memory"]

#: What :func:`sample_memory` holds, as (memory id, text): two near-duplicate memories about
#: the same dinner (a diversifying reranker keeps one of them), and two others.
SAMPLE_MEMORIES = (
    ("dinner-1", "Dana's birthday dinner is on Friday at the Thai place"),
    ("dinner-2", "Dana's birthday dinner is Friday at the Thai place on Main Street"),
    ("standup", "Moved the weekly standup to 9:30"),
    ("cat", "Bob's cat only eats salmon-flavoured food"),
)


@contextlib.contextmanager
def sample_memory(path: str | os.PathLike[str]) -> Iterator[Memory]:
    """A ``rankseam.Memory`` at ``path`` holding :data:`SAMPLE_MEMORIES` (each with metadata
    ``{"source": "test"}``), closed when the block ends: what an adapter's tests search."""
    import rankseam

    with rankseam.open_memory(path) as memory:
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
