"""Assembly: configuration -> components, and backends wrapped per role.

Configuration comes from code (:meth:`Config.from_mapping`), from a TOML file
(``rankseam.toml``, :meth:`Config.from_toml`) and from environment overrides
(:meth:`Config.with_env`). Every mistake is a :class:`~rankseam.errors.ConfigurationError` at
assembly time, with a message that says how to fix it.

Example ``rankseam.toml``::

    db = "~/.local/share/rankseam/memory.sqlite3"   # or a URL: "postgresql://host/db"
    namespace = "default"
    embedder = "hashed"

    [search]
    pool = 30               # coarse pool size, 1..200
    fusion = "convex"       # or "rrf"
    weights = { vector = 0.5 }  # override a channel's declared weight (convex, rrf)
    sources = ["lexical", "vector", "importance"]
    reranker = "mmr"        # none by default
    on_error = "raise"      # or "coarse" (visible "degraded" status)
    rerank_deadline_s = 90  # every reranker's deadline per search, seconds
    max_chars = 2000
    trace_text = true

    [rerankers.mmr]
    lambda = 0.7

    [rerankers.decision]
    backend = "heuristic"

    [decision_backends.openai]
    base_url = "http://127.0.0.1:8080/v1"
    model = "qwen2.5-7b-instruct"
    api_key = { "$env" = "OPENAI_API_KEY" }
"""

from __future__ import annotations

import difflib
import inspect
import logging
import os
import re
import sys
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from rankseam.checks import is_int, is_real
from rankseam.decision import (
    DEFAULT_WRITE_GATE_TIMEOUT_S,
    WRITE_GATE_ROLE,
    DecisionBackend,
    DecisionFailurePolicy,
    FailOpenDecisionBackend,
    Role,
)
from rankseam.embedding import Embedder, EmbedderDescriptor
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.generation import FailOpenGenerationBackend, GenerationBackend
from rankseam.plugins import get_registry
from rankseam.registry import TABLE_FOR_KIND, ComponentSpec, Registry
from rankseam.retrieval.base import CandidateSource
from rankseam.retrieval.fusion import DEFAULT_FUSION, FUSION_METHODS, SCALES
from rankseam.seam import (
    DEFAULT_MAX_CHARS,
    DEFAULT_POOL,
    DEFAULT_RERANK_DEADLINE_S,
    Reranker,
    as_async_reranker,
    reranker_choice,
    validate_deadline,
    validate_on_error,
    validate_pool_size,
)
from rankseam.store.contract import Store
from rankseam.store.target import StoreTarget, parse_target, redact
from rankseam.types import frozen_mapping

__all__ = [
    "TABLE_FOR_KIND",
    "Assembly",
    "ComponentContext",
    "Config",
    "SearchConfig",
    "assemble",
    "default_db_path",
    "open_store",
    "resolve_config",
    "select_store",
    "store_target",
]

_KIND_WORDS = {
    "store": "store",
    "candidate_source": "candidate source",
    "embedder": "embedder",
    "reranker": "reranker",
    "decision_backend": "decision backend",
    "generation_backend": "generation backend",
}

DEFAULT_SOURCES = ("lexical", "vector", "importance")

log = logging.getLogger("rankseam.compose")

#: The role of a generation consumer that names none: fail-open, the default of every role.
GENERATION_ROLE = Role("generation")


@attrs.frozen
class _Port:
    """What the role resolution needs to know about one backend port."""

    protocol: type
    method: str
    envelope: type[Any]


_PORTS = {
    "decision_backend": _Port(DecisionBackend, "evaluate", FailOpenDecisionBackend),
    "generation_backend": _Port(GenerationBackend, "generate", FailOpenGenerationBackend),
}


def _pool(_inst: object, _attr: object, value: int) -> None:
    try:
        validate_pool_size(value)
    except ValidationError as exc:
        raise ConfigurationError(f"search.pool: {exc}") from None


