"""Drive the host as your plugin's users do, without reaching into rankseam's internals.

The contracts check a component on its own; these helpers check it *inside the host*:

- :func:`factory_context` / :func:`build_component`: build a component from options and a
  configuration exactly as an assembly does (the plugin's factory, the host's protocol check,
  backends handed to roles through the one failure-policy resolution);
- :func:`run_reranker` / :func:`arun_reranker`: run a reranker over a pool you give through the
  real rerank seam (bounds, rank validation, fallback, failure policy, deadline, trace);
- :func:`assert_listed`: the component is registered, by the plugin you expect, and that plugin
  loaded cleanly;
- :func:`installed_plugin`: load a plugin object as if a distribution's entry point named it;
- :func:`invoke_cli`: run the ``rankseam`` command in-process.

docs/writing-plugins.md ("Testing your plugin") shows each in use.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rankseam.decision import RERANK_ROLE
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.registry import TABLE_FOR_KIND, FactoryContext
from rankseam.seam import DEFAULT_MAX_CHARS, check_reranker, rerank_pool
from rankseam.types import Hit, MemoryRef, RerankTrace

__all__ = [
    "KIT_NAMESPACE",
    "Listing",
    "RerankRun",
    "arun_reranker",
    "assert_listed",
    "build_component",
    "factory_context",
    "installed_plugin",
    "invoke_cli",
    "run_reranker",
]

#: The namespace of the hits :func:`run_reranker` makes from plain texts.
KIT_NAMESPACE = "kit"


def _config(config: Mapping[str, Any] | None) -> Any:
    # The host's own configuration type, read from a rankseam.toml-shaped mapping; the
    # environment applies as it does for open_memory (RANKSEAM_EMBEDDER, ...).
    from rankseam.config import Config

    if config is None:
        return Config().with_env()
    if not isinstance(config, Mapping):
        raise TypeError(
            "config must be a mapping shaped like rankseam.toml, e.g. "
            f"{{'rerankers': {{'mmr': {{'lambda': 0.5}}}}}}, got {type(config).__name__}"
        )
    return Config.from_mapping(config).with_env()


def factory_context(config: Mapping[str, Any] | None = None) -> FactoryContext:
    """The context an assembly passes to component factories, for the configuration ``config``
    (a mapping shaped like rankseam.toml; default: an empty one).

    ``build(kind, name)`` builds a component with its configured options (once per name, as in
    an assembly); ``decision_backend(name, role)`` and ``generation_backend(name, role)`` give a
    backend as that role receives it: the backend itself for a fail-closed role, wrapped in the
    fail-open envelope for a fail-open one, one instance serving every role.
    """
    from rankseam.assembly import ComponentContext

    return ComponentContext(_config(config))


def build_component(
    kind: str,
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    config: Mapping[str, Any] | None = None,
) -> Any:
    """Build the installed component ``name`` of ``kind`` as the host would and return it.

    ``options`` go over the configuration's ``[table.name]`` options, as a search's
    ``reranker_options=`` (or ``--mmr-lambda 0.3``) go over rankseam.toml's.
    The host's checks apply: an unknown name, options the plugin refuses or a factory that
    raises is a :class:`~rankseam.errors.ConfigurationError`; a component that does not
    implement its kind's protocol is one too. A store is opened from a target
    (``rankseam.open_memory``), not built by name.
    """
    if kind not in TABLE_FOR_KIND:
        raise ValueError(f"kind must be one of {', '.join(TABLE_FOR_KIND)}, got {kind!r}")
    context = factory_context(config)
    if options is not None and not isinstance(options, Mapping):
        raise TypeError(f"options must be a mapping, got {type(options).__name__}")
    merged = None if options is None else {**context.config.options(kind, name), **options}
    component = context.build(kind, name, merged)
    _check_protocol(context, kind, name, component)
    return component


def _check_protocol(context: Any, kind: str, name: str, component: Any) -> None:
    from rankseam.assembly import check_embedder

    if kind == "reranker":
        try:
            check_reranker(component)
        except TypeError as exc:
            raise ConfigurationError(
                f"reranker {name!r} does not implement the protocol: {exc}"
            ) from None
    elif kind == "embedder":
        check_embedder(component, name)
    elif kind in ("decision_backend", "generation_backend"):
        # the protocol check of a backend handed to a role (fail-closed: the backend itself)
        context.backend_for_role(kind, name, RERANK_ROLE)


@attrs.frozen
class RerankRun:
    """What the seam made of one reranker call over a pool.

    ``hits``: the pool's own hits the host kept, best first (with ``rerank_score`` when the
    reranker's scores were used). ``positions``: their 0-based positions in the pool.
    ``trace``: the rerank stage's trace (status, selected ranks, discarded count, usage,
    records...), ``None`` only for an empty pool (the reranker is then never called).
    """

    hits: tuple[Hit, ...]
    positions: tuple[int, ...]
    trace: RerankTrace | None


def _as_hits(
    pool: Sequence[Hit] | Sequence[str], scores: Sequence[float] | None
) -> tuple[Hit, ...]:
    if isinstance(pool, str) or not isinstance(pool, Sequence):
        raise TypeError("pool must be a sequence of rankseam.types.Hit or of strings")
    items = tuple(pool)
    if all(isinstance(item, Hit) for item in items):
        if scores is not None:
            raise TypeError("scores apply to a pool of texts; a Hit carries its own score")
        return items  # type: ignore[return-value]
    texts = [item for item in items if isinstance(item, str)]
    if len(texts) != len(items):
        raise TypeError("pool must hold only Hits or only strings")
    n = len(texts)
    if scores is None:
        scores = [1.0 - i / n for i in range(n)]  # the given order is the coarse order
    elif len(scores) != n:
        raise ValidationError(f"scores must hold one number per text ({n}), got {len(scores)}")
    return tuple(
        Hit(MemoryRef(KIT_NAMESPACE, str(i + 1), 1), text, score)
        for i, (text, score) in enumerate(zip(texts, scores, strict=True))
    )


async def arun_reranker(
    reranker: Any,
    query: str,
    pool: Sequence[Hit] | Sequence[str],
    limit: int | None = None,
    *,
    scores: Sequence[float] | None = None,
    vectors: Sequence[Any] | np.ndarray | None = None,
    on_error: str = "raise",
    max_chars: int = DEFAULT_MAX_CHARS,
    deadline_s: float | None = None,
    options: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
) -> RerankRun:
    """Run ``reranker`` over ``pool`` for ``query`` through the rerank seam (async).

    ``reranker``: a reranker object, or the name of an installed one (built with ``options``
    and ``config`` by :func:`build_component`). ``pool``: the coarse pool, best first: hits
    (e.g. from :func:`~rankseam.testing.synthetic_pool`) or plain texts (then ``scores``, default
    falling with position, and refs ``kit/1``, ``kit/2``...). ``limit``: default the pool size.
    ``vectors``: one per pool entry (or an ``n × d`` matrix), attached to the candidates when
    the reranker declares ``needs_embeddings``, as the host attaches stored vectors.
    ``on_error``: ``"raise"`` (fail closed: a :class:`~rankseam.errors.RerankError`) or
    ``"coarse"`` (the coarse order, status ``degraded``). ``deadline_s``: default the host's.

    A pool over the host's bound is refused with :class:`~rankseam.errors.ValidationError`.
    """
    if isinstance(reranker, str):
        reranker = build_component("reranker", reranker, options, config=config)
    elif options is not None or config is not None:
        raise TypeError("options and config apply only to a reranker given by name")
    try:
        check_reranker(reranker)  # the seam makes it ready (sync or async) once, as for a search
    except TypeError as exc:
        raise ConfigurationError(f"reranker does not implement the protocol: {exc}") from None
    hits = _as_hits(pool, scores)
    k = max(len(hits), 1) if limit is None else limit
    fetch = None
    if vectors is not None:
        given = vectors

        def fetch(refs: Sequence[MemoryRef]) -> Any:
            return given

    extra: dict[str, Any] = {}
    if deadline_s is not None:
        extra["deadline_s"] = deadline_s
    out, trace = await rerank_pool(
        query,
        hits,
        k,
        reranker,
        on_error=on_error,  # type: ignore[arg-type]
        max_chars=max_chars,
        fetch_vectors=fetch,
        embedding_space="caller" if vectors is not None else None,
        **extra,
    )
    index = {id(hit): i for i, hit in enumerate(hits)}
    positions = tuple(_position(hit, hits, index) for hit in out)
    return RerankRun(tuple(out), positions, trace)


def _position(hit: Hit, hits: tuple[Hit, ...], index: Mapping[int, int]) -> int:
    found = index.get(id(hit))
    if found is not None:
        return found
    return next(i for i, h in enumerate(hits) if h == hit)  # re-scored copies compare equal


def run_reranker(
    reranker: Any,
    query: str,
    pool: Sequence[Hit] | Sequence[str],
    limit: int | None = None,
    **kwargs: Any,
) -> RerankRun:
    """:func:`arun_reranker` for synchronous tests (it runs its own event loop, so call
    :func:`arun_reranker` from inside one)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arun_reranker(reranker, query, pool, limit, **kwargs))
    raise RuntimeError(
        "run_reranker() was called inside a running event loop; await arun_reranker() instead"
    )


