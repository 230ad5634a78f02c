"""docs/plugin-hooks.md documents every hookspec with its exact signature."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from rankseam import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "plugin-hooks.md"


def spec_signatures() -> dict[str, str]:
    out = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if not name.startswith("register_"):
            continue
        params = ", ".join(
            f"{p.name}: {p.annotation}" for p in inspect.signature(fn).parameters.values()
        )
        out[name] = f"def {name}({params}) -> {inspect.signature(fn).return_annotation}"
    return out


def doc_signatures() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    out = {}
    for heading, body in re.findall(r"^## (\w+)\n(.*?)(?=^## |\Z)", text, flags=re.M | re.S):
        match = re.search(r"```python\n(def .*?)\n```", body, flags=re.S)
        assert match, f"section {heading} has no signature block"
        out[heading] = match.group(1).strip()
    return out


def test_every_hook_is_documented_with_its_exact_signature() -> None:
    if not DOC.exists():
        pytest.fail(f"{DOC} is missing")
    assert doc_signatures() == spec_signatures()


def test_hookspecs_are_docstring_only() -> None:
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("register_"):
            assert fn.__doc__, f"{name} has no docstring"
            src = inspect.getsource(fn)
            body = src.split('"""')[-1].strip()
            assert body == "", f"{name} has a body besides its docstring"
