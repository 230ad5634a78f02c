"""The configuration: :class:`Config` and its :class:`SearchConfig`. Which one a Memory uses
(a file, the environment, keyword overrides) is :mod:`rankseam.resolve`; building components
from it is :mod:`rankseam.assembly`.

Configuration comes from code (:meth:`Config.from_mapping`, or a :class:`Config` built
directly), from a TOML file (``rankseam.toml``, :meth:`Config.from_toml`) and from environment
overrides (:meth:`Config.with_env`). A setting made in code wins over the environment, which wins
over the file, which wins over the defaults (docs/configuration.md, "Which switch wins").
Every mistake is a :class:`~rankseam.errors.ConfigurationError` at
assembly time, with a message that says how to fix it.

The ``rankseam.toml`` layout, every key with its default, is in docs/configuration.md.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from rankseam.checks import decimal_int, is_int, is_real
from rankseam.decision import DEFAULT_WRITE_GATE_TIMEOUT_S, WRITE_GATE_ROLE, Role
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.registry import TABLE_FOR_KIND
from rankseam.seam import (
    DEFAULT_MAX_CHARS,
    DEFAULT_POOL,
    DEFAULT_RERANK_DEADLINE_S,
    MAX_POOL,
    RerankerSpec,
    reranker_choice,
    reranker_specs,
    validate_deadline,
    validate_on_error,
    validate_pool_size,
)
from rankseam.search.fusion import DEFAULT_FUSION, FUSION_METHODS, SCALES
from rankseam.store.feedback import DEFAULT_FEEDBACK_CAP
from rankseam.store.target import redact
from rankseam.types import frozen_mapping

__all__ = [
    "DEFAULT_SOURCES",
    "ENV_SETTINGS",
    "FUSION_METHODS",
    "MAX_CONFIG_BYTES",
    "TABLE_FOR_KIND",
    "Config",
    "SearchConfig",
    "default_db_path",
]

DEFAULT_SOURCES = ("lexical", "vector", "importance", "context")

log = logging.getLogger("rankseam.config")


def _pool(_inst: object, _attr: object, value: int) -> None:
    try:
        validate_pool_size(value)
    except ValidationError as exc:
        raise ConfigurationError(f"search.pool: {exc}") from None


def _on_error(value: object) -> str:
    """The search's failure policy, either spelling, as ``"fail_closed"`` / ``"fail_open"``."""
    try:
        return validate_on_error(value)
    except ValidationError as exc:
        raise ConfigurationError(f"search.on_error: {exc}") from None


def _reranker(value: object) -> str | tuple[RerankerSpec, ...] | None:
    """``[search] reranker``: a name (``"a,b"`` names a chain), ``none``, or a list of stages
    (names, or tables of ``name``, ``options``, ``on_error``, ``deadline_s``: a chain)."""
    if not isinstance(value, list | tuple):
        return value  # type: ignore[return-value]  # a name or None: checked below
    try:
        return reranker_specs(value)
    except ValidationError as exc:
        raise ConfigurationError(f"search.reranker: {exc}") from None


def _deadline(value: object) -> float:
    try:
        return validate_deadline(value, "search.rerank_deadline_s")
    except ValidationError as exc:
        raise ConfigurationError(str(exc)) from None


def _fusion(_inst: object, _attr: object, value: str) -> None:
    if value == "weighted":
        raise ConfigurationError(
            "search.fusion 'weighted' is now called 'convex' (weights are normalised to sum 1); "
            "for the old weights add [search] weights = {lexical = 0.6, vector = 0.3, "
            "importance = 0.1}"
        )
    if value not in FUSION_METHODS:
        raise ConfigurationError(
            f"search.fusion must be one of {', '.join(repr(m) for m in FUSION_METHODS)}, "
            f"got {value!r}"
        )


def _scales(value: object) -> Mapping[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"search.scales must be a table of channel name -> scale, e.g. "
            f'{{vector = "max"}}, got {value!r}'
        )
    for name, scale in value.items():
        if scale not in SCALES:
            raise ConfigurationError(
                f"search.scales.{name} must be one of {', '.join(repr(s) for s in SCALES)}, "
                f"got {scale!r}"
            )
    return frozen_mapping(value)


