"""Typed component options, declared once.

A component declares its options as a frozen attrs class whose fields are made with
:func:`option` (type from the annotation; default, bounds and a one-line help from the call)
and registers it: ``register("mmr", factory, options=MMROptions)``. The host parses the
component's configuration table with :func:`parse_options` before it calls the factory, so
the factory receives a checked instance of the class. Every refusal is worded here, once:
``[rerankers.mmr] lambda must be a number in [0, 1], got 'x'``. Plugins reach these through
:mod:`rankseam.plugin`; docs/writing-plugins.md ("Options") documents them.

Types an option may have: ``bool``, ``int``, ``float`` (an integer is accepted and
converted), ``str``, ``Literal[...]`` of strings, ``tuple[T, ...]`` and ``tuple[T, T]`` (from a
list), ``Mapping[str, T]`` (from a table), unions of those, ``X | None`` (``None``: unset)
and ``Any`` (not checked).
"""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeVar

import attrs

from rankseam.checks import is_int, is_real
from rankseam.errors import ConfigurationError

__all__ = [
    "OptionError",
    "OptionInfo",
    "check_options",
    "describe_options",
    "option",
    "option_keys",
    "parse_options",
    "resolve_env_refs",
]

_META = "rankseam.option"
T = TypeVar("T")


class OptionError(ValueError):
    """A value an options class refuses beyond its declared type and bounds (e.g. one option
    that must be below another). Raise it from an attrs validator or ``__attrs_post_init__``
    with the option's key and what is wrong: ``OptionError("stride", "must be smaller than
    window (30)")``; the host words it as ``[rerankers.listwise] stride must be ...``."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key} {problem}")
        self.key = key
        self.problem = problem


@attrs.frozen
class _Rule:
    """What :func:`option` records in a field's metadata."""

    help: str
    key: str | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    pattern: str | None = None
    expect: str | None = None
    nonempty: bool = False
    env: bool = False
    secret: bool = False
    default_doc: str | None = None


def option(
    default: Any = attrs.NOTHING,
    *,
    help: str,
    key: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    pattern: str | None = None,
    expect: str | None = None,
    nonempty: bool = False,
    env: bool = False,
    secret: bool = False,
    default_doc: str | None = None,
    validator: Any = None,
    converter: Any = None,
) -> Any:
    """A field of an options class: ``lam: float = option(0.5, key="lambda", ge=0, le=1,
    help="1 = pure relevance, 0 = pure diversity")``.

    ``default``: the value when the option is not set (none: the option is required; an
    ``attrs.Factory`` for one computed from other options, with ``default_doc`` saying how).
    ``key``: the name in the configuration when it is not the field's name (a Python keyword).
    ``ge``/``gt``/``le``/``lt``: bounds of a number (of each element of a list).
    ``pattern``: a regular expression a string must match in full; ``expect`` then says in
    words what it accepts ("'cpu', 'cuda', 'cuda:N' or 'mps'"). ``nonempty``: a string with
    more than spaces (surrounding spaces are removed). ``env``: the value may be
    ``{"$env" = "NAME"}``, read from the environment (unset: ``None``). ``secret``: the value
    is never shown in a message or a repr. ``validator``: an attrs validator for checks
    across options (raise :class:`OptionError`); ``converter``: an attrs converter that turns
    the checked value into the one kept (e.g. a path made absolute; it may raise
    :class:`OptionError` too).
    """
    rule = _Rule(help, key, ge, gt, le, lt, pattern, expect, nonempty, env, secret, default_doc)
    return attrs.field(
        default=default,
        repr=not secret,
        validator=validator,
        converter=converter,
        metadata={_META: rule},
    )


@attrs.frozen
class OptionInfo:
    """One declared option as ``rankseam plugins --options`` shows it."""

    key: str
    type: str
    default: Any
    required: bool
    help: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.key,
            "type": self.type,
            "default": self.default,
            "required": self.required,
            "help": self.help,
        }


