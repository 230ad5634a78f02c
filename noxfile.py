"""The only noxfile. Discovers core/, plugins/*/ and plugins-hosted/*/ by itself.

Each distribution is tested in its own virtual environment with only rankseam[testing] and
itself installed, so a plugin that forgets to declare a dependency fails here.

    nox -l                      # list sessions
    nox -s "tests(rankseam)"    # one distribution
    nox -s integration          # everything installed together, tests/ at the root
    nox -s langchain-standard   # LangChain's standard retriever + vector store suites
    nox -s lint                 # ruff + mypy
    nox -s wheels               # build every wheel + sdist, twine check, install from wheels
    nox -s compat-3.12          # core + integration tests on Python 3.12 (also 3.13)
    nox -s docs                 # the docs site, API reference included, warnings as errors
    nox -s bench                # a small, fast benchmark run (not part of `make test`)
    nox -s mutation             # mutation testing of the guarantees (slow; not in `make test`)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["tests", "integration", "lint", "wheels"]


def _distributions() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pyproject in [
        ROOT / "core" / "pyproject.toml",
        *sorted(ROOT.glob("plugins/*/pyproject.toml")),
        *sorted(ROOT.glob("plugins-hosted/*/pyproject.toml")),
    ]:
        meta = tomllib.loads(pyproject.read_text())
        tool = meta.get("tool", {}).get("rankseam", {})
        if tool.get("nox") is False:
            continue
        found[meta["project"]["name"]] = pyproject.parent
    return found


DISTS = _distributions()


def _tool(path: Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text()).get("tool", {}).get("rankseam", {})


# Distributions whose session must use pip (e.g. torch comes from a local wheel uv cannot see);
# `[tool.rankseam] preinstall = [...]` is installed first (e.g. the CPU build of torch).
PIP_ONLY = {name for name, path in DISTS.items() if _tool(path).get("installer") == "pip"}
TESTED = [name for name in DISTS if name not in PIP_ONLY]
nox.options.sessions += [f"tests-pip({name})" for name in sorted(PIP_ONLY)]


for _name in sorted(PIP_ONLY):

    def _pip_session(session: nox.Session, _dist: str = _name) -> None:
        path = DISTS[_dist]
        preinstall = _tool(path).get("preinstall", [])
        if preinstall:
            session.install(*preinstall)
        session.install("-e", f"{DISTS['rankseam']}[testing]")
        for other in _tool(path).get("test-with", []):
            session.install("-e", str(DISTS[other]))  # from this checkout, never an index
        session.install("-e", f"{path}[test]" if _has_extra(path, "test") else str(path))
        session.run("pytest", "-q", "-p", "no:cacheprovider", str(path / "tests"), *session.posargs)

    nox.session(name=f"tests-pip({_name})", python="3.11", venv_backend="virtualenv")(_pip_session)


@nox.session(python="3.11")
@nox.parametrize("dist", TESTED, ids=TESTED)
def tests(session: nox.Session, dist: str) -> None:
    """One distribution, its own venv: rankseam[testing] + the distribution + its tests."""
    path = DISTS[dist]
    extras = "testing,bench" if dist == "rankseam" else "testing"
    session.install("-e", f"{DISTS['rankseam']}[{extras}]")
    if dist == "rankseam":
        # uv: the example-plugin test builds a fresh venv with it; ruff and import-linter: the
        # lint-rule tests show that the lint session's rules catch what they are meant to.
        session.install("uv", "ruff", "import-linter")
    else:
        for other in _tool(path).get("test-with", []):
            session.install("-e", str(DISTS[other]))  # from this checkout, never an index
        session.install("-e", f"{path}[test]" if _has_extra(path, "test") else str(path))
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(path / "tests"),
        *session.posargs,
        env={"RANKSEAM_DATA": str(ROOT.parent / "shared" / "data")},
    )


def _has_extra(path: Path, extra: str) -> bool:
    meta = tomllib.loads((path / "pyproject.toml").read_text())
    return extra in meta["project"].get("optional-dependencies", {})


@nox.session(python="3.11")
def integration(session: nox.Session) -> None:
    """Everything installed together; runs the cross-distribution tests in tests/."""
    # langchain-classic: examples/langchain_pipeline.py uses its ContextualCompressionRetriever
    session.install("-e", f"{DISTS['rankseam']}[testing,bench]", "langchain-classic")
    for name in TESTED:
        if name != "rankseam":
            session.install("-e", str(DISTS[name]))
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(ROOT / "tests"),
        *session.posargs,
        env={"RANKSEAM_DATA": str(ROOT.parent / "shared" / "data")},
    )


@nox.session(name="langchain-standard", python="3.11")
def langchain_standard(session: nox.Session) -> None:
    """LangChain's standard suites (langchain-tests, the version pinned in rankseam-langchain's
    `standard` extra) over a real store: RetrieversIntegrationTests against RankseamRetriever,
    in the coarse order and with the mmr reranker, and VectorStoreIntegrationTests against
    RankseamVectorStore, with the suite's embeddings and with rankseam's."""
    path = DISTS["rankseam-langchain"]
    session.install(
        "-e",
        f"{DISTS['rankseam']}[testing]",
        "-e",
        str(DISTS["rankseam-mmr"]),
        "-e",
        f"{path}[standard]",
    )
    session.run("pytest", "-p", "no:cacheprovider", str(path / "standard_tests"), *session.posargs)


nox.options.sessions.append("langchain-standard")


def _plugin_sources() -> list[str]:
    return [str(path / "src") for name, path in DISTS.items() if name != "rankseam"]


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff (lint + format check), the import rules (import-linter: layers, the public plugin
    API, for plugins and for their tests) and mypy on the host and every plugin."""
    session.install(
        "ruff",
        "mypy",
        "import-linter",
        "httpx",
        "tenacity",
        "-e",
        f"{DISTS['rankseam']}[testing]",
    )
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    # import-linter reads the plugins' source without importing them (no plugin is installed).
    session.run("lint-imports", env={"PYTHONPATH": os.pathsep.join(_plugin_sources())})
    # the same public-API rule for every plugin's tests (they import what users import)
    session.run("python", str(ROOT / ".ci" / "lint_plugin_tests.py"), str(ROOT))
    session.run("mypy", str(DISTS["rankseam"] / "src" / "rankseam"), *_plugin_sources())


