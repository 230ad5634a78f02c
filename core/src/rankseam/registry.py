"""Typed register objects: what hooks receive, and the record of who owns each component."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

import attrs

from rankseam.errors import PluginError
from rankseam.options import OptionInfo, check_options, describe_options, option_keys, parse_options

__all__ = [
    "TABLE_FOR_KIND",
    "CandidateSourceRegister",
    "ComponentRegister",
    "ComponentSpec",
    "DecisionBackendRegister",
    "EmbedderRegister",
    "FactoryContext",
    "GenerationBackendRegister",
    "Registry",
    "RerankerRegister",
    "StoreRegister",
]

T = TypeVar("T")


class AssemblyConfig(Protocol):
    """The part of the configuration a component factory may read."""

    @property
    def embedder(self) -> str:
        """The name of the configured embedder."""
        ...

    def options(self, kind: str, name: str) -> Mapping[str, Any]:
        """The options table of component ``name`` of ``kind`` (e.g. ``"reranker"``)."""
        ...


class FactoryContext(Protocol):
    """What a component factory receives besides its options: the assembly it is part of.

    ``build(kind, name)`` builds (once per name) another component, e.g. the configured
    embedder; ``decision_backend(name, role)`` and ``generation_backend(name, role)`` hand out
    a backend wrapped for the role's failure policy. Each raises
    :class:`~rankseam.errors.ConfigurationError` with a fix when the component is missing.
    """

    @property
    def config(self) -> AssemblyConfig: ...

    def available(self, kind: str) -> list[str]: ...

    def build(self, kind: str, name: str, options: Mapping[str, Any] | None = None) -> Any: ...

    def decision_backend(self, name: str | None, role: Any) -> Any: ...

    def generation_backend(self, name: str | None, role: Any = None) -> Any: ...


#: A component factory: ``factory(options, context) -> component``. ``options`` is an
#: instance of the options class the component registered, built and checked from its table
#: in the configuration (a plain mapping when it registered no class); ``context`` is a
#: :class:`FactoryContext`. (A store's factory is ``factory(target, options, context)``,
#: see :class:`StoreRegister`.)
Factory = Callable[[Any, FactoryContext], T]

_KINDS = (
    "store",
    "candidate_source",
    "embedder",
    "reranker",
    "decision_backend",
    "generation_backend",
)

#: The configuration table that holds each component kind's options (``[rerankers.mmr]``).
TABLE_FOR_KIND = {
    "store": "stores",
    "candidate_source": "sources",
    "embedder": "embedders",
    "reranker": "rerankers",
    "decision_backend": "decision_backends",
    "generation_backend": "generation_backends",
}

#: A URL scheme: a letter, then letters, digits, ``+``, ``-`` or ``.`` (RFC 3986), lower-case.
_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]+$")


@attrs.frozen
class ComponentSpec(Generic[T]):
    """A registered component: its kind, name, factory and owning plugin; ``options`` are the
    option names its factory accepts (``None``: the plugin did not declare them), and
    ``options_class`` the class that declares them with their types (``None``: names only).

    ``schemes``: the target URL schemes a store handles (stores only). ``store``: the store
    backend a candidate source runs on (``None``: any store)."""

    kind: str
    name: str
    factory: Any
    plugin: str
    summary: str = ""
    options: tuple[str, ...] | None = None
    schemes: tuple[str, ...] = ()
    store: str | None = None
    options_class: type[Any] | None = None

    @property
    def section(self) -> str:
        """The component's configuration table, e.g. ``"rerankers.mmr"``."""
        return f"{TABLE_FOR_KIND[self.kind]}.{self.name}"

    def parse(self, options: Mapping[str, Any]) -> Any:
        """What the factory receives for the table ``options``: an instance of
        :attr:`options_class`, checked (:func:`~rankseam.options.parse_options`); without a
        class, the table itself, its keys checked against :attr:`options` when declared.
        Raises :class:`~rankseam.errors.ConfigurationError` naming ``[section] key``."""
        if self.options_class is not None:
            return parse_options(self.options_class, options, self.section)
        if self.options is not None:
            check_options(self.section, options, self.options)
        return options

    def option_info(self) -> tuple[OptionInfo, ...] | None:
        """Each option with its type, default and help (``None``: undeclared); options
        declared by name only have type ``"any"`` and no help."""
        if self.options_class is not None:
            return describe_options(self.options_class)
        if self.options is None:
            return None
        return tuple(OptionInfo(key, "any", None, False, "") for key in self.options)


