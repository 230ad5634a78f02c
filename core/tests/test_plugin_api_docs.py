"""Every public name a plugin imports is documented in docs/writing-plugins.md, and the page's
table of `rankseam.plugin` names lists nothing that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import rankseam.plugin
import rankseam.testing

PAGE = Path(__file__).resolve().parents[2] / "docs" / "writing-plugins.md"

pytestmark = pytest.mark.skipif(not PAGE.exists(), reason="needs docs/ next to core/")

#: Names the table may still show that left ``__all__`` through a deprecation.
DEPRECATED = {"FailurePolicy"}


def _documented(text: str) -> set[str]:
    """Every name that opens a code span (`name`, `name(...)`, `rankseam.testing.name`)."""
    names: set[str] = set()
    for span in re.findall(r"`([A-Za-z_][\w.]*)", text):
        names.update(span.split("."))
    return names


def _plugin_api_table(text: str) -> str:
    section = text.split("## The plugin API: `rankseam.plugin`", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line.split("|")[1] for line in section.splitlines() if line.startswith("| `"))


def test_every_name_of_rankseam_plugin_is_documented() -> None:
    documented = _documented(PAGE.read_text(encoding="utf-8"))
    missing = sorted(set(rankseam.plugin.__all__) - documented)
    assert not missing, f"document {missing} in docs/writing-plugins.md (the plugin API table)"


def test_the_plugin_api_table_names_only_public_names() -> None:
    listed = set(re.findall(r"`([A-Za-z_]\w*)", _plugin_api_table(PAGE.read_text("utf-8"))))
    assert listed, "the table of docs/writing-plugins.md's plugin API section was not found"
    stale = sorted(listed - set(rankseam.plugin.__all__) - DEPRECATED)
    assert not stale, f"{stale} are in the plugin API table but not in rankseam.plugin.__all__"


def test_every_name_of_the_kit_is_documented() -> None:
    documented = _documented(PAGE.read_text(encoding="utf-8"))
    missing = sorted(set(rankseam.testing.__all__) - documented)
    assert not missing, f"document {missing} in docs/writing-plugins.md (Testing your plugin)"


def test_every_name_of_the_kit_imports() -> None:
    for name in rankseam.testing.__all__:
        assert getattr(rankseam.testing, name) is not None, name
