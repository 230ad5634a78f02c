"""Option helpers for component factories: refuse unknown option names, resolve ``$env``
references. Plugins reach these through :mod:`rankseam.plugin`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from rankseam.errors import ConfigurationError

__all__ = ["check_options", "resolve_env_refs"]


def check_options(where: str, options: Mapping[str, Any], known: Iterable[str]) -> None:
    """Refuse option names a component does not know (the one place this is worded).

    ``where`` names the component as users write it, e.g. ``"reranker 'mmr'"``.
    """
    allowed = sorted(known)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ConfigurationError(
            f"{where} has no option(s) {unknown}; known options are {allowed}"
            if allowed
            else f"{where} takes no options, got {unknown}; remove them"
        )


def resolve_env_refs(value: Any, *, what: str) -> Any:
    """Resolve ``{"$env": "NAME"}`` to the environment variable's value (None if unset)."""
    if isinstance(value, Mapping) and set(value) == {"$env"}:
        name = value["$env"]
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{what}: {{'$env': NAME}} needs a variable name")
        return os.environ.get(name)
    return value