@attrs.frozen
class Listing:
    """A registered component as the host lists it (``rankseam plugins --options``), with
    what its plugin reports (``rankseam plugins``)."""

    kind: str
    name: str
    plugin: str
    summary: str
    #: The plugin's distribution and version; ``None`` for in-tree and test-installed plugins.
    distribution: str | None
    version: str | None
    #: Everything the plugin registered: kind -> sorted names.
    components: Mapping[str, tuple[str, ...]]


def assert_listed(
    kind: str, name: str, *, plugin: str | None = None, distribution: str | None = None
) -> Listing:
    """Assert that component ``name`` of ``kind`` is registered, by ``plugin`` (its entry-point
    name) from ``distribution`` when given, and that its plugin loaded without error; return
    its :class:`Listing`.

    A plugin that failed to load (an import error, a refused registration) fails this with the
    error the host recorded, so the test shows why.
    """
    from rankseam.plugins import get_plugins, get_registry

    infos = {info.name: info for info in get_plugins(all=True)}
    if plugin is not None:
        info = infos.get(plugin)
        if info is None:
            found = sorted(n for n, i in infos.items() if not i.default)
            raise AssertionError(
                f"no plugin named {plugin!r} is installed (entry-point plugins found: {found}); "
                "is the distribution installed, with an entry point in the 'rankseam' group?"
            )
        if info.status != "ok":
            raise AssertionError(f"plugin {plugin!r} is {info.status}: {info.error or ''}")
    specs = [s for s in get_registry() if s.kind == kind and s.name == name]
    if not specs:
        have = sorted(s.name for s in get_registry() if s.kind == kind)
        raise AssertionError(f"no {kind} named {name!r} is registered (registered: {have})")
    spec = specs[0]
    if plugin is not None and spec.plugin != plugin:
        raise AssertionError(f"{kind} {name!r} is registered by {spec.plugin!r}, not {plugin!r}")
    owner = infos[spec.plugin]
    if distribution is not None and owner.distribution != distribution:
        raise AssertionError(
            f"plugin {spec.plugin!r} comes from distribution {owner.distribution!r}, "
            f"not {distribution!r}"
        )
    return Listing(
        kind=kind,
        name=name,
        plugin=spec.plugin,
        summary=spec.summary,
        distribution=owner.distribution,
        version=owner.version,
        components={k: tuple(v) for k, v in owner.components.items()},
    )


