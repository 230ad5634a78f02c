"""Policy specs: which reranker, with which options, under which column label.

One benchmark run compares several *policies* side by side. A policy spec is::

    NAME                      a reranker with its default options ("none" = no rerank)
    NAME:KEY=VALUE[:KEY=VALUE...]

e.g. ``mmr:lambda=0.5``. VALUE is read as a TOML literal (number, bool, quoted string) and
falls back to a bare string. ``--rerank`` takes a comma-separated list of specs, ``--policy``
one spec (repeatable, for values that hold commas); the same reranker may appear many times
with different options, so a λ sweep is one run::

    rankseam bench quality --rerank none,identity,mmr:lambda=0.5,mmr:lambda=0.7

``--option NAME.KEY=VALUE`` sets a default option for every column of reranker NAME; options
written in a spec win. A column's label is its spec in canonical form (``mmr:lambda=0.5``);
labels key the report (``policies.<label>``).

``--option TABLE.NAME.KEY=VALUE`` sets an option of any component through its configuration
table (the ``rankseam.toml`` layout): ``rerankers``, ``decision_backends``,
``generation_backends``, ``embedders`` or ``sources``, e.g.
``--option decision_backends.similarity.no_threshold=0.4`` is
``[decision_backends.similarity] no_threshold = 0.4``. ``rerankers.mmr.lambda=0.7`` is the same
as ``mmr.lambda=0.7``; ``rerankers.model=PATH`` (two parts) is an option of the reranker named
``rerankers`` (rankseam-rerankers), e.g. ``--option rerankers.model_type=cross-encoder``.
Options of the other tables hold for the whole run (every store and
column); a sweep over a backend option is one run per value.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from rankseam.errors import ConfigurationError
from rankseam.registry import TABLE_FOR_KIND
from rankseam.types import frozen_mapping

__all__ = [
    "COMPONENT_TABLES",
    "PolicySpec",
    "SearchVariant",
    "component_options",
    "option_defaults",
    "parse_option",
    "parse_policies",
    "parse_policy",
    "parse_search",
    "parse_searches",
    "parse_value",
]

NONE = "none"
RERANKERS = "rerankers"
#: Configuration tables ``--option TABLE.NAME.KEY=VALUE`` may address (see rankseam.registry).
COMPONENT_TABLES = tuple(TABLE_FOR_KIND.values())


def parse_value(raw: str) -> Any:
    """A TOML literal (``0.7``, ``true``, ``"x"``), else the bare string."""
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@attrs.frozen
class PolicySpec:
    """One column of a benchmark: ``reranker`` is ``None`` for no rerank."""

    reranker: str | None
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=frozen_mapping)

    @property
    def label(self) -> str:
        name = self.reranker or NONE
        parts = [f"{k}={_format_value(v)}" for k, v in sorted(self.options.items())]
        return ":".join([name, *parts])

    def with_defaults(self, defaults: Mapping[str, Mapping[str, Any]]) -> PolicySpec:
        if self.reranker is None:
            return self
        merged = {**defaults.get(self.reranker, {}), **self.options}
        return PolicySpec(self.reranker, merged)

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "reranker": self.reranker, "options": dict(self.options)}


def parse_policy(spec: str) -> PolicySpec:
    """Parse ``NAME[:KEY=VALUE...]``."""
    name, *parts = [p.strip() for p in spec.strip().split(":")]
    if not name:
        raise ConfigurationError(
            f"policy spec {spec!r} has no reranker name; write NAME or NAME:KEY=VALUE, "
            "e.g. mmr:lambda=0.5"
        )
    options: dict[str, Any] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key:
            raise ConfigurationError(
                f"policy spec {spec!r}: {part!r} is not KEY=VALUE; write e.g. mmr:lambda=0.5"
            )
        options[key] = parse_value(value.strip())
    if name == NONE:
        if options:
            raise ConfigurationError(f"policy 'none' (no rerank) takes no options, got {spec!r}")
        return PolicySpec(None)
    return PolicySpec(name, options)


def parse_policies(
    rerank: Sequence[str] | str,
    policy: Iterable[str] = (),
    defaults: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[PolicySpec]:
    """Specs from ``--rerank`` (comma-separated) then ``--policy`` (one each), with
    ``defaults`` (from ``--option``) applied; duplicate labels removed (first wins)."""
    raw = [rerank] if isinstance(rerank, str) else list(rerank)
    specs: list[str] = []
    for item in raw:
        specs.extend(s for s in item.split(",") if s.strip())
    specs.extend(policy)
    out: list[PolicySpec] = []
    seen: set[str] = set()
    for spec in specs:
        parsed = parse_policy(spec).with_defaults(defaults or {})
        if parsed.label not in seen:
            seen.add(parsed.label)
            out.append(parsed)
    if not out:
        raise ConfigurationError("no policy to benchmark; pass e.g. --rerank none,identity")
    return out


def parse_option(raw: str) -> tuple[str, str, str, Any]:
    """``NAME.KEY=VALUE`` (a reranker option) or ``TABLE.NAME.KEY=VALUE`` (any component's
    configuration table) -> (table, name, key, value)."""
    target, eq, value = raw.partition("=")
    parts = [p.strip() for p in target.split(".")]
    if parts and parts[0] in COMPONENT_TABLES and not (parts[0] == RERANKERS and len(parts) == 2):
        table, parts = parts[0], parts[1:]
    else:  # NAME.KEY; "rerankers.KEY" is the reranker named rerankers (rankseam-rerankers)
        table = RERANKERS
    if not eq or len(parts) != 2 or not all(parts):
        raise ConfigurationError(
            f"--option {raw!r} is neither NAME.KEY=VALUE (a reranker option) nor "
            f"TABLE.NAME.KEY=VALUE with TABLE one of {', '.join(COMPONENT_TABLES)}; write e.g. "
            "--option mmr.lambda=0.7 or --option decision_backends.similarity.no_threshold=0.4"
        )
    name, key = parts
    return table, name, key.replace("-", "_"), parse_value(value.strip())


def component_options(raw: Iterable[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Every ``--option``, as configuration tables: ``{table: {name: {key: value}}}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for item in raw:
        table, name, key, value = parse_option(item)
        out.setdefault(table, {}).setdefault(name, {})[key] = value
    return out


def option_defaults(raw: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The reranker options among ``--option`` values: ``{reranker: {key: value}}``."""
    return component_options(raw).get(RERANKERS, {})


