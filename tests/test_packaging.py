"""What a release needs, checked on the sources (`nox -s wheels` checks the built files):
one LICENSE text everywhere, one version per distribution, metadata a package index shows
well, READMEs without links that break there."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DISTS = sorted(
    p.parent
    for pattern in (
        "core/pyproject.toml",
        "plugins/*/pyproject.toml",
        "plugins-hosted/*/pyproject.toml",
    )
    for p in ROOT.glob(pattern)
)


def meta(dist: Path) -> dict:
    return tomllib.loads((dist / "pyproject.toml").read_text())


def source_version(dist: Path) -> str:
    attr = meta(dist)["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, _, name = attr.rpartition(".")
    base = dist / "src" / Path(*module.split("."))
    source = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            getattr(t, "id", None) == name for t in node.targets
        ):
            return str(ast.literal_eval(node.value))
    raise AssertionError(f"{source} has no {name} literal")


def test_there_are_distributions() -> None:
    assert len(DISTS) >= 9 and ROOT / "core" in DISTS


#: Distributions of data under another licence: a model inherits its training data's.
DATA_LICENCES = {"rankseam-learned-locomo": "CC-BY-NC-4.0"}


@pytest.mark.parametrize("dist", DISTS, ids=lambda p: p.name)
def test_license_is_apache_and_shipped(dist: Path) -> None:
    project = meta(dist)["project"]
    assert project["license-files"] == ["LICENSE"]
    data_licence = DATA_LICENCES.get(dist.name)
    if data_licence is not None:
        assert project["license"] == data_licence
        assert "CC BY-NC 4.0" in (dist / "LICENSE").read_text()
        return
    assert project["license"] == "Apache-2.0"
    assert (dist / "LICENSE").read_text() == (ROOT / "LICENSE").read_text()
    assert "Apache License" in (ROOT / "LICENSE").read_text()


@pytest.mark.parametrize("dist", DISTS, ids=lambda p: p.name)
def test_one_version_written_once(dist: Path) -> None:
    project = meta(dist)["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", source_version(dist))


@pytest.mark.parametrize("dist", DISTS, ids=lambda p: p.name)
def test_plugins_accept_the_core_version(dist: Path) -> None:
    core = tuple(int(x) for x in source_version(ROOT / "core").split(".")[:2])
    for dep in meta(dist)["project"]["dependencies"]:
        match = re.fullmatch(r"rankseam>=(\d+)\.(\d+),<(\d+)\.(\d+)", dep)
        if dep.startswith("rankseam") and match:
            low, high = tuple(map(int, match.groups()[:2])), tuple(map(int, match.groups()[2:]))
            assert low <= core < high, f"{dist.name}: {dep} excludes rankseam {core}"


@pytest.mark.parametrize("dist", DISTS, ids=lambda p: p.name)
def test_classifiers_name_every_tested_python(dist: Path) -> None:
    classifiers = meta(dist)["project"]["classifiers"]
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert "Typing :: Typed" in classifiers


@pytest.mark.parametrize("dist", DISTS, ids=lambda p: p.name)
def test_readme_has_no_relative_links(dist: Path) -> None:
    readme = (dist / meta(dist)["project"]["readme"]).read_text()
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", readme)
    assert not relative, f"{dist.name}/README.md links {relative}; they break on a package index"


def test_changelog_has_an_entry_for_the_current_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "## [Unreleased]" in changelog
    assert f"## [{source_version(ROOT / 'core')}]" in changelog