@contextlib.contextmanager
def installed_plugin(plugin: object, *, name: str) -> Iterator[None]:
    """Within the block, the host loads ``plugin`` (a module, class or object with
    ``@hookimpl`` functions) as if an installed distribution's entry point ``name`` named it:
    its components are registered, a failure is isolated and reported, ``rankseam plugins``
    lists it. Plugins are reloaded on entry and exit, so other tests do not see it.
    """
    from rankseam.plugins import plugin_installed

    with plugin_installed(name, plugin):
        yield


def invoke_cli(
    args: Sequence[str],
    *,
    env: Mapping[str, str | None] | None = None,
    input: str | bytes | None = None,
    catch_exceptions: bool = True,
) -> Any:
    """Run ``rankseam ARGS...`` in-process and return click's ``Result`` (``exit_code``,
    ``output``, ``stdout``, ``stderr``, ``exception``). ``env`` sets (or, with ``None``,
    unsets) environment variables for the run; ``catch_exceptions=False`` lets an unexpected
    exception propagate (its traceback then shows in the test). Exit statuses: 0 success, 1 a
    run-time error, 2 a usage error.
    """
    from click.testing import CliRunner

    from rankseam.cli import cli

    if isinstance(args, str):
        raise TypeError("args must be a sequence of words, e.g. ['search', 'q', '--json']")
    runner = CliRunner()
    return runner.invoke(
        cli,
        list(args),
        env=dict(env) if env else None,
        input=input,
        catch_exceptions=catch_exceptions,
        prog_name="rankseam",
    )