@nox.session(python="3.11")
def docs(session: nox.Session) -> None:
    """The docs site (mkdocs.yml: docs/ plus an API reference from the docstrings of rankseam,
    rankseam.plugin with its role modules and rankseam.testing), built with every warning an
    error, then its links, the README's and the API reference's coverage of the public names
    checked, offline.
    `nox -s docs -- DIR` keeps the site in DIR."""
    session.install(
        "mkdocs>=1.6,<2",
        "mkdocstrings[python]>=0.29",
        "pymdown-extensions>=10",
        "pygments>=2.12",  # code highlighted at build time (no script from a CDN)
        "ruff",  # formats the API reference's signatures, each on lines of its own
    )
    site = session.posargs[0] if session.posargs else str(Path(session.create_tmp()) / "site")
    config = str(ROOT / "mkdocs.yml")
    session.run("mkdocs", "build", "--strict", "--clean", "-f", config, "-d", site)
    session.run("python", str(ROOT / ".ci" / "check_docs_site.py"), site)


nox.options.sessions.append("docs")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """A small, fast benchmark configuration (not part of `make test`)."""
    session.install("-e", f"{DISTS['rankseam']}[bench,bench-reference]")
    for name in TESTED:
        if name != "rankseam":
            session.install("-e", str(DISTS[name]))
    out = session.posargs[0] if session.posargs else str(ROOT / "bench-out")
    backends = ["--option", "decision.backend=heuristic", "--option", "listwise.backend=local"]
    session.run("rankseam", "bench", "latency", "--quick", *backends, "--out", f"{out}/latency")


