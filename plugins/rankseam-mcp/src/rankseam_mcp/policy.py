"""What ``rankseam mcp`` lets its clients choose: the ``[plugins.mcp]`` table of ``rankseam.toml``.

The calling model may pick a reranker and pass options only where the operator allows it::

    [plugins.mcp]
    rerankers = ["none", "mmr"]        # names the `search` tool may choose (the default)
    options = { mmr = ["lambda"] }     # options it may pass per reranker (the default)
    max_message_bytes = 4194304        # the longest request line read (the default, 4 MiB)
    tool_prefix = "memory_"            # tool names: memory_search, memory_add, ... (the default)
    destructive_tools = []             # hard deletes offered: "forget", "reset" (the default: none)

By default no model-backed reranker (``decision``, ``listwise``, ``rerankers``, anything that
calls a backend) and no backend option can be chosen by a client: the configured default
reranker still runs when the client names none. Nor is a hard delete offered: the
``memory_forget`` and ``memory_reset`` tools are served only when ``destructive_tools`` names
them (``memory_delete``, a tombstone that keeps every revision readable, always is).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from rankseam.errors import ConfigurationError

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "DEFAULT_TOOL_PREFIX",
    "DESTRUCTIVE_TOOLS",
    "ToolPolicy",
    "check_tool_prefix",
]

#: The longest request line the server reads (a memory text holds at most 1,000,000
#: characters: up to 4 MB as UTF-8; raise it for clients that escape non-ASCII text).
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
_MIN_MESSAGE_BYTES = 64 * 1024
_KEYS = ("rerankers", "options", "max_message_bytes", "tool_prefix", "destructive_tools")
#: The tools that hard-delete, served only when ``destructive_tools`` names them.
DESTRUCTIVE_TOOLS = ("forget", "reset")

#: What the tools' names start with: ``memory_search``, ``memory_add``, ... (``""`` gives the
#: bare names of rankseam-mcp 0.1: ``search``, ``add``, ...).
DEFAULT_TOOL_PREFIX = "memory_"
# MCP tool names are 1..128 characters of A-Z a-z 0-9 _ - . ; the longest base name is 6.
_PREFIX = re.compile(r"[A-Za-z0-9_.-]{0,64}")


def check_tool_prefix(prefix: object, where: str = "[plugins.mcp] tool_prefix") -> str:
    """``prefix`` when it can start an MCP tool name; a :class:`ConfigurationError` otherwise."""
    if not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None:
        raise ConfigurationError(
            f"{where} must be at most 64 characters of letters, digits, '_', '-' and '.' "
            f'(e.g. "memory_", or "" for the bare names), got {prefix!r}'
        )
    return prefix


def _names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ConfigurationError(f'{where} must be a list of names, e.g. ["none", "mmr"]')
    if not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigurationError(f"{where} must hold non-empty names, got {list(value)!r}")
    return tuple(dict.fromkeys(v.strip() for v in value))


def _options(value: Any) -> Mapping[str, tuple[str, ...]]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            "[plugins.mcp] options must be a table of option-name lists, e.g. "
            'options = { mmr = ["lambda"] }'
        )
    return {str(k): _names(v, f"[plugins.mcp] options.{k}") for k, v in value.items()}


@attrs.frozen
class ToolPolicy:
    """The rerankers (``"none"`` is the coarse order) and the options per reranker that the
    ``search`` tool accepts, the longest request line the server reads, the tools' name
    prefix, and the hard-delete tools served (``destructive_tools``: none by default)."""

    rerankers: tuple[str, ...] = ("none", "mmr")
    options: Mapping[str, tuple[str, ...]] = attrs.field(factory=lambda: {"mmr": ("lambda",)})
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    tool_prefix: str = DEFAULT_TOOL_PREFIX
    destructive_tools: tuple[str, ...] = ()

    def __attrs_post_init__(self) -> None:
        check_tool_prefix(self.tool_prefix)
        unknown = sorted(set(self.destructive_tools) - set(DESTRUCTIVE_TOOLS))
        if unknown:
            raise ConfigurationError(
                f"[plugins.mcp] destructive_tools names {unknown}; it may name "
                f"{list(DESTRUCTIVE_TOOLS)} (the hard deletes), e.g. destructive_tools = "
                '["forget"]'
            )
        stray = sorted(set(self.options) - set(self.rerankers))
        if stray:
            raise ConfigurationError(
                f"[plugins.mcp] options names {stray}, which rerankers does not list "
                f"({list(self.rerankers)}): add them to rerankers or remove their options"
            )
        size = self.max_message_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < _MIN_MESSAGE_BYTES:
            raise ConfigurationError(
                f"[plugins.mcp] max_message_bytes must be an integer of at least "
                f"{_MIN_MESSAGE_BYTES}, got {size!r}"
            )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ToolPolicy:
        """The policy of a ``[plugins.mcp]`` table (missing keys keep their defaults)."""
        unknown = sorted(set(data) - set(_KEYS))
        if unknown:
            raise ConfigurationError(
                f"unknown [plugins.mcp] key(s) {unknown}; known keys are {list(_KEYS)}"
            )
        kwargs: dict[str, Any] = {}
        if "rerankers" in data:
            kwargs["rerankers"] = _names(data["rerankers"], "[plugins.mcp] rerankers")
        if "options" in data:
            kwargs["options"] = _options(data["options"])
        elif "rerankers" in data:  # a new list: only its own rerankers keep default options
            kwargs["options"] = {k: v for k, v in cls().options.items() if k in kwargs["rerankers"]}
        if "max_message_bytes" in data:
            kwargs["max_message_bytes"] = data["max_message_bytes"]
        if "tool_prefix" in data:
            kwargs["tool_prefix"] = data["tool_prefix"]
        if "destructive_tools" in data:
            value = data["destructive_tools"]
            if isinstance(value, list | tuple) and not value:
                kwargs["destructive_tools"] = ()
            else:
                kwargs["destructive_tools"] = _names(value, "[plugins.mcp] destructive_tools")
        return cls(**kwargs)

    def check(
        self, reranker: str | None, options: Mapping[str, Any] | None, default: object
    ) -> None:
        """Refuse (``ValueError``, in plain words) a reranker or an option this policy does
        not allow. ``reranker`` None means the configured ``default``, which always runs (a
        configured chain is named by its stages' names joined with commas)."""
        name = _default_name(default) if reranker is None else (reranker.strip() or "none")
        if reranker is not None and name not in self.rerankers:
            allowed = ", ".join(repr(r) for r in self.rerankers) or "none"
            raise ValueError(
                f"this server does not let clients choose the reranker {reranker!r}; allowed: "
                f"{allowed} (omit `reranker` to use the configured default). The operator "
                "allows more in rankseam.toml under [plugins.mcp] rerankers"
            )
        if not options:
            return
        allowed_options = self.options.get(name or "none", ())
        refused = sorted(set(options) - set(allowed_options))
        if refused:
            which = f"the reranker {name!r}" if name else "the coarse order (no reranker)"
            raise ValueError(
                f"this server does not let clients set the option(s) {refused} of {which}; "
                f"allowed: {list(allowed_options)}. The operator allows more in rankseam.toml "
                "under [plugins.mcp] options"
            )


def _default_name(default: object) -> str | None:
    """The configured default reranker as the policy names it: its name, or a chain's stage
    names joined with commas (``"decision,mmr"``)."""
    if default is None or isinstance(default, str):
        return default
    if isinstance(default, list | tuple):
        return ",".join(str(getattr(stage, "name", stage)) for stage in default)
    return str(default)
