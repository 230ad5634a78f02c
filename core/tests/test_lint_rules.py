"""The lint session's rules catch what they are meant to catch.

`nox -s lint` runs ruff (with SLF001: no module touches another's private members) and
import-linter (the layers of the host, and "plugins import only the public modules"), with the
configuration of the root ``pyproject.toml``. Each test here copies the sources and that file
into a temporary folder, adds one deliberately bad module, and runs the same command there: the
command must fail and name the bad module. The unchanged copy must pass, so a failure is the bad
module's doing.
"""

from __future__ import annotations

import os
import pkgutil
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

import rankseam

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = ROOT / "pyproject.toml"

pytestmark = pytest.mark.skipif(
    not (PYPROJECT.exists() and (ROOT / "plugins").is_dir()),
    reason="needs the rankseam source tree (root pyproject.toml and plugins/) next to core/",
)

#: The modules a plugin may import (docs/writing-plugins.md), with every module of the plugin API
#: (``rankseam.plugin.stores`` ..., one per role: docs/plugin-api/).
PUBLIC = {"rankseam.plugin", "rankseam.types", "rankseam.errors", "rankseam.testing"}


def _tool(name: str) -> str:
    path = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed; the nox session installs it (pip install {name})")
    return path


def _sources() -> list[Path]:
    return [ROOT / "core" / "src", *sorted(ROOT.glob("plugins*/*/src"))]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of every distribution's src/ and of the root pyproject.toml."""
    shutil.copy(PYPROJECT, tmp_path / "pyproject.toml")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for src in _sources():
        shutil.copytree(src, tmp_path / src.relative_to(ROOT), ignore=ignore)
    return tmp_path


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    paths = [str(tree / src.relative_to(ROOT)) for src in _sources()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    return subprocess.run(
        [_tool("lint-imports"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _ruff(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_tool("ruff"), "check", "--no-cache", "--output-format", "concise", "."],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _add(tree: Path, relative: str, source: str) -> None:
    (tree / relative).write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")


def test_the_unchanged_tree_passes_both_checks(tree: Path) -> None:
    imports = _lint_imports(tree)
    assert imports.returncode == 0, imports.stdout + imports.stderr
    assert "0 broken" in imports.stdout
    ruff = _ruff(tree)
    assert ruff.returncode == 0, ruff.stdout + ruff.stderr


def test_a_plugin_importing_an_internal_module_fails(tree: Path) -> None:
    _add(
        tree,
        "plugins/rankseam-mmr/src/rankseam_mmr/bad_import.py",
        """
        from rankseam.compose import Config

        CONFIG = Config()
        """,
    )
    result = _lint_imports(tree)
    assert result.returncode != 0
    assert "rankseam_mmr.bad_import -> rankseam.compose" in result.stdout


def test_a_plugin_may_import_the_role_modules_but_not_their_homes(tree: Path) -> None:
    """``rankseam.plugin.stores`` re-exports the store contract: a plugin imports it from there,
    never from the internal module that defines it."""
    roles = sorted(p.stem for p in Path(rankseam.__file__).parent.glob("plugin/[a-z]*.py"))
    assert "stores" in roles
    _add(
        tree,
        "plugins/rankseam-mmr/src/rankseam_mmr/by_role.py",
        "".join(f"import rankseam.plugin.{role}\n" for role in roles),
    )
    _add(
        tree,
        "plugins/rankseam-mmr/src/rankseam_mmr/by_home.py",
        """
        from rankseam.store.contract import Store

        STORE = Store
        """,
    )
    result = _lint_imports(tree)
    assert result.returncode != 0
    assert "rankseam_mmr.by_home -> rankseam.store.contract" in result.stdout
    assert "rankseam_mmr.by_role" not in result.stdout


def test_a_plugin_importing_a_built_in_source_fails(tree: Path) -> None:
    _add(
        tree,
        "plugins/rankseam-mmr/src/rankseam_mmr/bad_source_import.py",
        """
        from rankseam.search.channels.lexical import query_terms

        TERMS = query_terms("a question")
        """,
    )
    result = _lint_imports(tree)
    assert result.returncode != 0
    assert "rankseam_mmr.bad_source_import -> rankseam.search.channels.lexical" in result.stdout


def test_a_layer_importing_upward_fails(tree: Path) -> None:
    # The seam sits below memory: make it import memory.
    seam = tree / "core/src/rankseam/seam/__init__.py"
    seam.write_text(
        seam.read_text(encoding="utf-8") + "\nfrom rankseam.memory import Memory  # noqa: E402\n",
        encoding="utf-8",
    )
    result = _lint_imports(tree)
    assert result.returncode != 0
    assert "rankseam.seam is not allowed to import rankseam.memory" in result.stdout


def test_touching_another_modules_private_member_fails(tree: Path) -> None:
    _add(
        tree,
        "core/src/rankseam/peek.py",
        """
        from rankseam.sqlite import SQLiteStore


        def connection(store: SQLiteStore) -> object:
            return store._conn()
        """,
    )
    result = _ruff(tree)
    assert result.returncode != 0
    assert "peek.py" in result.stdout and "SLF001" in result.stdout


def test_every_internal_module_is_forbidden_to_plugins() -> None:
    """The forbidden list of the public-API contract covers every rankseam module that is not
    public, so a new internal module cannot slip past the rule."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "public-plugin-api"]
    forbidden = set(contract["forbidden_modules"])
    for info in pkgutil.iter_modules(rankseam.__path__, "rankseam."):
        if info.name in PUBLIC:
            continue
        if info.name == "rankseam.search":  # the built-in channels live here; see below
            continue
        assert info.name in forbidden, f"add {info.name} to forbidden_modules in pyproject.toml"
    search = Path(rankseam.__file__).parent / "search"
    channels = search / "channels"
    for info in [
        *pkgutil.iter_modules([str(search)], "rankseam.search."),
        *pkgutil.iter_modules([str(channels)], "rankseam.search.channels."),
    ]:
        if info.name == "rankseam.search.channels":
            continue
        listed = info.name in forbidden or info.name in contract["source_modules"]
        assert listed, f"list {info.name} as a forbidden module or as a built-in channel"
    assert not forbidden & PUBLIC
    assert not {m for m in forbidden if m.startswith("rankseam.plugin.")}, (
        "the plugin API is public"
    )


def test_every_plugin_distribution_is_under_the_public_api_rule() -> None:
    """A new plugin's package must be listed, or the rule would not look at it."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "public-plugin-api"]
    packages = {
        path.name
        for src in sorted(ROOT.glob("plugins*/*/src"))
        for path in src.iterdir()
        if (path / "__init__.py").is_file()
    }
    assert packages, "no plugin package found under plugins*/*/src"
    missing_root = packages - set(config["root_packages"])
    missing_rule = packages - set(contract["source_modules"])
    assert not missing_root, f"add {sorted(missing_root)} to root_packages in pyproject.toml"
    assert not missing_rule, f"add {sorted(missing_rule)} to the public-plugin-api source_modules"
    (sources,) = [c for c in config["contracts"] if c["id"] == "built-in-sources-are-internal"]
    missing_sources = packages - set(sources["source_modules"])
    assert not missing_sources, (
        f"add {sorted(missing_sources)} to the built-in-sources-are-internal source_modules"
    )


def test_the_layers_page_and_the_checked_layers_agree() -> None:
    """docs/architecture.md lists the same layers, in the same order, as the contract."""
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "layers"]
    checked = [
        sorted(name.strip().removeprefix("rankseam.") for name in re.split(r"[|:]", layer))
        for layer in contract["layers"]
    ]
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    documented = [
        sorted(re.findall(r"`([\w.]+)`", modules))
        for modules in re.findall(r"^\| \d+ \| ([^|]+) \|", page, flags=re.M)
    ]
    assert documented == checked