#: What ``register(..., options=...)`` takes: an options class (see :func:`rankseam.plugin.option`),
#: or, undocumented and typeless, the option names.
OptionsDecl = type[Any] | Iterable[str] | None


class ComponentRegister(Generic[T]):
    """Collects the components of one kind. Call it:
    ``register(name, factory, summary=..., options=MyOptions)`` — ``options``, the frozen attrs
    class whose fields (made with :func:`rankseam.plugin.option`) declare the options the
    factory accepts, with types, defaults, bounds and help. The host builds an instance from the
    component's configuration table and passes it to the factory; ``rankseam plugins
    --options`` shows them. (An iterable of option names is still accepted: the factory then
    receives the table as a mapping, its keys checked.)"""

    kind: str = ""

    def __init__(self, registry: Registry, plugin: str) -> None:
        self._registry = registry
        self._plugin = plugin

    def __call__(
        self,
        name: str,
        factory: Factory[T],
        *,
        summary: str = "",
        options: OptionsDecl = None,
    ) -> None:
        self._registry.add(self._spec(name, factory, summary, options))

    def _spec(
        self, name: str, factory: Any, summary: str, options: OptionsDecl
    ) -> ComponentSpec[T]:
        if not isinstance(name, str) or not name or name.strip() != name:
            raise PluginError(
                f"plugin {self._plugin!r} registered a {self.kind} with an invalid name {name!r}; "
                "names are non-empty strings without surrounding spaces"
            )
        if not callable(factory):
            raise PluginError(
                f"plugin {self._plugin!r} registered {self.kind} {name!r} with a factory that is "
                f"not callable ({factory!r}); pass a callable factory(options, context)"
            )
        if isinstance(options, type):
            try:
                keys = option_keys(options)
            except TypeError as exc:
                raise PluginError(
                    f"plugin {self._plugin!r} registered {self.kind} {name!r} with options class "
                    f"{options.__name__}: {exc}"
                ) from None
            return ComponentSpec(
                self.kind, name, factory, self._plugin, summary, keys, options_class=options
            )
        declared = None
        if options is not None:
            declared = tuple(options) if not isinstance(options, str) else (options,)
            if not all(isinstance(o, str) and o for o in declared):
                raise PluginError(
                    f"plugin {self._plugin!r} registered {self.kind} {name!r} with options "
                    f"{options!r}; pass an options class (options=MyOptions, see "
                    "docs/writing-plugins.md) or the option names as strings"
                )
        return ComponentSpec(self.kind, name, factory, self._plugin, summary, declared)


class CandidateSourceRegister(ComponentRegister[Any]):
    """``register(name, factory, summary=..., options=MyOptions, store=None)``. ``store`` names
    the store backend the source runs on (a store's own sources: its query language, e.g.
    ``store="sqlite"``); such a source is used only with that store, and may share its name
    with another store's source. Without ``store`` the source runs on any store."""

    kind = "candidate_source"

    def __call__(
        self,
        name: str,
        factory: Factory[Any],
        *,
        summary: str = "",
        options: OptionsDecl = None,
        store: str | None = None,
    ) -> None:
        spec = self._spec(name, factory, summary, options)
        if store is not None and (not isinstance(store, str) or not store):
            raise PluginError(
                f"plugin {self._plugin!r} registered candidate source {name!r} with store "
                f"{store!r}; pass the name of a store backend (e.g. store='sqlite') or leave it "
                "out for a source that runs on any store"
            )
        self._registry.add(attrs.evolve(spec, store=store))


class StoreRegister(ComponentRegister[Any]):
    """``register(name, factory, schemes=(...), summary=..., options=MyOptions)``: a store backend
    that opens targets whose URL scheme is one of ``schemes`` (lower-case, e.g.
    ``("postgresql", "postgres")``). The factory is called as ``factory(target, options,
    context)``: ``target`` a :class:`~rankseam.plugin.stores.StoreTarget`, ``options`` its options
    class built from the ``[stores.NAME]`` table, ``context`` the assembly; it returns a
    :class:`~rankseam.plugin.stores.Store`. Two stores claiming one scheme is an error naming both
    plugins."""

    kind = "store"

    def __call__(  # type: ignore[override]
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        schemes: Iterable[str],
        summary: str = "",
        options: OptionsDecl = None,
    ) -> None:
        spec = self._spec(name, factory, summary, options)
        listed = (schemes,) if isinstance(schemes, str) else tuple(schemes)
        bad = [s for s in listed if not isinstance(s, str) or not _SCHEME.match(s)]
        if not listed or bad:
            raise PluginError(
                f"plugin {self._plugin!r} registered store {name!r} with schemes {schemes!r}; "
                "pass the lower-case URL schemes it opens, e.g. schemes=('postgresql',)"
            )
        self._registry.add(attrs.evolve(spec, schemes=listed))


