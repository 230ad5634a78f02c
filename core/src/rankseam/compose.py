"""The names ``rankseam.compose`` has always offered, kept for code that imports them: the
configuration lives in :mod:`rankseam.config` (which one is used: :mod:`rankseam.resolve`),
assembly in :mod:`rankseam.assembly`."""

from __future__ import annotations

from rankseam.assembly import (
    GENERATION_ROLE,
    Assembly,
    ComponentContext,
    assemble,
    check_embedder,
    open_store,
    select_store,
    store_target,
)
from rankseam.config import (
    DEFAULT_SOURCES,
    FUSION_METHODS,
    MAX_CONFIG_BYTES,
    TABLE_FOR_KIND,
    Config,
    SearchConfig,
    default_db_path,
)
from rankseam.resolve import CONFIG_NAME, find_config, resolve_config, user_config_dir

__all__ = [
    "CONFIG_NAME",
    "DEFAULT_SOURCES",
    "FUSION_METHODS",
    "GENERATION_ROLE",
    "MAX_CONFIG_BYTES",
    "TABLE_FOR_KIND",
    "Assembly",
    "ComponentContext",
    "Config",
    "SearchConfig",
    "assemble",
    "check_embedder",
    "default_db_path",
    "find_config",
    "open_store",
    "resolve_config",
    "select_store",
    "store_target",
    "user_config_dir",
]