def _positive_int(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not is_int(value) or value < 1:
        raise ConfigurationError(f"search.{attr.name} must be an integer >= 1, got {value!r}")


def _source_names(value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"search.sources must be a list of source names, e.g. ['lexical', 'vector'], "
            f"got {value!r}"
        )
    names = tuple(value)
    bad = [name for name in names if not isinstance(name, str) or not name]
    if bad:
        raise ConfigurationError(
            f"search.sources must hold source names (non-empty strings), got {bad!r} in "
            f"{list(names)!r}"
        )
    return names


def _weights(value: object) -> Mapping[str, float]:
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"search.weights must be a table of channel name -> weight, e.g. "
            f"{{lexical = 1.0, vector = 0.5}}, got {value!r}"
        )
    bad = {k: v for k, v in value.items() if not isinstance(k, str) or not is_real(v) or v < 0}
    if bad:
        raise ConfigurationError(f"search.weights maps channel names to numbers >= 0; fix {bad!r}")
    return frozen_mapping(value)


def _optional_name(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, tuple) and attr.name == "reranker":
        return  # a chain's stages, checked by _reranker
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigurationError(
            f"search.{attr.name} must be a component name (a string) or none, got {value!r}"
        )


def _bool(where: str) -> Any:
    def check(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, bool):
            raise ConfigurationError(f"{where}{attr.name} must be true or false, got {value!r}")

    return check