@attrs.frozen
class _Field:
    init: str  # the parameter of the class's __init__
    key: str  # the configuration key
    type: Any
    rule: _Rule
    default: Any


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def _fields(cls: type) -> tuple[_Field, ...]:
    cached = _FIELDS.get(cls)
    if cached is not None:
        return cached
    if not attrs.has(cls):
        raise TypeError(f"{cls!r} is not an attrs class; declare options with @attrs.frozen")
    hints = typing.get_type_hints(cls)
    out = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        rule = field.metadata.get(_META)
        if rule is None:
            raise TypeError(
                f"{cls.__name__}.{field.name} is not declared with rankseam.plugin.option(...); "
                "every field of an options class needs a type, a default and a help line"
            )
        if not _supported(hints[field.name]):
            raise TypeError(
                f"{cls.__name__}.{field.name} has type {hints[field.name]!r}, which options "
                "cannot have (see rankseam.options for the types they can)"
            )
        out.append(
            _Field(
                field.alias or field.name,
                rule.key or field.name,
                hints[field.name],
                rule,
                field.default,
            )
        )
    _FIELDS[cls] = tuple(out)
    return _FIELDS[cls]


def option_keys(cls: type) -> tuple[str, ...]:
    """The configuration keys of options class ``cls``, in declaration order."""
    return tuple(f.key for f in _fields(cls))


# -- checking one value ----------------------------------------------------------------------


class _Refused(Exception):
    """A value does not fit a type (internal: turned into the one wording)."""


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _bounds(rule: _Rule, integer: bool) -> str:
    low = (rule.ge, "[", ">=") if rule.ge is not None else (rule.gt, "(", ">")
    high = (rule.le, "]", "<=") if rule.le is not None else (rule.lt, ")", "<")
    if low[0] is not None and high[0] is not None:
        if integer and rule.ge is not None and rule.le is not None:
            return f" in {_num(low[0])}..{_num(high[0])}"
        return f" in {low[1]}{_num(low[0])}, {_num(high[0])}{high[1]}"
    if low[0] is not None:
        return f" {low[2]} {_num(low[0])}"
    if high[0] is not None:
        return f" {high[2]} {_num(high[0])}"
    return ""


def _in_bounds(rule: _Rule, x: float) -> bool:
    return not (
        (rule.ge is not None and x < rule.ge)
        or (rule.gt is not None and x <= rule.gt)
        or (rule.le is not None and x > rule.le)
        or (rule.lt is not None and x >= rule.lt)
    )


def _arms(tp: Any) -> tuple[Any, ...]:
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return typing.get_args(tp)
    return (tp,)


def _supported(tp: Any) -> bool:
    if tp is Any or tp in (bool, int, float, str):
        return True
    arms = _arms(tp)
    if len(arms) > 1:
        return all(a is type(None) or _supported(a) for a in arms)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Literal:
        return all(isinstance(a, str) for a in args)
    if origin is tuple:
        return bool(args) and all(a is Ellipsis or _supported(a) for a in args)
    if origin in (Mapping, dict) or tp is Mapping:
        return not args or (args[0] is str and _supported(args[1]))
    return False


def _describe(tp: Any, rule: _Rule) -> str:
    """What a value of ``tp`` must be, in words ("a number in [0, 1]")."""
    arms = [a for a in _arms(tp) if a is not type(None)]
    if len(arms) > 1:
        return " or ".join(_describe(a, rule) for a in arms)
    tp = arms[0]
    origin = typing.get_origin(tp)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer" + _bounds(rule, True)
    if tp is float:
        return "a number" + _bounds(rule, False)
    if tp is str:
        if rule.expect is not None:
            return rule.expect
        if rule.pattern is not None:
            return f"a string matching {rule.pattern!r}"
        return "a non-empty string" if rule.nonempty else "a string"
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin is tuple:
        args = typing.get_args(tp)
        each = _plural(_describe(args[0], rule))
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {each}"
        return f"a list of {len(args)} {each}"
    if origin in (Mapping, dict) or tp is Mapping:
        args = typing.get_args(tp)
        return (
            f"a table whose values are {_plural(_describe(args[1], rule))}" if args else "a table"
        )
    return "anything"


def _plural(description: str) -> str:
    """``"an integer in 1..8"`` -> ``"integers in 1..8"``; others: ``"values: ..."``."""
    for article in ("a ", "an "):
        if description.startswith(article):
            word, _, rest = description.removeprefix(article).partition(" ")
            return f"{word}s {rest}".rstrip()
    return f"values ({description})"


def _convert(tp: Any, rule: _Rule, value: Any) -> Any:
    """``value`` as a ``tp``, or :class:`_Refused`."""
    if tp is Any:
        return value
    if rule.env and isinstance(value, Mapping) and set(value) == {"$env"}:
        name = value["$env"]
        if not isinstance(name, str) or not name:
            raise _Refused
        value = os.environ.get(name)
    arms = _arms(tp)
    if value is None:
        if type(None) in arms:
            return None
        raise _Refused
    for arm in arms:
        if arm is type(None):
            continue
        try:
            return _convert_one(arm, rule, value)
        except _Refused:
            continue
    raise _Refused


