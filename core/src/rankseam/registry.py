"""Typed register objects: what hooks receive, and the record of who owns each component."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, Protocol, TypeVar

import attrs

from rankseam.errors import PluginError

__all__ = [
    "CandidateSourceRegister",
    "ComponentRegister",
    "ComponentSpec",
    "DecisionBackendRegister",
    "EmbedderRegister",
    "FactoryContext",
    "GenerationBackendRegister",
    "Registry",
    "RerankerRegister",
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


#: A component factory: ``factory(options, context) -> component``. ``options`` is the
#: component's own table from the configuration (a plain mapping); ``context`` is a
#: :class:`FactoryContext`.
Factory = Callable[[Mapping[str, Any], FactoryContext], T]

_KINDS = ("candidate_source", "embedder", "reranker", "decision_backend", "generation_backend")


@attrs.frozen
class ComponentSpec(Generic[T]):
    """A registered component: its kind, name, factory and owning plugin; ``options`` are the
    option names its factory accepts (``None``: the plugin did not declare them)."""

    kind: str
    name: str
    factory: Factory[T]
    plugin: str
    summary: str = ""
    options: tuple[str, ...] | None = None


class ComponentRegister(Generic[T]):
    """Collects the components of one kind. Call it:
    ``register(name, factory, summary=..., options=(...))`` — ``options``, the option names the
    factory accepts, is what ``rankseam plugins --options`` shows."""

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
        options: Iterable[str] | None = None,
    ) -> None:
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
        declared = None
        if options is not None:
            declared = tuple(options) if not isinstance(options, str) else (options,)
            if not all(isinstance(o, str) and o for o in declared):
                raise PluginError(
                    f"plugin {self._plugin!r} registered {self.kind} {name!r} with options "
                    f"{options!r}; pass the option names as strings, e.g. options=('lambda',)"
                )
        self._registry.add(ComponentSpec(self.kind, name, factory, self._plugin, summary, declared))


class CandidateSourceRegister(ComponentRegister[Any]):
    kind = "candidate_source"


class EmbedderRegister(ComponentRegister[Any]):
    kind = "embedder"


class RerankerRegister(ComponentRegister[Any]):
    kind = "reranker"


class DecisionBackendRegister(ComponentRegister[Any]):
    kind = "decision_backend"


class GenerationBackendRegister(ComponentRegister[Any]):
    kind = "generation_backend"


REGISTER_FOR_HOOK: dict[str, type[ComponentRegister[Any]]] = {
    "register_candidate_sources": CandidateSourceRegister,
    "register_embedders": EmbedderRegister,
    "register_rerankers": RerankerRegister,
    "register_decision_backends": DecisionBackendRegister,
    "register_generation_backends": GenerationBackendRegister,
}


class Registry:
    """Every registered component by kind and name, with its owning plugin."""

    def __init__(self) -> None:
        self._by_kind: dict[str, dict[str, ComponentSpec[Any]]] = {k: {} for k in _KINDS}

    def add(self, spec: ComponentSpec[Any]) -> None:
        """Record ``spec``; a name its kind already has is a :class:`PluginError` naming both
        plugins."""
        self._check_free(spec)
        self._by_kind[spec.kind][spec.name] = spec

    def merge(self, other: Registry) -> None:
        """Add every component of ``other``, or none of them: every name is checked first."""
        for spec in other:
            self._check_free(spec)
        for spec in other:
            self._by_kind[spec.kind][spec.name] = spec

    def _check_free(self, spec: ComponentSpec[Any]) -> None:
        existing = self._by_kind[spec.kind].get(spec.name)
        if existing is not None:
            raise PluginError(
                f"duplicate {spec.kind} name {spec.name!r}: registered by plugin "
                f"{existing.plugin!r} and by plugin {spec.plugin!r}; uninstall or disable one of "
                "them (RANKSEAM_DISABLE_PLUGINS)"
            )

    def get(self, kind: str, name: str) -> ComponentSpec[Any] | None:
        return self._by_kind[kind].get(name)

    def names(self, kind: str) -> list[str]:
        return sorted(self._by_kind[kind])

    def __iter__(self) -> Iterator[ComponentSpec[Any]]:
        for kind in _KINDS:
            yield from self._by_kind[kind].values()

    def owned_by(self, plugin: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for spec in self:
            if spec.plugin == plugin:
                out.setdefault(spec.kind, []).append(spec.name)
        return out