def _name(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{attr.name} must be a non-empty string, got {value!r}")


def _optional_str(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not isinstance(value, str):
        raise ConfigurationError(f"{attr.name} must be a string, got {value!r}")


_GATE_KEYS = ("backend", "enabled", "failure_policy", "timeout_s")
_GATE_POLICIES = ("fail_open", "fail_closed")  # the values of the failure policy enum


def _write_gate(value: object, source: str) -> dict[str, Any]:
    """``write_gate = true|false``, or a ``[write_gate]`` table of ``enabled``, ``backend``,
    ``timeout_s`` and ``failure_policy``; returns the :class:`Config` fields it sets."""
    if isinstance(value, bool):
        return {"write_gate": value}
    if not isinstance(value, Mapping):
        raise ConfigurationError(
            f"{source}: write_gate must be true, false or a table "
            f"(enabled = true, backend = 'NAME'), got {value!r}"
        )
    unknown = sorted(set(value) - set(_GATE_KEYS))
    if unknown:
        raise ConfigurationError(
            f"{source}: unknown [write_gate] key(s) {unknown}; known keys are {list(_GATE_KEYS)}"
        )
    enabled = value.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigurationError(
            f"{source}: write_gate.enabled must be true or false, got {enabled!r}"
        )
    backend = value.get("backend")
    if backend is not None and (not isinstance(backend, str) or not backend):
        raise ConfigurationError(
            f"{source}: write_gate.backend must be a decision backend name, got {backend!r}"
        )
    out: dict[str, Any] = {"write_gate": enabled, "write_gate_backend": backend}
    if "timeout_s" in value:
        out["write_gate_timeout_s"] = value["timeout_s"]
    if "failure_policy" in value:
        out["write_gate_failure_policy"] = value["failure_policy"]
    return out


def _gate_timeout(_inst: object, _attr: attrs.Attribute[Any], value: object) -> None:
    if not is_real(value) or not 0 < value <= 86400:  # type: ignore[operator]
        raise ConfigurationError(
            f"write_gate.timeout_s must be a number of seconds in (0, 86400], got {value!r}"
        )


def _gate_policy(_inst: object, _attr: attrs.Attribute[Any], value: object) -> None:
    if value not in _GATE_POLICIES:
        raise ConfigurationError(
            f"write_gate.failure_policy must be 'fail_open' (store with a degraded verdict) or "
            f"'fail_closed' (refuse the write), got {value!r}"
        )


#: Option names whose values are secrets: a configuration's ``repr`` shows ``***`` instead.
_SECRET_OPTION = re.compile(r"pass(word|wd)?|secret|token|api_?key|credential", re.IGNORECASE)


def _feedback(value: object, source: str) -> dict[str, Any]:
    """The ``[feedback]`` table: ``max_records``."""
    if not isinstance(value, Mapping) or set(value) - {"max_records"}:
        raise ConfigurationError(
            f"{source}: [feedback] must be a table whose one key is max_records, got {value!r}"
        )
    return {"feedback_max_records": value["max_records"]} if "max_records" in value else {}


def _feedback_cap(_inst: object, _attr: attrs.Attribute[Any], value: object) -> None:
    if not is_int(value) or not 1 <= value <= 10_000_000:
        raise ConfigurationError(
            "feedback.max_records must be a whole number of records in 1..10000000 (feedback "
            f"each namespace keeps), got {value!r}"
        )


def _masked(value: Any) -> Any:
    """``value`` (the components' option tables) with secret-looking string options masked."""
    if isinstance(value, Mapping):
        return {
            k: "***" if isinstance(v, str) and _SECRET_OPTION.search(str(k)) else _masked(v)
            for k, v in value.items()
        }
    return value


#: Largest configuration file read (a rankseam.toml is a few lines; this refuses a wrong path).
MAX_CONFIG_BYTES = 1 << 20


def _known_channels(
    inst: SearchConfig, attr: attrs.Attribute[Any], value: Mapping[str, Any]
) -> None:
    """``weights`` and ``scales`` name configured sources (a misspelt key is refused, never
    silently ignored)."""
    unknown = sorted(set(value) - set(inst.sources))
    if unknown:
        import difflib  # on first use: only a mistake needs suggestions

        named = []
        for name in unknown:
            close = difflib.get_close_matches(name, inst.sources, n=1)
            named.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigurationError(
            f"search.{attr.name} names {', '.join(named)}: not configured sources; the "
            f"sources are {list(inst.sources)}"
        )


def _settings(value: Iterable[str]) -> frozenset[str]:
    return frozenset(value)


@attrs.frozen
class SearchConfig:
    pool: int = attrs.field(default=DEFAULT_POOL, validator=_pool)
    fusion: str = attrs.field(default=DEFAULT_FUSION, validator=_fusion)
    weights: Mapping[str, float] = attrs.field(
        factory=dict, converter=_weights, validator=_known_channels
    )
    scales: Mapping[str, str] = attrs.field(
        factory=dict, converter=_scales, validator=_known_channels
    )
    sources: tuple[str, ...] = attrs.field(default=DEFAULT_SOURCES, converter=_source_names)
    reranker: str | tuple[RerankerSpec, ...] | None = attrs.field(
        default=None, converter=_reranker, validator=_optional_name
    )
    on_error: str = attrs.field(default="fail_closed", converter=_on_error)
    max_chars: int = attrs.field(default=DEFAULT_MAX_CHARS, validator=_positive_int)
    trace_text: bool = attrs.field(default=True, validator=_bool("search."))
    rerank_deadline_s: float = attrs.field(default=DEFAULT_RERANK_DEADLINE_S, converter=_deadline)
    #: memories derived from one source do not crowd the top (docs/store.md)
    distinct_sources: bool = attrs.field(default=True, validator=_bool("search."))


@attrs.frozen
class Config:
    """The whole assembly. ``components`` maps a table name (``rerankers``,
    ``decision_backends``, ...) to ``{component name: options}``."""

    db: str | None = attrs.field(
        default=None,
        validator=_optional_str,
        repr=lambda db: repr(None if db is None else redact(db)),
    )
    namespace: str = attrs.field(default="default", validator=_name)
    embedder: str = attrs.field(default="hashed", validator=_name)
    search: SearchConfig = attrs.field(factory=SearchConfig)
    components: Mapping[str, Mapping[str, Mapping[str, Any]]] = attrs.field(
        factory=dict, converter=frozen_mapping, repr=lambda value: repr(_masked(value))
    )
    write_gate: bool = attrs.field(default=False, validator=_bool(""))
    write_gate_backend: str | None = attrs.field(default=None, validator=_optional_str)
    #: What the environment changed that a user would not guess from the configuration
    #: (e.g. ``RANKSEAM_RERANK`` replacing the configured reranker); shown in search traces.
    notes: tuple[str, ...] = attrs.field(default=(), eq=False)
    write_gate_timeout_s: float = attrs.field(
        default=DEFAULT_WRITE_GATE_TIMEOUT_S, validator=_gate_timeout
    )
    write_gate_failure_policy: str = attrs.field(default="fail_open", validator=_gate_policy)
    #: ``[plugins.NAME]`` tables: settings of a plugin that is not a component (e.g.
    #: ``[plugins.mcp]`` for ``rankseam mcp``), kept as written; the plugin validates its own.
    plugins: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, converter=frozen_mapping)
    #: The environment-overridable settings (:data:`ENV_SETTINGS`) that code set: the
    #: environment never replaces them. :meth:`from_mapping` records the keys its mapping
    #: names, :meth:`from_toml` none; a :class:`Config` built directly, those whose values
    #: differ from the defaults.
    set_in_code: frozenset[str] = attrs.field(eq=False, repr=False, converter=_settings)
    #: ``[feedback] max_records``: feedback records each namespace keeps; a write past it
    #: drops the oldest (docs/store.md, "Feedback").
    feedback_max_records: int = attrs.field(default=DEFAULT_FEEDBACK_CAP, validator=_feedback_cap)

    @set_in_code.default
    def _values_that_differ_from_the_defaults(self) -> frozenset[str]:
        return frozenset(key for key in ENV_SETTINGS if _get(self, key) != _DEFAULTS[key])

    @property
    def write_gate_role(self) -> Role:
        """The write gate's role: its failure policy and timeout, as configured."""
        return Role(
            WRITE_GATE_ROLE.name,
            self.write_gate_failure_policy,  # Role converts it to the policy enum
            float(self.write_gate_timeout_s),
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "configuration") -> Config:
        """The configuration ``data`` (the ``rankseam.toml`` layout) sets, as code: the
        environment does not replace a setting it names (:meth:`with_env`)."""
        return cls._parse(data, source=source, in_code=True)

    @classmethod
    def _parse(cls, data: Mapping[str, Any], *, source: str, in_code: bool) -> Config:
        data = dict(data)
        known_top = {
            "db",
            "namespace",
            "embedder",
            "search",
            "write_gate",
            "plugins",
            "feedback",
            *TABLE_FOR_KIND.values(),
        }
        unknown = sorted(set(data) - known_top)
        if unknown:
            raise ConfigurationError(
                f"{source}: unknown key(s) {unknown}; known keys are {sorted(known_top)}"
            )
        search = data.get("search", {})
        if not isinstance(search, Mapping):
            raise ConfigurationError(f"{source}: [search] must be a table")
        known_search = {f.name for f in attrs.fields(SearchConfig)}
        bad = sorted(set(search) - known_search)
        if bad:
            raise ConfigurationError(
                f"{source}: unknown [search] key(s) {bad}; known keys are {sorted(known_search)}"
            )
        search = dict(search)
        if "reranker" in search:
            search["reranker"] = reranker_choice(search["reranker"])
        components: dict[str, Mapping[str, Mapping[str, Any]]] = {}
        for table in TABLE_FOR_KIND.values():
            value = data.get(table, {})
            if not isinstance(value, Mapping) or not all(
                isinstance(v, Mapping) for v in value.values()
            ):
                raise ConfigurationError(
                    f"{source}: [{table}] must hold one table per component, e.g. [{table}.NAME]"
                )
            components[table] = frozen_mapping({k: frozen_mapping(v) for k, v in value.items()})
        gate = _write_gate(data.get("write_gate", False), source)
        plugins = data.get("plugins", {})
        if not isinstance(plugins, Mapping) or not all(
            isinstance(v, Mapping) for v in plugins.values()
        ):
            raise ConfigurationError(
                f"{source}: [plugins] must hold one table per plugin, e.g. [plugins.mcp]"
            )
        named = frozenset({*data, *(f"search.{key}" for key in search)})
        try:
            return cls(
                db=data.get("db"),
                namespace=data.get("namespace", "default"),
                embedder=data.get("embedder", "hashed"),
                search=SearchConfig(**search),
                components=components,
                plugins={k: frozen_mapping(v) for k, v in plugins.items()},
                **gate,
                **_feedback(data.get("feedback", {}), source),
                set_in_code=named & ENV_SETTINGS if in_code else (),
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None
        except TypeError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Config:
        import tomllib  # on first use: without a configuration file it is never imported

        p = Path(path)
        try:
            if p.stat().st_size > MAX_CONFIG_BYTES:
                raise ConfigurationError(
                    f"config file {str(p)!r} is larger than {MAX_CONFIG_BYTES} bytes; a "
                    "rankseam.toml is a few lines: check the path"
                )
            data = tomllib.loads(p.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            raise ConfigurationError(f"config file {str(p)!r} does not exist") from None
        except UnicodeDecodeError as exc:
            raise ConfigurationError(
                f"config file {str(p)!r} is not UTF-8 text (byte {exc.start}: {exc.reason}); "
                "save it as UTF-8"
            ) from None
        except (tomllib.TOMLDecodeError, RecursionError) as exc:
            what = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            raise ConfigurationError(f"config file {str(p)!r} is not valid TOML: {what}") from None
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read config file {str(p)!r}: {exc.strerror or exc}; check the path"
            ) from None
        return cls._parse(data, source=str(p), in_code=False)

    def with_env(self, environ: Mapping[str, str] | None = None) -> Config:
        """Apply ``RANKSEAM_DB``, ``RANKSEAM_NAMESPACE``, ``RANKSEAM_EMBEDDER``,
        ``RANKSEAM_RERANK``, ``RANKSEAM_POOL`` and ``RANKSEAM_ON_ERROR`` to the settings code did
        not set (:attr:`set_in_code`): a file's value or a default is replaced, code's is not.
        A reranker a file configured that ``RANKSEAM_RERANK`` replaces is logged and noted."""
        env = os.environ if environ is None else environ
        given = {var: env[var] for var in _ENV_VARS if var in env}
        if kept := sorted(v for v in given if _ENV_VARS[v] in self.set_in_code):
            log.debug("code set what %s would set: kept", kept, extra={"event": "config.env"})
        given = {var: value for var, value in given.items() if var not in kept}
        out = self
        if given.get("RANKSEAM_DB"):
            out = attrs.evolve(out, db=given["RANKSEAM_DB"])
        if given.get("RANKSEAM_NAMESPACE"):
            out = attrs.evolve(out, namespace=given["RANKSEAM_NAMESPACE"])
        if given.get("RANKSEAM_EMBEDDER"):
            out = attrs.evolve(out, embedder=given["RANKSEAM_EMBEDDER"])
        search = out.search
        notes = out.notes
        if "RANKSEAM_RERANK" in given:
            value = given["RANKSEAM_RERANK"].strip()
            chosen = reranker_choice(value)
            if search.reranker is not None and chosen != search.reranker:
                note = (
                    f"RANKSEAM_RERANK={value!r} in the environment replaced the reranker "
                    f"{search.reranker!r} of the configuration file"
                    + (": reranking is off" if chosen is None else f" with {chosen!r}")
                    + "; unset RANKSEAM_RERANK to use the configured one"
                )
                log.warning(note, extra={"event": "config.env_override"})
                notes = (*notes, note)
            search = attrs.evolve(search, reranker=chosen)
        if given.get("RANKSEAM_POOL"):
            pool = decimal_int(given["RANKSEAM_POOL"])
            if pool is None or not 1 <= pool <= MAX_POOL:
                raise ConfigurationError(
                    f"RANKSEAM_POOL must be an integer in 1..{MAX_POOL} written in the digits "
                    f"0-9, got {given['RANKSEAM_POOL']!r}; set it to e.g. 30, or unset it"
                )
            search = attrs.evolve(search, pool=pool)
        if given.get("RANKSEAM_ON_ERROR"):
            search = attrs.evolve(search, on_error=given["RANKSEAM_ON_ERROR"])
        return attrs.evolve(out, search=search, notes=notes)

    def options(self, kind: str, name: str) -> Mapping[str, Any]:
        return self.components.get(TABLE_FOR_KIND[kind], {}).get(name, MappingProxyType({}))

    def with_options(self, kind: str, name: str, options: Mapping[str, Any]) -> Config:
        """A copy whose ``[table.name]`` options are updated with ``options``."""
        table = TABLE_FOR_KIND[kind]
        merged = {**self.options(kind, name), **options}
        tables = {k: dict(v) for k, v in self.components.items()}
        tables.setdefault(table, {})[name] = frozen_mapping(merged)
        return attrs.evolve(self, components={k: frozen_mapping(v) for k, v in tables.items()})


#: Environment variable -> the setting it replaces (when code did not set it).
_ENV_VARS = {
    "RANKSEAM_DB": "db",
    "RANKSEAM_NAMESPACE": "namespace",
    "RANKSEAM_EMBEDDER": "embedder",
    "RANKSEAM_RERANK": "search.reranker",
    "RANKSEAM_POOL": "search.pool",
    "RANKSEAM_ON_ERROR": "search.on_error",
}
#: The settings the environment can replace.
ENV_SETTINGS = frozenset(_ENV_VARS.values())


def _get(config: Config, key: str) -> Any:
    section, _, name = key.rpartition(".")
    return getattr(config.search if section else config, name)


_DEFAULTS = {key: _get(Config(set_in_code=()), key) for key in ENV_SETTINGS}


def default_db_path() -> Path:
    """The platform's per-user data location for the default store."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "rankseam" / "memory.sqlite3"