def _convert_one(tp: Any, rule: _Rule, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if is_int(value) and _in_bounds(rule, value):
            return value
    elif tp is float:
        if is_real(value) and _in_bounds(rule, value):
            return float(value)
    elif tp is str:
        if isinstance(value, str) and (
            rule.pattern is None or re.fullmatch(rule.pattern, value) is not None
        ):
            if not rule.nonempty:
                return value
            if value.strip():
                return value.strip()
    elif origin is Literal:
        if isinstance(value, str) and value in typing.get_args(tp):
            return value
    elif origin is tuple:
        args = typing.get_args(tp)
        if isinstance(value, list | tuple):
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_convert(args[0], rule, v) for v in value)
            if len(value) == len(args):
                return tuple(_convert(a, rule, v) for a, v in zip(args, value, strict=True))
    elif origin in (Mapping, dict) or tp is Mapping:
        args = typing.get_args(tp)
        if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
            if not args:
                return MappingProxyType(dict(value))
            return MappingProxyType({k: _convert(args[1], rule, v) for k, v in value.items()})
    raise _Refused


# -- parsing a table -------------------------------------------------------------------------


def _known(section: str, given: Iterable[str], known: Iterable[str]) -> None:
    allowed = list(known)
    unknown = sorted(set(given) - set(allowed))
    if not unknown:
        return
    names = ", ".join(unknown)
    verb = "is not an option" if len(unknown) == 1 else "are not options"
    where = f"; its options are {', '.join(allowed)}" if allowed else "; it takes no options"
    raise ConfigurationError(
        f"[{section}] {names} {verb}{where} (`rankseam plugins --options` lists each with its "
        "type and meaning)"
    )


def check_options(section: str, options: Mapping[str, Any], known: Iterable[str]) -> None:
    """Refuse option names not in ``known`` (a component registered with option names only,
    no options class); ``section`` is its configuration table, e.g. ``"rerankers.mmr"``."""
    _known(section, options, known)


def parse_options(cls: type[T], options: Mapping[str, Any], section: str) -> T:
    """Options class ``cls`` built from the table ``options`` of ``[section]`` (e.g.
    ``"rerankers.mmr"``): unknown keys, missing required ones, wrong types and values out of
    bounds are a :class:`~rankseam.errors.ConfigurationError` naming ``[section] key``."""
    fields = _fields(cls)
    _known(section, options, (f.key for f in fields))
    kwargs: dict[str, Any] = {}
    for field in fields:
        expect = _describe(field.type, field.rule)
        if field.key not in options:
            if field.default is attrs.NOTHING:
                raise ConfigurationError(
                    f"[{section}] {field.key} is required: {expect} ({field.rule.help})"
                )
            continue
        value = options[field.key]
        try:
            kwargs[field.init] = _convert(field.type, field.rule, value)
        except _Refused:
            shown = f"a {type(value).__name__}" if field.rule.secret else repr(value)
            if field.rule.env and "'$env'" in repr(value):
                shown += " (is the environment variable set?)"
            raise ConfigurationError(
                f"[{section}] {field.key} must be {expect}, got {shown} ({field.rule.help})"
            ) from None
    try:
        return cls(**kwargs)
    except OptionError as exc:
        raise ConfigurationError(f"[{section}] {exc.key} {exc.problem}") from None


def describe_options(cls: type[Any]) -> tuple[OptionInfo, ...]:
    """Each option of ``cls``: key, type in words, default (JSON-able), required, help."""
    out = []
    for field in _fields(cls):
        default: Any = field.default
        if field.rule.default_doc is not None:
            default = field.rule.default_doc
        elif isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            default = None
        elif default is attrs.NOTHING:
            default = None
        elif field.rule.secret:
            default = "***" if default is not None else None
        out.append(
            OptionInfo(
                field.key,
                _describe(field.type, field.rule).removeprefix("a ").removeprefix("an "),
                _jsonable(default),
                field.default is attrs.NOTHING,
                field.rule.help,
            )
        )
    return tuple(out)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def resolve_env_refs(value: Any, *, what: str) -> Any:
    """Resolve ``{"$env": "NAME"}`` to the environment variable's value (None if unset)."""
    if isinstance(value, Mapping) and set(value) == {"$env"}:
        name = value["$env"]
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{what}: {{'$env': NAME}} needs a variable name")
        return os.environ.get(name)
    return value