#: `nox -s mutation` fails when a module group kills less than this share of its non-equivalent
#: mutants (docs/testing.md, "Mutation testing").
MUTATION_THRESHOLD = 0.9
#: Mutants per group, drawn with a fixed seed, so that the run stays under ~20 minutes on two
#: cores; `nox -s mutation -- --sample 100000` runs them all.
MUTATION_SAMPLE = ("--sample", "200", "--seed", "25")


@nox.session(python="3.11")
def mutation(session: nox.Session) -> None:
    """Mutation testing (mutmut) of the seam, the decision port, role resolution, the write gate
    and the MMR kernel, each against its own test files; writes mutation-out/report.md and fails
    below MUTATION_THRESHOLD per group. Slow (see docs/testing.md): not part of `make test`.
    Arguments after `--` go to .ci/mutation.py (--group NAME, --sample N --seed S, --out DIR)."""
    session.install(
        "mutmut>=3.3,<4",
        "-e",
        f"{DISTS['rankseam']}[testing]",
        "-e",
        f"{DISTS['rankseam-mmr']}[test]",
    )
    session.run(
        "python",
        str(ROOT / ".ci" / "mutation.py"),
        "--threshold",
        str(MUTATION_THRESHOLD),
        *MUTATION_SAMPLE,
        *session.posargs,
    )


@nox.session(python="3.11")
def live(session: nox.Session) -> None:
    """Opt-in: rankseam-openai against a real server (RANKSEAM_OPENAI_BASE_URL,
    RANKSEAM_OPENAI_MODEL, and OPENAI_API_KEY for non-loopback hosts). Not run by `make test`."""
    if not os.environ.get("RANKSEAM_OPENAI_BASE_URL"):
        session.skip("set RANKSEAM_OPENAI_BASE_URL and RANKSEAM_OPENAI_MODEL to run live tests")
    path = DISTS["rankseam-openai"]
    session.install("-e", f"{DISTS['rankseam']}[testing]")
    session.install("-e", f"{path}[test]")
    session.run(
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        "live",
        "--live",
        str(path / "tests"),
        *session.posargs,
    )


@nox.session(python="3.11")
def wheels(session: nox.Session) -> None:
    """Build every wheel and sdist (the wheel from the sdist), `twine check` them, install the
    core and the mmr plugin FROM THE WHEELS into a fresh venv and search there."""
    session.install("uv", "twine")
    out = session.posargs[0] if session.posargs else str(Path(session.create_tmp()) / "dist")
    session.run("python", str(ROOT / ".ci" / "check_wheels.py"), out)


# Newer interpreters: the core and the integration tests run on each one this machine has
# (found on PATH as pythonX.Y, else under pyenv); a missing one is skipped with a message.
EXTRA_PYTHONS = ("3.12", "3.13")


def _find_python(version: str) -> str | None:
    found = shutil.which(f"python{version}")
    if found and subprocess.run([found, "-c", ""], capture_output=True).returncode == 0:
        return found
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    for candidate in sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True):
        return str(candidate)
    return None


for _version in EXTRA_PYTHONS:
    _interpreter = _find_python(_version)

    def _compat(
        session: nox.Session, _v: str = _version, _found: str | None = _interpreter
    ) -> None:
        if _found is None:
            session.skip(
                f"Python {_v} was not found (neither python{_v} on PATH nor under pyenv); "
                "install it to run the core and integration tests on it"
            )
        session.install("-e", f"{DISTS['rankseam']}[testing,bench]", "uv", "ruff", "import-linter")
        for name in TESTED:
            if name != "rankseam":
                session.install("-e", str(DISTS[name]))
        session.run(
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(DISTS["rankseam"] / "tests"),
            str(ROOT / "tests"),
            # the README's install + quickstarts (a pip install from scratch) run once, in
            # the integration session
            "--ignore",
            str(ROOT / "tests" / "test_readme.py"),
            *session.posargs,
            env={"RANKSEAM_DATA": str(ROOT.parent / "shared" / "data")},
        )

    _compat.__doc__ = f"The core and integration tests on Python {_version} (skipped if absent)."
    nox.session(name=f"compat-{_version}", python=_interpreter or False)(_compat)
    nox.options.sessions.append(f"compat-{_version}")
