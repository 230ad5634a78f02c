"""Each module of the plugin API has its page under docs/plugin-api/ (`rankseam.plugin`:
index.md, `rankseam.plugin.ROLE`: ROLE.md) whose table of names lists exactly the module's
``__all__``; every name of the conformance kit is documented in docs/writing-plugins.md."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import rankseam.plugin
import rankseam.testing

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = DOCS / "plugin-api"
GUIDE = DOCS / "writing-plugins.md"

pytestmark = pytest.mark.skipif(not PAGES.is_dir(), reason="needs docs/ next to core/")

ROLES = sorted(p.stem for p in Path(rankseam.plugin.__file__).parent.glob("[a-z]*.py"))
MODULES = {"rankseam.plugin": "index.md", **{f"rankseam.plugin.{r}": f"{r}.md" for r in ROLES}}
#: The header of the table of names on each page.
HEADER = "| name | what it is for |"


def _table_names(page: Path) -> set[str]:
    """The names of the first column of the page's table of names (its code spans)."""
    text = page.read_text(encoding="utf-8")
    assert HEADER in text, f"{page} has no table headed {HEADER!r}"
    rows = text.split(HEADER, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    names: set[str] = set()
    for row in rows:
        assert row.startswith("| `"), f"{page}: a row of the table of names: {row!r}"
        names.update(re.findall(r"`([A-Za-z_]\w*)`", row.split(" | ", 1)[0]))
    return names


def _documented(text: str) -> set[str]:
    """Every name that opens a code span (`name`, `name(...)`, `rankseam.testing.name`)."""
    names: set[str] = set()
    for span in re.findall(r"`([A-Za-z_][\w.]*)", text):
        names.update(span.split("."))
    return names


@pytest.mark.parametrize("module", sorted(MODULES))
def test_the_page_of_each_module_lists_exactly_its_names(module: str) -> None:
    page = PAGES / MODULES[module]
    assert page.exists(), f"write {page.relative_to(DOCS.parent)}: the page of {module}"
    listed = _table_names(page)
    public = set(importlib.import_module(module).__all__)
    missing = sorted(public - listed)
    stale = sorted(listed - public)
    assert not missing, f"add {missing} to the table of {page.name} (they are in {module})"
    assert not stale, f"{stale} are in the table of {page.name} but not in {module}.__all__"


def test_the_pages_are_the_modules() -> None:
    assert sorted(p.name for p in PAGES.glob("*.md")) == sorted(MODULES.values())


@pytest.mark.parametrize("page", [PAGES / "index.md", GUIDE])
def test_the_api_index_and_the_guide_link_every_role_page(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    prefix = "" if page.parent == PAGES else "plugin-api/"
    for role in ROLES:
        assert f"`rankseam.plugin.{role}`" in text and f"]({prefix}{role}.md)" in text, role


def test_the_table_parser_sees_a_missing_name(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(f"# x\n\n{HEADER}\n|---|---|\n| `a`, `b` | x `not_this` |\n| `c` | y |\n")
    assert _table_names(page) == {"a", "b", "c"}


def test_every_name_of_the_kit_is_documented() -> None:
    documented = _documented(GUIDE.read_text(encoding="utf-8"))
    missing = sorted(set(rankseam.testing.__all__) - documented)
    assert not missing, f"document {missing} in docs/writing-plugins.md (Testing your plugin)"


def test_every_name_of_the_kit_imports() -> None:
    for name in rankseam.testing.__all__:
        assert getattr(rankseam.testing, name) is not None, name
