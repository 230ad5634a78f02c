"""Every hook a rankseam plugin may implement.

Hooks *register* components; they never run on the search path. Each hook receives a typed
register object and the host records which plugin owns each component. Hook arguments may only
be added over time, never removed or renamed. ``docs/plugin-hooks.md`` documents each hook with
its exact signature, and a test keeps the two in agreement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    import click

    from rankseam.registry import (
        CandidateSourceRegister,
        DecisionBackendRegister,
        EmbedderRegister,
        GenerationBackendRegister,
        RerankerRegister,
        StoreRegister,
    )

_hookspec = pluggy.HookspecMarker("rankseam")

#: Marker for hook implementations: ``@hookimpl`` (import it from :mod:`rankseam.plugin`).
hookimpl = pluggy.HookimplMarker("rankseam")


@_hookspec
def register_stores(register: StoreRegister) -> None:
    """Register store backends: ``register(name, factory, schemes=(...), summary=...)``.

    ``open_memory(target)`` picks the store whose ``schemes`` hold the target's URL scheme
    (a plain path is the embedded ``sqlite`` store). The factory is called as
    ``factory(target, options, context)`` and returns a :class:`~rankseam.plugin.stores.Store`. A
    store brings its own candidate sources: register them with
    ``register_candidate_sources`` and ``store=NAME``.
    """


@_hookspec
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    """Register candidate sources: ``register(name, factory, summary=..., store=None)``.

    A source returns its own ranked list of candidates for a query (lexical, vector,
    an external index ...). The factory is called as ``factory(options, context)``. A
    store's own sources name it with ``store=NAME``: they run only on that store and receive
    its reader.
    """


@_hookspec
def register_embedders(register: EmbedderRegister) -> None:
    """Register text embedders: ``register(name, factory, summary=...)``.

    An embedder turns texts into vectors and describes its space with an
    :class:`~rankseam.plugin.embedders.EmbedderDescriptor` (name, dimensions, normalisation).
    """


@_hookspec
def register_rerankers(register: RerankerRegister) -> None:
    """Register rerankers: ``register(name, factory, summary=...)``.

    A reranker answers ``rerank(query, candidates, limit)`` with a
    :class:`~rankseam.types.RerankDecision` of 1-based coarse positions.
    """


@_hookspec
def register_decision_backends(register: DecisionBackendRegister) -> None:
    """Register decision backends: ``register(name, factory, summary=...)``.

    A decision backend answers one narrow yes/no/abstain question
    (:class:`~rankseam.plugin.decision.DecisionBackend`).
    """


@_hookspec
def register_generation_backends(register: GenerationBackendRegister) -> None:
    """Register structured-generation backends: ``register(name, factory, summary=...)``.

    A generation backend turns a :class:`~rankseam.plugin.generation.GenerationRequest` into a
    parsed JSON object (:class:`~rankseam.plugin.generation.GenerationBackend`).
    """


@_hookspec
def register_commands(cli: click.Group) -> None:
    """Add sub-commands to the ``rankseam`` command line (``cli.add_command(...)``)."""
