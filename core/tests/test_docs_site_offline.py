"""The docs site's check (.ci/check_docs_site.py, run by `nox -s docs`) refuses a page that
loads a script, a stylesheet, an icon or an image from another host, and a stylesheet that
imports one, and lets local ones and plain links to other sites pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

CHECK = Path(__file__).resolve().parents[2] / ".ci" / "check_docs_site.py"


@pytest.fixture(scope="module")
def check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_docs_site", CHECK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _site(tmp_path: Path, head: str, css: str = "") -> Path:
    (tmp_path / "css").mkdir()
    (tmp_path / "css" / "site.css").write_text(css)
    (tmp_path / "index.html").write_text(
        f'<html><head>{head}<link rel="stylesheet" href="css/site.css"></head>'
        '<body><a href="https://example.org/">a link elsewhere is fine</a>'
        '<script src="js/local.js"></script></body></html>'
    )
    return tmp_path


@pytest.mark.parametrize(
    "head",
    [
        '<script src="https://cdnjs.cloudflare.com/ajax/libs/highlight.js/11.8.0/highlight.min.js">'
        "</script>",
        '<link rel="stylesheet" href="//cdn.example.com/theme.css">',
        '<link rel="icon" href="https://example.com/favicon.ico">',
        '<img src="http://example.com/badge.svg">',
    ],
)
def test_a_page_that_loads_from_another_host_is_refused(
    check: ModuleType, tmp_path: Path, head: str
) -> None:
    site = _site(tmp_path, head)
    pages = {path.resolve(): check.parse(path) for path in site.rglob("*.html")}
    (problem,) = check.offline(site, pages)
    assert problem.startswith("index.html: loads ") and "from another host" in problem


@pytest.mark.parametrize(
    "css",
    [
        "@font-face { src: url('https://fonts.example.com/a.woff2'); }",
        '@import "https://cdn.example.com/more.css";',
    ],
)
def test_a_stylesheet_that_imports_from_another_host_is_refused(
    check: ModuleType, tmp_path: Path, css: str
) -> None:
    site = _site(tmp_path, "", css)
    pages = {path.resolve(): check.parse(path) for path in site.rglob("*.html")}
    (problem,) = check.offline(site, pages)
    assert problem.startswith("css/site.css: loads ")


def test_local_resources_and_links_elsewhere_pass(check: ModuleType, tmp_path: Path) -> None:
    site = _site(tmp_path, '<link rel="stylesheet" href="css/pygments.css">', "a { b: url(x.png) }")
    pages = {path.resolve(): check.parse(path) for path in site.rglob("*.html")}
    assert check.offline(site, pages) == []