def _on_error(_inst: object, _attr: object, value: str) -> None:
    try:
        validate_on_error(value)
    except ValidationError as exc:
        raise ConfigurationError(f"search.on_error: {exc}") from None


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
        named = []
        for name in unknown:
            close = difflib.get_close_matches(name, inst.sources, n=1)
            named.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigurationError(
            f"search.{attr.name} names {', '.join(named)}: not configured sources; the "
            f"sources are {list(inst.sources)}"
        )


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
    reranker: str | None = attrs.field(default=None, validator=_optional_name)
    on_error: str = attrs.field(default="raise", validator=_on_error)
    max_chars: int = attrs.field(default=DEFAULT_MAX_CHARS, validator=_positive_int)
    trace_text: bool = attrs.field(default=True, validator=_bool("search."))
    rerank_deadline_s: float = attrs.field(default=DEFAULT_RERANK_DEADLINE_S, converter=_deadline)


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
        data = dict(data)
        known_top = {
            "db",
            "namespace",
            "embedder",
            "search",
            "write_gate",
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
        try:
            return cls(
                db=data.get("db"),
                namespace=data.get("namespace", "default"),
                embedder=data.get("embedder", "hashed"),
                search=SearchConfig(**search),
                components=components,
                **gate,
            )
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None
        except TypeError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Config:
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
        return cls.from_mapping(data, source=str(p))

    def with_env(self, environ: Mapping[str, str] | None = None) -> Config:
        """Apply ``RANKSEAM_DB``, ``RANKSEAM_NAMESPACE``, ``RANKSEAM_EMBEDDER``,
        ``RANKSEAM_RERANK``, ``RANKSEAM_POOL`` and ``RANKSEAM_ON_ERROR``."""
        env = os.environ if environ is None else environ
        out = self
        if env.get("RANKSEAM_DB"):
            out = attrs.evolve(out, db=env["RANKSEAM_DB"])
        if env.get("RANKSEAM_NAMESPACE"):
            out = attrs.evolve(out, namespace=env["RANKSEAM_NAMESPACE"])
        if env.get("RANKSEAM_EMBEDDER"):
            out = attrs.evolve(out, embedder=env["RANKSEAM_EMBEDDER"])
        search = out.search
        notes = out.notes
        if "RANKSEAM_RERANK" in env:
            value = env["RANKSEAM_RERANK"].strip()
            chosen = reranker_choice(value)
            if search.reranker is not None and chosen != search.reranker:
                note = (
                    f"RANKSEAM_RERANK={value!r} in the environment replaced the configured "
                    f"reranker {search.reranker!r}"
                    + (": reranking is off" if chosen is None else f" with {chosen!r}")
                    + "; unset RANKSEAM_RERANK to use the configured one"
                )
                log.warning(note, extra={"event": "config.env_override"})
                notes = (*notes, note)
            search = attrs.evolve(search, reranker=chosen)
        if env.get("RANKSEAM_POOL"):
            try:
                pool = int(env["RANKSEAM_POOL"])
            except ValueError:
                raise ConfigurationError(
                    f"RANKSEAM_POOL must be an integer in 1..200, got {env['RANKSEAM_POOL']!r}"
                ) from None
            search = attrs.evolve(search, pool=pool)
        if env.get("RANKSEAM_ON_ERROR"):
            search = attrs.evolve(search, on_error=env["RANKSEAM_ON_ERROR"])
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


class ComponentContext:
    """What component factories receive: the configuration, and access to other components.

    Backends are built once per name and shared; each role gets its handle through
    :meth:`decision_backend` / :meth:`generation_backend`, wrapped for the role's failure policy.
    """

    def __init__(
        self, config: Config, registry: Registry | None = None, store: str | None = None
    ) -> None:
        self.config = config
        self.registry = registry if registry is not None else get_registry()
        self._store = store
        self._instances: dict[tuple[str, str], Any] = {}

    @property
    def store(self) -> str:
        """The name of the store backend the assembly runs on: the one given, else the one
        the configuration's ``db`` selects (a plain path, or none: ``sqlite``)."""
        if self._store is None:
            self._store = select_store(store_target(self.config), self.registry).name
        return self._store

    def available(self, kind: str) -> list[str]:
        if kind == "candidate_source":
            return self.registry.names(kind, store=self.store)
        return self.registry.names(kind)

    def build(self, kind: str, name: str, options: Mapping[str, Any] | None = None) -> Any:
        """Instantiate component ``name`` of ``kind``; cached per name when options come from
        the configuration."""
        if kind == "store":
            raise ConfigurationError(
                f"a store is opened from its target (open_memory(target), --db), not built by "
                f"name; got build('store', {name!r})"
            )
        cache_key = (kind, name)
        if options is None and cache_key in self._instances:
            return self._instances[cache_key]
        store = self.store if kind == "candidate_source" else None
        spec = self.registry.get(kind, name, store=store)
        word = _KIND_WORDS[kind]
        if spec is None:
            have = ", ".join(self.available(kind)) or "none"
            elsewhere = sorted(
                str(s.store) for s in self.registry if s.kind == kind and s.name == name
            )
            if elsewhere:
                raise ConfigurationError(
                    f"{word} {name!r} runs on the store(s) {', '.join(elsewhere)} only; this "
                    f"memory's store is {store!r}, whose {word}s are: {have}"
                )
            raise ConfigurationError(
                f"no {word} named {name!r} is installed (available: {have}); install the plugin "
                "that provides it or choose another (`rankseam plugins --all` lists what is "
                "installed)"
            )
        opts = dict(self.config.options(kind, name) if options is None else options)
        try:
            component = spec.factory(spec.parse(opts), self)
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"{word} {name!r} (plugin {spec.plugin!r}) could not be built: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        if options is None:
            self._instances[cache_key] = component
        return component

    def reranker(self, name: str, options: Mapping[str, Any] | None = None) -> Any:
        reranker = self.build("reranker", name, options)
        try:
            return as_async_reranker(reranker)
        except TypeError as exc:
            raise ConfigurationError(
                f"reranker {name!r} does not implement the protocol: {exc}"
            ) from None

    def decision_backend(self, name: str | None, role: Role) -> DecisionBackend:
        """The decision backend ``name`` for ``role`` (see :meth:`backend_for_role`)."""
        return self.backend_for_role("decision_backend", name, role)  # type: ignore[no-any-return]

    def generation_backend(self, name: str | None, role: Role | None = None) -> GenerationBackend:
        """The generation backend ``name`` for ``role`` (see :meth:`backend_for_role`).
        ``None`` is :data:`GENERATION_ROLE`, fail-open like every role that declares nothing;
        the listwise reranker passes ``RERANK_ROLE`` (fail-closed)."""
        chosen = GENERATION_ROLE if role is None else role
        return self.backend_for_role("generation_backend", name, chosen)  # type: ignore[no-any-return]

    def backend_for_role(self, kind: str, name: str | None, role: Role) -> Any:
        """The one resolution function: backend ``name`` of ``kind`` (``"decision_backend"`` or
        ``"generation_backend"``) as ``role`` receives it.

        Fail-closed roles get the backend itself (the unwrapped handle: failures raise);
        fail-open roles get it inside the port's one fail-open envelope
        (:class:`~rankseam.decision.FailOpenDecisionBackend`,
        :class:`~rankseam.generation.FailOpenGenerationBackend`) with the role's name and
        timeout. One instance per name serves every role."""
        port = _PORTS.get(kind)
        if port is None:
            raise ValueError(f"backend_for_role serves {sorted(_PORTS)}, not {kind!r}")
        word = _KIND_WORDS[kind]
        if not isinstance(role, Role):
            raise ConfigurationError(
                f"the role asking for {word} {name!r} must be a rankseam Role, got {role!r}"
            )
        if not name:
            have = ", ".join(self.available(kind)) or "none"
            raise ConfigurationError(
                f"the {role.name} role needs a {word}; name one of the installed ones ({have}) "
                "in the options of the component that asks for it (the write gate: "
                "[write_gate] backend = 'NAME'; a reranker: its 'backend' option)"
            )
        backend = self.build(kind, name)
        if not isinstance(backend, port.protocol) or not inspect.iscoroutinefunction(
            getattr(backend, port.method, None)
        ):
            raise ConfigurationError(
                f"{word} {name!r} does not implement {port.protocol.__name__} "
                f"(a policy_id string and an async def {port.method}(request))"
            )
        bare = backend.delegate if isinstance(backend, port.envelope) else backend
        if role.failure_policy is DecisionFailurePolicy.FAIL_CLOSED:
            return bare
        return port.envelope(bare, role=role.name, timeout_s=role.timeout_s)

    def embedder(self, name: str) -> Embedder:
        """The embedder ``name``, checked against the Embedder protocol."""
        embedder = self.build("embedder", name)
        check_embedder(embedder, name)
        return embedder  # type: ignore[no-any-return]

    def search_reranker(
        self, choice: object, options: Mapping[str, Any] | None = None
    ) -> Reranker | None:
        """The reranker of one search: ``None`` (the coarse order), a registered name (with
        ``options`` over the configured ones), or a reranker object. ``"none"`` is ``None``
        (:func:`~rankseam.seam.reranker_choice`)."""
        choice = reranker_choice(choice)
        if choice is None:
            if options:
                raise ValidationError("reranker_options were given but no reranker is chosen")
            return None
        if isinstance(choice, str):
            if options:
                return self.reranker(choice, {**self.config.options("reranker", choice), **options})
            return self.reranker(choice)  # type: ignore[no-any-return]
        if options:
            raise ValidationError("reranker_options apply only to a reranker given by name")
        try:
            return as_async_reranker(choice)
        except TypeError as exc:
            raise ValidationError(
                f"reranker does not implement the Reranker protocol: {exc}"
            ) from None


def check_embedder(embedder: Any, name: str) -> None:
    """Refuse a component that is not an :class:`~rankseam.embedding.Embedder`."""
    if not isinstance(embedder, Embedder) or not isinstance(
        getattr(embedder, "descriptor", None), EmbedderDescriptor
    ):
        raise ConfigurationError(
            f"embedder {name!r} does not implement the Embedder protocol (a descriptor of type "
            "EmbedderDescriptor and embed(texts) -> float32 array); fix the plugin or choose "
            "another embedder"
        )


def store_target(config: Config, *, create: bool = True) -> StoreTarget:
    """The :class:`~rankseam.store.target.StoreTarget` of ``config.db`` (the platform default
    when unset)."""
    return parse_target(config.db or str(default_db_path()), create=create)


def select_store(target: StoreTarget, registry: Registry | None = None) -> ComponentSpec[Any]:
    """The registered store that opens ``target`` (by its URL scheme; a plain path is the
    embedded ``sqlite`` store); a :class:`ConfigurationError` naming the installed stores
    when none does."""
    registry = registry if registry is not None else get_registry()
    spec = registry.store_for_scheme(target.scheme)
    if spec is None:
        stores = [s for s in registry if s.kind == "store"]
        installed = "; ".join(
            f"{s.name} ({', '.join(f'{x}://' for x in s.schemes)}, plugin {s.plugin!r})"
            for s in stores
        )
        raise ConfigurationError(
            f"no installed store opens {target.scheme}:// targets ({target.redacted}); installed "
            f"stores: {installed or 'none'}. Install the store plugin for {target.scheme}:// "
            "(`rankseam plugins --all` lists what is installed), or give a plain path for the "
            "embedded SQLite store"
        )
    return spec


def open_store(parts: Assembly) -> Store:
    """Open the store of an assembly (its factory with the ``[stores.NAME]`` options). Every
    failure is a :class:`ConfigurationError` that names the target without its password."""
    spec, target = parts.store, parts.target
    options = dict(parts.config.options("store", spec.name))
    try:
        store = spec.factory(target, spec.parse(options), parts.context)
    except ConfigurationError as exc:
        raise ConfigurationError(target.scrub(str(exc))) from None
    except Exception as exc:
        raise ConfigurationError(
            f"store {spec.name!r} (plugin {spec.plugin!r}) could not open {target.redacted}: "
            f"{type(exc).__name__}: {target.scrub(str(exc))}"
        ) from None
    if not isinstance(store, Store):
        close = getattr(store, "close", None)
        if callable(close):
            close()
        raise ConfigurationError(
            f"store {spec.name!r} (plugin {spec.plugin!r}) returned {type(store).__name__}, "
            "which does not implement the Store protocol (docs/writing-plugins.md, 'Writing a "
            "store'); fix the plugin"
        )
    return store


def default_db_path() -> Path:
    """The platform's per-user data location for the default store."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "rankseam" / "memory.sqlite3"


_TOP_OVERRIDES = {
    "db",
    "namespace",
    "embedder",
    "write_gate",
    "write_gate_backend",
    "write_gate_timeout_s",
    "write_gate_failure_policy",
}
_SEARCH_OVERRIDES = {f.name for f in attrs.fields(SearchConfig)}


def _apply_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    unknown = sorted(set(overrides) - _TOP_OVERRIDES - _SEARCH_OVERRIDES)
    if unknown:
        raise ConfigurationError(
            f"open_memory() got unknown option(s) {unknown}; known options are "
            f"{sorted(_TOP_OVERRIDES | _SEARCH_OVERRIDES)}"
        )
    top: dict[str, Any] = {k: v for k, v in overrides.items() if k in _TOP_OVERRIDES}
    search = {k: v for k, v in overrides.items() if k in _SEARCH_OVERRIDES}
    if "reranker" in search:
        search["reranker"] = reranker_choice(search["reranker"])
    if "reranker" in search:  # the caller chose: whatever the environment said is moot
        top["notes"] = ()
    try:
        return attrs.evolve(config, search=attrs.evolve(config.search, **search), **top)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"open_memory(): {exc}") from None


def resolve_config(
    path: str | os.PathLike[str] | None,
    config: Config | Mapping[str, Any] | None,
    config_file: str | os.PathLike[str] | None,
    overrides: Mapping[str, Any],
) -> Config:
    """The configuration :func:`~rankseam.open_memory` assembles, its ``db`` resolved: ``path``,
    else the configuration's ``db``, else ``RANKSEAM_DB``, else :func:`default_db_path`.
    Environment overrides apply first, then keyword ``overrides``."""
    if config is not None and config_file is not None:
        raise ConfigurationError("pass either config= or config_file=, not both")
    if config_file is not None:
        base = Config.from_toml(config_file)
    elif isinstance(config, Config):
        base = config
    elif isinstance(config, Mapping):
        base = Config.from_mapping(config)
    elif config is None:
        base = Config()
    else:
        raise ConfigurationError(
            f"config must be a rankseam.compose.Config or a mapping, got {type(config).__name__}"
        )
    given_db = overrides.get("db") or base.db
    cfg = _apply_overrides(base.with_env(), {k: v for k, v in overrides.items() if k != "db"})
    if path is not None:
        db = os.fspath(path)
    elif given_db:
        db = str(given_db)
    elif os.environ.get("RANKSEAM_DB"):
        db = os.environ["RANKSEAM_DB"]
    else:
        db = str(default_db_path())
    if db != ":memory:" and parse_target(db).is_path:
        db = str(Path(db).expanduser())
    return attrs.evolve(cfg, db=db)


@attrs.frozen(eq=False)
class Assembly:
    """The components of one configuration, built and checked; ``store`` is the store backend
    that opens ``target`` (:func:`open_store` opens it)."""

    config: Config
    context: ComponentContext
    embedder: Embedder
    sources: tuple[tuple[str, CandidateSource], ...]
    gate: DecisionBackend | None
    store: ComponentSpec[Any]
    target: StoreTarget


def assemble(config: Config, registry: Registry | None = None, *, create: bool = True) -> Assembly:
    """Build every component ``config`` names; any mistake is a ConfigurationError here, not at
    the first search (the default reranker and the write gate's backend are built too). The
    store backend is chosen by the scheme of ``config.db``, and the candidate sources are
    those of that store (or sources that run on any store)."""
    registry = registry if registry is not None else get_registry()
    target = store_target(config, create=create)
    store = select_store(target, registry)
    context = ComponentContext(config, registry, store=store.name)
    embedder = context.embedder(config.embedder)
    sources = _build_sources(context, config.search.sources)
    if config.search.reranker is not None:
        context.reranker(config.search.reranker)
    gate = None
    if config.write_gate:
        gate = context.decision_backend(config.write_gate_backend, config.write_gate_role)
    return Assembly(config, context, embedder, sources, gate, store, target)


def _build_sources(
    context: ComponentContext, names: Iterable[str]
) -> tuple[tuple[str, CandidateSource], ...]:
    names = list(names)
    if len(set(names)) != len(names):
        raise ConfigurationError(f"search.sources lists a source twice: {names}")
    out = []
    for name in names:
        source = context.build("candidate_source", name)
        if not isinstance(source, CandidateSource):
            raise ConfigurationError(
                f"candidate source {name!r} does not implement the CandidateSource protocol "
                "(admits, needs_query_vector, candidates(request))"
            )
        out.append((name, source))
    if not any(src.admits for _n, src in out):
        raise ConfigurationError(
            f"search.sources {names} has no source that admits candidates; include 'lexical' "
            "or 'vector'"
        )
    return tuple(out)


#: The configuration file name looked for in the working directory and the user's config dir.
CONFIG_NAME = "rankseam.toml"


def user_config_dir() -> Path:
    """The platform's per-user configuration folder for rankseam."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "rankseam"
    if os.name == "nt":
        return Path(os.environ.get("APPDATA") or Path.home() / "AppData" / "Roaming") / "rankseam"
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "rankseam"


def find_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> Path | None:
    """The configuration file the ``rankseam`` command uses, first match wins:

    1. ``explicit`` (``--config FILE``), which must exist;
    2. ``RANKSEAM_CONFIG`` (a file that must exist; set it empty to use no file at all);
    3. ``./rankseam.toml`` in the working directory;
    4. ``rankseam.toml`` in the user's config folder (:func:`user_config_dir`:
       ``$XDG_CONFIG_HOME/rankseam`` or ``~/.config/rankseam`` on Linux,
       ``~/Library/Application Support/rankseam`` on macOS, ``%APPDATA%\\rankseam`` on Windows).

    ``None`` when none applies (the built-in defaults are used).
    """
    env = os.environ if environ is None else environ
    if explicit is not None:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigurationError(f"config file {str(path)!r} does not exist")
        return path
    if "RANKSEAM_CONFIG" in env:
        value = env["RANKSEAM_CONFIG"].strip()
        if not value:
            return None
        path = Path(value).expanduser()
        if not path.is_file():
            raise ConfigurationError(
                f"RANKSEAM_CONFIG names {value!r}, which is not a file; point it at a "
                "rankseam.toml, or set it empty to use no configuration file"
            )
        return path
    local = Path(cwd or Path.cwd()) / CONFIG_NAME
    if local.is_file():
        return local
    user = user_config_dir() / CONFIG_NAME
    return user if user.is_file() else None
