"""Who uses each name of the plugin API (`rankseam.plugin` and its role modules).

A name belongs in the plugin API when a plugin needs it. This script looks for its users:

1. **imports**: every ``from rankseam.plugin[.ROLE] import ...`` (in code, and in code held in
   strings, as tests that write a plugin to disk do) of every plugin's sources and tests
   (``plugins*/*/src``, ``plugins*/*/tests``), of core's in-tree plugins (the built-in
   components in ``rankseam.default_plugins``, the embedded store ``rankseam.sqlite``, the
   built-in channels ``rankseam.search.channels``), of the conformance kit
   (``rankseam.testing``), of ``examples/`` and of the Python blocks of ``docs/`` and the
   READMEs. The in-tree plugins and the kit may import a name from its internal home: that
   counts too, when the object imported is the plugin API's object of that name.
2. **contracts**: the Protocol each register's factory must return (a store, a candidate
   source, an embedder, a reranker, a decision or generation backend) is needed by whoever
   implements that role, imported or not.
3. **signatures**: a name that appears in the annotations of a needed name (a method of a
   needed Protocol, a field of a needed record, a needed function's parameters or return) or
   is the type of a needed constant is needed too, even if no plugin imports it (a row type a
   ``Store`` method returns).

``python .ci/plugin_api_users.py [ROOT]`` prints one line per name (its module, its users or
why it is needed) and the names nothing needs; exit status 1 when there is one.
core/tests/test_plugin_api_surface.py runs the same check.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The Protocol a component of each role implements (what its register's factory returns).
CONTRACTS = (
    "stores.Store",
    "channels.CandidateSource",
    "embedders.Embedder",
    "rerankers.Reranker",
    "decision.DecisionBackend",
    "generation.GenerationBackend",
)

_IMPORT = re.compile(r"from\s+rankseam\.plugin(?:\.(\w+))?\s+import\s+(\([^)]*\)|[^\n]*)")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def surface() -> dict[str, tuple[str, Any]]:
    """Every public name of the plugin API: name -> (its module, the object)."""
    top = importlib.import_module("rankseam.plugin")
    found = {name: ("rankseam.plugin", getattr(top, name)) for name in top.__all__}
    for path in sorted(Path(top.__file__).parent.glob("[a-z]*.py")):
        module = importlib.import_module(f"rankseam.plugin.{path.stem}")
        for name in module.__all__:
            found[name] = (module.__name__, getattr(module, name))
    return found


def _python_files(root: Path) -> Iterator[tuple[str, Path]]:
    core = root / "core" / "src" / "rankseam"
    groups = {
        "plugin": [*root.glob("plugins*/*/src"), *root.glob("plugins*/*/tests")],
        "in-tree": [core / "default_plugins", core / "sqlite", core / "search" / "channels"],
        "kit": [core / "testing"],
        "example": [root / "examples"],
    }
    for group, folders in groups.items():
        for folder in sorted(folders):
            for path in sorted(folder.rglob("*.py")):
                if "__pycache__" not in path.parts:
                    yield group, path


def _where(group: str, path: Path, root: Path) -> str:
    relative = path.relative_to(root)
    if group == "plugin":  # one entry per distribution is enough to say who needs a name
        return f"{relative.parts[1]}{'/tests' if relative.parts[2] == 'tests' else ''}"
    return str(relative)


def _imported(text: str) -> Iterator[str]:
    """The names of every ``from rankseam.plugin[.ROLE] import ...`` in ``text``."""
    for match in _IMPORT.finditer(text):
        names = match.group(2).split("#", 1)[0] if "(" not in match.group(2) else match.group(2)
        for part in names.strip("()").split(","):
            words = part.split()
            if words:
                yield words[0]


def _internal_imports(text: str) -> Iterator[tuple[str, str]]:
    """(module, name) of every ``from rankseam.X import name`` outside the plugin API."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("rankseam.") and not node.module.startswith(
                "rankseam.plugin"
            ):
                for alias in node.names:
                    yield node.module, alias.name


def users(root: Path) -> dict[str, set[str]]:
    """name -> where it is imported (plugins, in-tree plugins, the kit, examples, docs)."""
    names = surface()
    found: dict[str, set[str]] = {name: set() for name in names}

    def note(name: str, where: str) -> None:
        if name in found:
            found[name].add(where)

    for group, path in _python_files(root):
        text = path.read_text(encoding="utf-8")
        where = _where(group, path, root)
        for name in _imported(text):
            note(name, where)
        if group in ("in-tree", "kit"):
            for module, name in _internal_imports(text):
                if name in names:
                    try:
                        value = getattr(importlib.import_module(module), name)
                    except (ImportError, AttributeError):
                        continue
                    if value is names[name][1]:
                        note(name, where)
    pages = [*root.glob("docs/**/*.md"), *root.glob("README.md"), *root.glob("plugins*/*/*.md")]
    for page in sorted(pages):
        for block in _PYTHON_BLOCK.findall(page.read_text(encoding="utf-8")):
            for name in _imported(block):
                note(name, str(page.relative_to(root)))
    return found


def _annotations(value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """The annotation texts of a function, of a class's fields and of its methods and
    properties (as written: ``from __future__ import annotations`` keeps them strings), each
    with the namespace its names resolve in."""
    if inspect.isclass(value):
        for klass in value.__mro__:
            if not klass.__module__.startswith("rankseam"):
                continue
            namespace = vars(sys.modules[klass.__module__])
            for text in vars(klass).get("__annotations__", {}).values():
                yield str(text), namespace
            for member in vars(klass).values():
                function = member.fget if isinstance(member, property) else member
                function = getattr(function, "__func__", function)
                if inspect.isfunction(function):
                    for text in function.__annotations__.values():
                        yield str(text), function.__globals__
    elif inspect.isfunction(value):
        for text in value.__annotations__.values():
            yield str(text), value.__globals__


def _mentions(value: Any, names: dict[str, tuple[str, Any]]) -> set[str]:
    """The plugin API's names that ``value``'s signatures mention, or its type (a constant's).
    A word that resolves to another object of the same name (a ``Vectors`` of another module)
    is not a mention; one that does not resolve (an import only for type checkers) is."""
    found = set()
    for text, namespace in _annotations(value):
        for word in set(_IDENTIFIER.findall(text)) & set(names):
            if namespace.get(word, names[word][1]) is names[word][1]:
                found.add(word)
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        kind = type(value).__name__
        if kind in names and names[kind][1] is type(value):
            found.add(kind)
    return found


def needed(root: Path) -> dict[str, str]:
    """name -> why it is needed: where it is imported, the role it is the contract of, or the
    needed name whose signature mentions it. A name that is not in the answer is needed by
    nothing."""
    names = surface()
    why = {name: ", ".join(sorted(places)) for name, places in users(root).items() if places}
    for contract in CONTRACTS:
        role, name = contract.split(".")
        why.setdefault(name, f"the {role} role's contract")
    todo = list(why)
    while todo:
        name = todo.pop()
        for other in sorted(_mentions(names[name][1], names) - set(why)):
            why[other] = f"in the signature of {name}"
            todo.append(other)
    return why


def main(root: Path) -> int:
    names = surface()
    why = needed(root)
    for name, (module, _value) in sorted(names.items(), key=lambda item: (item[1][0], item[0])):
        print(f"{module}.{name}: {why.get(name, 'NEEDED BY NOTHING')}")
    unused = sorted(set(names) - set(why))
    print(
        f"{len(names)} names, {len(unused)} needed by nothing{': ' if unused else ''}"
        f"{', '.join(unused)}"
    )
    return 1 if unused else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
