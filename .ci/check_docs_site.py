"""Checks of the built docs site (`nox -s docs`, after `mkdocs build --strict`), offline:

1. every internal link of every page (the API reference's generated ones included) reaches a
   file of the site, and its #anchor an element of that page;
2. every relative link of README.md reaches a file of the checkout, and a link into docs/ with
   an #anchor an element of the built page;
3. the API reference documents every name of `rankseam.__all__`, `rankseam.plugin.__all__`, each
   role module's (`rankseam.plugin.stores.__all__` ...) and `rankseam.testing.__all__` (read from
   the sources, nothing is imported);
4. no page loads a script, a stylesheet, a font or an image from another host, and no
   stylesheet of the site imports one (`url(...)`, `@import`): the site reads the same offline
   (code is highlighted at build time by Pygments, not by a script from a CDN).

    python .ci/check_docs_site.py SITE_DIR
"""

from __future__ import annotations

import ast
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = {
    "rankseam": ("core/src/rankseam/__init__.py", "api/rankseam/index.html"),
    "rankseam.plugin": ("core/src/rankseam/plugin/__init__.py", "api/plugin/index.html"),
    # each role module of the plugin API on a page of its own
    **{
        f"rankseam.plugin.{path.stem}": (
            f"core/src/rankseam/plugin/{path.name}",
            f"api/plugin-{path.stem}/index.html",
        )
        for path in sorted((ROOT / "core/src/rankseam/plugin").glob("[a-z]*.py"))
    },
    "rankseam.testing": ("core/src/rankseam/testing/__init__.py", "api/testing/index.html"),
}


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[str] = []
        #: what the browser loads with the page: scripts, stylesheets, icons, images
        self.loads: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value and tag in ("a", "img", "script", "link"):
                self.links.append(value)
        given = dict(attrs)
        rel = set((given.get("rel") or "").lower().split())
        if tag in ("script", "img", "iframe", "source") and given.get("src"):
            self.loads.append(given["src"] or "")
        elif tag == "link" and rel & {"stylesheet", "icon", "preload", "modulepreload"}:
            self.loads.append(given.get("href") or "")


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def external(url: str) -> bool:
    return bool(urlsplit(url).scheme) or url.startswith("//")


def site_links(site: Path, pages: dict[Path, Page]) -> list[str]:
    problems = []
    for path, page in pages.items():
        for link in page.links:
            if external(link):
                continue
            parts = urlsplit(link)
            base = site if parts.path.startswith("/") else path.parent  # 404.html: from the root
            target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else path
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(site)}: {link}"
            if not target.exists():
                problems.append(f"{where}: no such file in the site")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in pages[target].ids:
                    problems.append(f"{where}: no element #{parts.fragment} on that page")
    return problems


def readme_links(site: Path, pages: dict[Path, Page]) -> list[str]:
    problems = []
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)\s]+)\)", text):
        if external(link) or link.startswith("#"):
            continue
        parts = urlsplit(link)
        target = ROOT / unquote(parts.path)
        if not target.exists():
            problems.append(f"README.md: {link}: no such file in the checkout")
            continue
        if parts.fragment and target.suffix == ".md" and target.is_relative_to(ROOT / "docs"):
            built = site / target.relative_to(ROOT / "docs").with_suffix("") / "index.html"
            if target.name == "index.md":
                built = site / target.relative_to(ROOT / "docs").parent / "index.html"
            if unquote(parts.fragment) not in pages[built.resolve()].ids:
                problems.append(f"README.md: {link}: no heading #{parts.fragment} on that page")
    return problems


def public_names(source: str) -> list[str]:
    tree = ast.parse((ROOT / source).read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return list(ast.literal_eval(node.value))
    raise SystemExit(f"{source} has no __all__")


def api_coverage(site: Path, pages: dict[Path, Page]) -> list[str]:
    problems = []
    for module, (source, built) in PUBLIC.items():
        page = pages[(site / built).resolve()]
        text = (site / built).read_text(encoding="utf-8")
        for name in public_names(source):
            if name.startswith("__"):
                found = f"{module}.{name}" in text
            else:  # its own heading, or (a lazily loaded name) the heading of where it lives
                found = f"{module}.{name}" in page.ids or any(
                    i.startswith(f"{module}.") and i.endswith(f".{name}") for i in page.ids
                )
            if not found:
                problems.append(f"{built}: {module}.{name} is public but not documented there")
    return problems


#: ``url(...)`` and ``@import "..."`` in a stylesheet.
CSS_LOADS = re.compile(r"""url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)""")


def offline(site: Path, pages: dict[Path, Page]) -> list[str]:
    """What would be fetched from another host: a page's scripts, stylesheets, icons and
    images, and what the site's stylesheets import."""
    problems = [
        f"{path.relative_to(site)}: loads {url} from another host"
        for path, page in pages.items()
        for url in page.loads
        if external(url)
    ]
    for css in sorted(site.rglob("*.css")):
        for match in CSS_LOADS.finditer(css.read_text(encoding="utf-8", errors="replace")):
            url = match.group(1) or match.group(2)
            if external(url) and not url.startswith("data:"):
                problems.append(f"{css.relative_to(site)}: loads {url} from another host")
    return problems


def main(site: Path) -> int:
    site = site.resolve()
    pages = {path.resolve(): parse(path) for path in site.rglob("*.html")}
    if len(pages) < 10:
        print(f"{site} holds {len(pages)} pages: build the site first (mkdocs build)")
        return 1
    problems = (
        site_links(site, pages)
        + readme_links(site, pages)
        + api_coverage(site, pages)
        + offline(site, pages)
    )
    for problem in problems:
        print(problem)
    links = sum(len(p.links) for p in pages.values())
    print(f"{len(pages)} pages, {links} links checked: {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.exit(main(Path(sys.argv[1])))
