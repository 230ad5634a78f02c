"""Assembly: a :class:`~rankseam.config.Config` -> built and checked components, and
backends wrapped per role.

:func:`assemble` builds everything a configuration names (every mistake is a
:class:`~rankseam.errors.ConfigurationError` at open time, not at the first search);
:class:`ComponentContext` is what component factories receive: the configuration, and access
to other components, each backend handed to a role wrapped for the role's failure policy.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from rankseam.config import DEFAULT_SOURCES, Config, default_db_path
from rankseam.decision import (
    DecisionBackend,
    FailOpenDecisionBackend,
    Role,
    wrap_for_role,
)
from rankseam.embedding import Embedder, EmbedderDescriptor
from rankseam.errors import ConfigurationError
from rankseam.generation import FailOpenGenerationBackend, GenerationBackend
from rankseam.plugins import get_registry
from rankseam.registry import TABLE_FOR_KIND, ComponentSpec, Registry
from rankseam.seam import check_reranker, reranker_specs
from rankseam.search.channels.base import CONTEXT, CandidateSource, channel_reads, channel_stage
from rankseam.store.contract import Store, StoreReader
from rankseam.store.target import StoreTarget, parse_target

__all__ = [
    "GENERATION_ROLE",
    "Assembly",
    "ComponentContext",
    "assemble",
    "check_embedder",
    "open_store",
    "select_store",
    "store_channels",
    "store_target",
]

log = logging.getLogger("rankseam.assembly")

_KIND_WORDS = {
    "store": "store",
    "candidate_source": "candidate source",
    "embedder": "embedder",
    "reranker": "reranker",
    "decision_backend": "decision backend",
    "generation_backend": "generation backend",
}


#: The role of a generation consumer that names none: fail-open with the default timeout
#: (:data:`~rankseam.decision.DEFAULT_ROLE_TIMEOUT_S`), the defaults of every role.
GENERATION_ROLE = Role("generation")

#: The component whose factory is running, ``(kind, name)``: a backend it asks for without
#: naming one is reported against it, with the switches that name one.
_BUILDING: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "rankseam_building", default=None
)


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
        building = _BUILDING.set((kind, name))
        try:
            component = spec.factory(spec.parse(opts), self)
        except ConfigurationError:
            raise
        except Exception as exc:
            raise ConfigurationError(
                f"{word} {name!r} (plugin {spec.plugin!r}) could not be built: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        finally:
            _BUILDING.reset(building)
        if options is None:
            self._instances[cache_key] = component
        return component

    def reranker(self, name: str, options: Mapping[str, Any] | None = None) -> Any:
        """The reranker ``name`` (``options`` replace its configured ones), checked against
        the Reranker protocol; the component itself (the seam makes it ready where a search
        resolves it: :func:`~rankseam.seam.prepare_reranker`)."""
        reranker = self.build("reranker", name, options)
        try:
            check_reranker(reranker)
        except TypeError as exc:
            raise ConfigurationError(
                f"reranker {name!r} does not implement the protocol: {exc}"
            ) from None
        return reranker

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
        """Backend ``name`` of ``kind`` (``"decision_backend"`` or ``"generation_backend"``)
        built once, checked, and resolved for ``role`` by the one role resolution,
        :func:`rankseam.decision.wrap_for_role`: fail-closed roles get the backend itself (the
        unwrapped handle: failures raise); fail-open roles get it inside the port's one
        fail-open envelope (:class:`~rankseam.decision.FailOpenDecisionBackend`,
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
            asker = _BUILDING.get()
            if asker is not None:
                raise ConfigurationError(_unnamed_backend(asker, word, role, self.available(kind)))
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
        return wrap_for_role(backend, role, port.envelope)

    def embedder(self, name: str) -> Embedder:
        """The embedder ``name``, checked against the Embedder protocol."""
        embedder = self.build("embedder", name)
        check_embedder(embedder, name)
        return embedder  # type: ignore[no-any-return]


def _unnamed_backend(asker: tuple[str, str], word: str, role: Role, have: list[str]) -> str:
    """The message for component ``asker`` that asked for a backend without naming one: every
    switch that names it (for a reranker: the ``search`` command line first)."""
    kind, name = asker
    example = have[0] if have else "NAME"
    ways = [f"[{TABLE_FOR_KIND[kind]}.{name}] backend = {example!r} in rankseam.toml"]
    if kind == "reranker":
        ways = [
            f"`rankseam search --rerank {name} --{name}-backend {example}`",
            *ways,
            f"search(..., reranker={name!r}, reranker_options={{'backend': {example!r}}}) in "
            "Python",
        ]
    return (
        f"{_KIND_WORDS[kind]} {name!r} needs a {word} for the {role.name} role: set its "
        f"'backend' option to one of the installed ones ({', '.join(have) or 'none'}), e.g. "
        f"{'; '.join(ways)}"
    )


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


def store_channels(store: Store, parts: Assembly) -> tuple[tuple[str, CandidateSource], ...]:
    """The channels of ``parts`` that run on ``store``. Each reader capability a channel
    declares (``CandidateSource.reads``) outside the whole read contract (which every store's
    reader has) is checked against the class the store declares for its snapshots
    (``reader_type``), or else on one read snapshot of the store. A channel the user named in
    ``search.sources`` that the store cannot serve is refused, naming both, so the mistake
    shows at open time rather than at the first search; one that is there only by default
    (the default sources) is left out, with a log record."""
    wanted = [
        (name, protocol)
        for name, source in parts.sources
        for protocol in channel_reads(source)
        if protocol not in _EVERY_READER
    ]
    if not wanted:
        return parts.sources
    lacking: dict[str, type] = {}
    declared = getattr(store, "reader_type", None)
    if isinstance(declared, type):  # the store says what its snapshots are: no transaction
        for name, protocol in wanted:
            if not issubclass(declared, protocol):
                lacking.setdefault(name, protocol)
    else:
        with store.read() as reader:
            for name, protocol in wanted:
                if not isinstance(reader, protocol):
                    lacking.setdefault(name, protocol)
    if not lacking:
        return parts.sources
    named = parts.config.search.sources != DEFAULT_SOURCES
    for name, protocol in lacking.items():
        channel = parts.context.registry.get("candidate_source", name, store=parts.store.name)
        owner = f" (plugin {channel.plugin!r})" if channel is not None else ""
        why = (
            f"channel {name!r}{owner} reads the store through {protocol.__name__}, which "
            f"store {parts.store.name!r} (plugin {parts.store.plugin!r}) does not offer"
        )
        if named:
            raise ConfigurationError(
                f"{why}; remove {name!r} from search.sources, or use a store that implements "
                f"{protocol.__name__} (docs/writing-plugins.md, 'Reader capabilities')"
            )
        log.info("%s: left out of the default channels", why, extra={"channel": name})
    return tuple((name, source) for name, source in parts.sources if name not in lacking)


#: The reader protocols of the whole read contract: every store's snapshot implements them.
_EVERY_READER = frozenset(StoreReader.__mro__)


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
    for stage in reranker_specs(config.search.reranker) or ():  # one, or a chain's stages
        if isinstance(stage.reranker, str):
            merged = {**config.options("reranker", stage.reranker), **stage.options}
            context.reranker(stage.reranker, merged)
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
        try:
            channel_reads(source)
            channel_stage(source)
        except TypeError as exc:
            raise ConfigurationError(f"candidate source {name!r}: {exc}; fix the plugin") from None
        out.append((name, source))
    if not any(src.admits and channel_stage(src) != CONTEXT for _n, src in out):
        raise ConfigurationError(
            f"search.sources {names} has no source that admits candidates; include 'lexical' "
            "or 'vector'"
        )
    return tuple(out)