# ------------------------------------------------------------------------ search variants

#: Keys a search variant may set: ``[search]`` keys, ``weights.NAME`` and
#: ``sources.NAME.OPTION`` (a candidate source's option).
_SEARCH_KEYS = ("fusion", "sources", "distinct_sources")


@attrs.frozen
class SearchVariant:
    """One search assembly compared side by side with others over the same stores:
    ``search`` overrides ``[search]`` (``fusion``, ``weights``, ``scales``, ``sources``) and
    ``sources`` holds candidate-source options (``[sources.NAME]``). The empty variant is the
    configured default, labelled ``default``."""

    search: Mapping[str, Any] = attrs.field(factory=dict, converter=frozen_mapping)
    sources: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict, converter=frozen_mapping)
    name: str | None = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        parts: list[str] = []
        for key, value in sorted(self.search.items()):
            if key in ("weights", "scales"):
                tag = "w" if key == "weights" else "scale"
                parts.extend(f"{tag}.{n}={_format_value(w)}" for n, w in sorted(value.items()))
            elif key == "sources":
                parts.append("sources=" + "+".join(value))
            else:
                parts.append(f"{key}={_format_value(value)}")
        for source, options in sorted(self.sources.items()):
            parts.extend(f"{source}.{k}={_format_value(v)}" for k, v in sorted(options.items()))
        return ":".join(parts) or "default"

    def config(self, base: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``base`` (the ``rankseam.toml`` layout) with this variant's overrides."""
        out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in (base or {}).items()}
        if self.search:
            search = dict(out.get("search", {}))
            for key, value in self.search.items():
                search[key] = (
                    {**search.get(key, {}), **value} if key in ("weights", "scales") else value
                )
            out["search"] = search
        if self.sources:
            tables = {k: dict(v) for k, v in out.get("sources", {}).items()}
            for source, options in self.sources.items():
                tables[source] = {**tables.get(source, {}), **options}
            out["sources"] = tables
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "search": {
                k: (dict(v) if isinstance(v, Mapping) else v) for k, v in self.search.items()
            },
            "sources": {k: dict(v) for k, v in self.sources.items()},
        }


def parse_search(spec: str) -> SearchVariant:
    """``default``, or ``[LABEL=]KEY=VALUE[:KEY=VALUE...]`` with KEY one of ``fusion``,
    ``sources`` (names joined with ``+``), ``distinct_sources``, ``weights.NAME``,
    ``scales.NAME`` or ``sources.NAME.OPTION``, e.g.
    ``fusion=rrf``, ``sources=lexical``, ``fusion=convex:weights.vector=0.3``,
    ``sources.lexical.max_df=0.5``. ``LABEL=`` in front (a word followed by ``==``) names the
    column: ``lexical-only==sources=lexical``."""
    text = spec.strip()
    name = None
    if "==" in text:
        name, _, text = (p.strip() for p in text.partition("=="))
        if not name:
            raise ConfigurationError(f"search variant {spec!r}: empty label before '=='")
    if text in ("", "default"):
        return SearchVariant(name=name)
    search: dict[str, Any] = {}
    sources: dict[str, dict[str, Any]] = {}
    for part in (p.strip() for p in text.split(":")):
        key, eq, raw = part.partition("=")
        key = key.strip()
        path = key.split(".")
        value = parse_value(raw.strip())
        if not eq or not key:
            raise ConfigurationError(
                f"search variant {spec!r}: {part!r} is not KEY=VALUE; write e.g. fusion=rrf"
            )
        if path[0] in ("weights", "scales") and len(path) == 2 and path[1]:
            search.setdefault(path[0], {})[path[1]] = value
        elif key == "sources":
            search["sources"] = [s.strip() for s in str(raw).split("+") if s.strip()]
        elif path[0] == "sources" and len(path) == 3 and all(path):
            sources.setdefault(path[1], {})[path[2].replace("-", "_")] = value
        elif len(path) == 1 and key in _SEARCH_KEYS:
            search[key] = value
        else:
            raise ConfigurationError(
                f"search variant {spec!r}: unknown key {key!r}; use fusion=..., "
                "sources=a+b, distinct_sources=true|false, weights.NAME=..., scales.NAME=... "
                "or sources.NAME.OPTION=..."
            )
    return SearchVariant(search, sources, name)


def parse_searches(specs: Iterable[str]) -> list[SearchVariant]:
    """Every ``--search`` value (none: the configured default only); duplicates refused."""
    out = [parse_search(s) for s in specs] or [SearchVariant()]
    labels = [v.label for v in out]
    if len(set(labels)) != len(labels):
        raise ConfigurationError(f"--search lists a variant twice: {labels}")
    return out
