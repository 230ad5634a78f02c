"""Assembly: configuration -> components, and backends wrapped per role.

Configuration comes from code (:meth:`Config.from_mapping`), from a TOML file
(``rankseam.toml``, :meth:`Config.from_toml`) and from environment overrides
(:meth:`Config.with_env`). Every mistake is a :class:`~rankseam.errors.ConfigurationError` at
assembly time, with a message that says how to fix it.

Example ``rankseam.toml``::

    db = "~/.local/share/rankseam/memory.sqlite3"
    namespace = "default"
    embedder = "hashed"

    [search]
    pool = 30               # coarse pool size, 1..200
    fusion = "convex"       # or "rrf"
    weights = { vector = 0.5 }  # override a channel's declared weight (convex, rrf)
    sources = ["lexical", "vector", "importance"]
    reranker = "mmr"        # none by default
    on_error = "raise"      # or "coarse" (visible "degraded" status)
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

import inspect
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from rankseam.checks import is_int
from rankseam.decision import DecisionBackend, Role, wrap_for_role
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.generation import GenerationBackend
from rankseam.plugins import get_registry
from rankseam.registry import Registry
from rankseam.seam import (
    DEFAULT_MAX_CHARS,
    DEFAULT_POOL,
    as_async_reranker,
    validate_on_error,
    validate_pool_size,
)

__all__ = [
    "TABLE_FOR_KIND",
    "ComponentContext",
    "Config",
    "SearchConfig",
    "check_options",
    "resolve_env_refs",
]

#: The configuration table that holds each component kind's options.
TABLE_FOR_KIND = {
    "candidate_source": "sources",
    "embedder": "embedders",
    "reranker": "rerankers",
    "decision_backend": "decision_backends",
    "generation_backend": "generation_backends",
}
_KIND_WORDS = {
    "candidate_source": "candidate source",
    "embedder": "embedder",
    "reranker": "reranker",
    "decision_backend": "decision backend",
    "generation_backend": "generation backend",
}

DEFAULT_SOURCES = ("lexical", "vector", "importance")


def _freeze(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType({k: v for k, v in (value or {}).items()})


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


#: Fusion methods (kept equal to ``rankseam.retrieval.fusion.FUSION_METHODS`` by a test).
FUSION_METHODS = ("convex", "rrf")


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


#: Scales a configuration may give a channel (``rankseam.retrieval.fusion.SCALES``).
SCALES = ("max", "unit", "minmax")


def _scales(_inst: object, _attr: object, value: Mapping[str, Any]) -> None:
    for name, scale in value.items():
        if scale not in SCALES:
            raise ConfigurationError(
                f"search.scales.{name} must be one of {', '.join(repr(s) for s in SCALES)}, "
                f"got {scale!r}"
            )


def _weights(_inst: object, _attr: object, value: Mapping[str, Any]) -> None:
    for name, weight in value.items():
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight >= 0:
            raise ConfigurationError(f"search.weights.{name} must be a number >= 0, got {weight!r}")


def _positive_int(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if not is_int(value) or value < 1:
        raise ConfigurationError(f"search.{attr.name} must be an integer >= 1, got {value!r}")


@attrs.frozen
class SearchConfig:
    pool: int = attrs.field(default=DEFAULT_POOL, validator=_pool)
    fusion: str = attrs.field(default="convex", validator=_fusion)
    weights: Mapping[str, float] = attrs.field(factory=dict, converter=_freeze, validator=_weights)
    scales: Mapping[str, str] = attrs.field(factory=dict, converter=_freeze, validator=_scales)
    sources: tuple[str, ...] = attrs.field(default=DEFAULT_SOURCES, converter=tuple)
    reranker: str | None = None
    on_error: str = attrs.field(default="raise", validator=_on_error)
    max_chars: int = attrs.field(default=DEFAULT_MAX_CHARS, validator=_positive_int)
    trace_text: bool = True


@attrs.frozen
class Config:
    """The whole assembly. ``components`` maps a table name (``rerankers``,
    ``decision_backends``, ...) to ``{component name: options}``."""

    db: str | None = None
    namespace: str = "default"
    embedder: str = "hashed"
    search: SearchConfig = attrs.field(factory=SearchConfig)
    components: Mapping[str, Mapping[str, Mapping[str, Any]]] = attrs.field(
        factory=dict, converter=_freeze
    )
    write_gate: bool = False
    write_gate_backend: str | None = None

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
        reranker = search.get("reranker")
        search = dict(search)
        if reranker in ("none", ""):
            search["reranker"] = None
        components: dict[str, Mapping[str, Mapping[str, Any]]] = {}
        for table in TABLE_FOR_KIND.values():
            value = data.get(table, {})
            if not isinstance(value, Mapping) or not all(
                isinstance(v, Mapping) for v in value.values()
            ):
                raise ConfigurationError(
                    f"{source}: [{table}] must hold one table per component, e.g. [{table}.NAME]"
                )
            components[table] = _freeze({k: _freeze(v) for k, v in value.items()})
        gate = data.get("write_gate", False)
        gate_backend = None
        if isinstance(gate, Mapping):
            gate_backend = gate.get("backend")
            gate = bool(gate.get("enabled", True))
        try:
            return cls(
                db=data.get("db"),
                namespace=data.get("namespace", "default"),
                embedder=data.get("embedder", "hashed"),
                search=SearchConfig(**search),
                components=components,
                write_gate=bool(gate),
                write_gate_backend=gate_backend,
            )
        except TypeError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> Config:
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigurationError(f"config file {str(p)!r} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(f"config file {str(p)!r} is not valid TOML: {exc}") from None
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
        if "RANKSEAM_RERANK" in env:
            value = env["RANKSEAM_RERANK"].strip()
            search = attrs.evolve(search, reranker=None if value in ("", "none") else value)
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
        return attrs.evolve(out, search=search)

    def options(self, kind: str, name: str) -> Mapping[str, Any]:
        return self.components.get(TABLE_FOR_KIND[kind], {}).get(name, MappingProxyType({}))

    def with_options(self, kind: str, name: str, options: Mapping[str, Any]) -> Config:
        """A copy whose ``[table.name]`` options are updated with ``options``."""
        table = TABLE_FOR_KIND[kind]
        merged = {**self.options(kind, name), **options}
        tables = {k: dict(v) for k, v in self.components.items()}
        tables.setdefault(table, {})[name] = _freeze(merged)
        return attrs.evolve(self, components={k: _freeze(v) for k, v in tables.items()})


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


class ComponentContext:
    """What component factories receive: the configuration, and access to other components.

    Backends are built once per name and shared; each role gets its handle through
    :meth:`decision_backend` / :meth:`generation_backend`, wrapped for the role's failure policy.
    """

    def __init__(self, config: Config, registry: Registry | None = None) -> None:
        self.config = config
        self.registry = registry if registry is not None else get_registry()
        self._instances: dict[tuple[str, str], Any] = {}

    def available(self, kind: str) -> list[str]:
        return self.registry.names(kind)

    def build(self, kind: str, name: str, options: Mapping[str, Any] | None = None) -> Any:
        """Instantiate component ``name`` of ``kind``; cached per name when options come from
        the configuration."""
        cache_key = (kind, name)
        if options is None and cache_key in self._instances:
            return self._instances[cache_key]
        spec = self.registry.get(kind, name)
        word = _KIND_WORDS[kind]
        if spec is None:
            have = ", ".join(self.available(kind)) or "none"
            raise ConfigurationError(
                f"no {word} named {name!r} is installed (available: {have}); install the plugin "
                "that provides it or choose another (`rankseam plugins --all` lists what is "
                "installed)"
            )
        opts = dict(self.config.options(kind, name) if options is None else options)
        try:
            component = spec.factory(opts, self)
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
        """The backend ``name`` for ``role``: unwrapped for fail-closed roles, inside the
        fail-open envelope for fail-open roles. One instance per name serves every role."""
        if not name:
            have = ", ".join(self.available("decision_backend")) or "none"
            raise ConfigurationError(
                f"the {role.name} role needs a decision backend; choose one (available: {have}), "
                "e.g. --decision-backend heuristic or [rerankers.decision] backend = 'heuristic'"
            )
        backend = self.build("decision_backend", name)
        if not isinstance(backend, DecisionBackend) or not inspect.iscoroutinefunction(
            backend.evaluate
        ):
            raise ConfigurationError(
                f"decision backend {name!r} does not implement DecisionBackend "
                "(a policy_id string and an async def evaluate(request))"
            )
        return wrap_for_role(backend, role)

    def generation_backend(self, name: str | None, role: Role | None = None) -> GenerationBackend:
        """The generation backend ``name`` (generation roles fail closed: the unwrapped handle)."""
        role_name = role.name if role else "generation"
        if not name:
            have = ", ".join(self.available("generation_backend")) or "none"
            raise ConfigurationError(
                f"the {role_name} role needs a generation backend; choose one (available: {have}), "
                "e.g. --listwise-backend local or [rerankers.listwise] backend = 'local'"
            )
        backend = self.build("generation_backend", name)
        if not isinstance(backend, GenerationBackend) or not inspect.iscoroutinefunction(
            backend.generate
        ):
            raise ConfigurationError(
                f"generation backend {name!r} does not implement GenerationBackend "
                "(a policy_id string and an async def generate(request))"
            )
        return backend