class EmbedderRegister(ComponentRegister[Any]):
    kind = "embedder"


class RerankerRegister(ComponentRegister[Any]):
    kind = "reranker"


class DecisionBackendRegister(ComponentRegister[Any]):
    kind = "decision_backend"


class GenerationBackendRegister(ComponentRegister[Any]):
    kind = "generation_backend"


REGISTER_FOR_HOOK: dict[str, type[ComponentRegister[Any]]] = {
    "register_stores": StoreRegister,
    "register_candidate_sources": CandidateSourceRegister,
    "register_embedders": EmbedderRegister,
    "register_rerankers": RerankerRegister,
    "register_decision_backends": DecisionBackendRegister,
    "register_generation_backends": GenerationBackendRegister,
}


class Registry:
    """Every registered component by kind and name, with its owning plugin. Candidate sources
    bound to a store are kept per store (:attr:`ComponentSpec.store`)."""

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[tuple[str, str | None], ComponentSpec[Any]]] = {
            k: {} for k in _KINDS
        }

    def add(self, spec: ComponentSpec[Any]) -> None:
        """Record ``spec``; a name its kind already has (for the same store), or a scheme
        another store handles, is a :class:`PluginError` naming both plugins."""
        self._check_free(spec)
        self._by_kind[spec.kind][(spec.name, spec.store)] = spec

    def merge(self, other: Registry) -> None:
        """Add every component of ``other``, or none of them: every name is checked first."""
        for spec in other:
            self._check_free(spec)
        for spec in other:
            self._by_kind[spec.kind][(spec.name, spec.store)] = spec

    def _check_free(self, spec: ComponentSpec[Any]) -> None:
        existing = self._by_kind[spec.kind].get((spec.name, spec.store))
        if existing is not None:
            where = "" if spec.store is None else f" (for store {spec.store!r})"
            raise PluginError(
                f"duplicate {spec.kind} name {spec.name!r}{where}: registered by plugin "
                f"{existing.plugin!r} and by plugin {spec.plugin!r}; uninstall or disable one of "
                "them (RANKSEAM_DISABLE_PLUGINS)"
            )
        for scheme in spec.schemes:
            other = self.store_for_scheme(scheme)
            if other is not None:
                raise PluginError(
                    f"URL scheme {scheme!r} is claimed by store {other.name!r} (plugin "
                    f"{other.plugin!r}) and by store {spec.name!r} (plugin {spec.plugin!r}); "
                    "uninstall or disable one of them (RANKSEAM_DISABLE_PLUGINS)"
                )

    def get(self, kind: str, name: str, store: str | None = None) -> ComponentSpec[Any] | None:
        """Component ``name`` of ``kind``; with ``store``, a source bound to that store first,
        else one that runs on any store."""
        specs = self._by_kind[kind]
        if store is not None and (name, store) in specs:
            return specs[(name, store)]
        return specs.get((name, None))

    def names(self, kind: str, store: str | None = None) -> list[str]:
        """Names of ``kind``; with ``store``, only those usable with that store."""
        return sorted(
            {n for n, s in self._by_kind[kind] if store is None or s is None or s == store}
        )

    def store_for_scheme(self, scheme: str) -> ComponentSpec[Any] | None:
        """The store that handles URL scheme ``scheme``, or None."""
        for spec in self._by_kind["store"].values():
            if scheme in spec.schemes:
                return spec
        return None

    def __iter__(self) -> Iterator[ComponentSpec[Any]]:
        for kind in _KINDS:
            yield from self._by_kind[kind].values()

    def owned_by(self, plugin: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for spec in self:
            if spec.plugin == plugin:
                out.setdefault(spec.kind, []).append(spec.name)
        return out
