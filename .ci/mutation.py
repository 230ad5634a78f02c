"""Mutation testing of the guarantees (``nox -s mutation``; docs/testing.md, "Mutation testing").

Runs mutmut over the module groups below, each against the test files that hold its
guarantees, and writes a report (killed / survived per group, every survivor with its diff).
Exits 1 when a group kills less than ``--threshold`` of its non-equivalent mutants.

Equivalent mutants (a change no test can observe because the behaviour is the same) are listed,
one line each with its reason, in ``.ci/mutation-equivalent.txt``; they are reported as
equivalent, never dropped silently, and an entry that matches no mutant any more is reported as
stale.

How it runs: mutmut mutates a copy of the sources in a work folder laid out as it expects
(``src/rankseam``, ``src/rankseam_mmr`` and ``tests/``), so the checkout is never touched.
Each mutant runs only the tests that reach its function (mutmut's coverage stats). A mutant
that times out counts as killed (a test noticed it); one that no test reaches counts as
survived.

    python .ci/mutation.py --out mutation-out [--group seam ...] [--sample N --seed S]
    python .ci/mutation.py --report-only ...   # the last run's report, equivalents re-read
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from fnmatch import fnmatch
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[1]
CORE_TESTS = ROOT / "core" / "tests"
MMR = ROOT / "plugins" / "rankseam-mmr"
EQUIVALENT_FILE = ROOT / ".ci" / "mutation-equivalent.txt"
#: Lists kept next to a plugin's tests that name their equivalent mutants by mutmut name (a
#: Markdown bullet per reason: "- `x_fn__mutmut_N`, ...: why"), with the module they belong to.
NAMED_EQUIVALENT_FILES = {MMR / "tests" / "MUTATION-EQUIVALENT.md": "rankseam_mmr.algorithm."}


@attrs.frozen
class Group:
    """One module group: the functions mutated (globs over mutmut's mutant names, without the
    ``__mutmut_N`` suffix) and the test files that must kill them."""

    name: str
    workdir: str  # groups sharing a work folder share one mutmut run
    files: tuple[str, ...]  # paths under src/ (mutmut's only_mutate)
    functions: tuple[str, ...]
    tests: tuple[Path, ...]


_CORE_TEST_FILES = tuple(
    CORE_TESTS / name
    for name in (
        "test_seam.py",
        "test_seam_pins.py",
        "test_seam_paths.py",
        "test_rerank_scores.py",
        "test_candidate_views.py",
        "test_decision_port.py",
        "test_write_gate.py",
        "test_roles.py",
        "test_contract_hardening.py",
        # the seam's chains and the neighbours a candidate view offers (seam/chain.py and
        # seam/views.py are seam modules too)
        "test_chains.py",
        "test_neighbours.py",
    )
)

#: The tests of the governed call and of reranker chains: the runner's and the chains' own, and
#: those of every role that uses the runner (rerank stage, envelopes, write gate).
_GOVERNED_TEST_FILES = tuple(
    CORE_TESTS / name
    for name in (
        "test_governed.py",
        "test_chains.py",
        "test_seam_pins.py",
        "test_seam_paths.py",
        "test_decision_port.py",
        "test_write_gate.py",
        "test_roles.py",
    )
)

GROUPS = (
    Group(
        "seam",
        "core",
        ("src/rankseam/seam/*",),
        ("rankseam.seam.*",),
        _CORE_TEST_FILES,
    ),
    Group(
        "decision port",
        "core",
        ("src/rankseam/decision.py",),
        (
            "rankseam.decision.x__evidence",
            "rankseam.decision.x__confidence",
            "rankseam.decision.x__timeout",
            "rankseam.decision.x_rerank_request",
            "rankseam.decision.x_write_gate_request",
            "rankseam.decision.x_checked_result",
            "rankseam.decision.xǁFailOpenDecisionBackendǁ*",
            "rankseam.decision.x_unwrap",
            "rankseam.decision.x___getattr__",
        ),
        _CORE_TEST_FILES,
    ),
    Group(
        "role resolution",
        "core",
        ("src/rankseam/assembly.py", "src/rankseam/decision.py"),
        (
            "rankseam.assembly.xǁComponentContextǁbackend_for_role",
            "rankseam.assembly.xǁComponentContextǁdecision_backend",
            "rankseam.assembly.xǁComponentContextǁgeneration_backend",
            "rankseam.decision.x_wrap_for_role",
        ),
        _CORE_TEST_FILES,
    ),
    Group(
        "write gate",
        "core",
        ("src/rankseam/writing/gate.py",),
        ("rankseam.writing.gate.*",),
        _CORE_TEST_FILES,
    ),
    Group(
        "governed call",
        "governed",
        ("src/rankseam/governed.py",),
        ("rankseam.governed.*",),
        _GOVERNED_TEST_FILES,
    ),
    Group(
        "reranker chains",
        "governed",
        ("src/rankseam/seam/chain.py",),
        ("rankseam.seam.chain.*",),
        _GOVERNED_TEST_FILES,
    ),
    Group(
        "mmr kernel",
        "mmr",
        ("src/rankseam_mmr/algorithm.py",),
        ("rankseam_mmr.algorithm.*",),
        tuple(sorted((MMR / "tests").glob("test_*.py"))),
    ),
)

_MUTANT = re.compile(r"^(?P<function>.+)__mutmut_(?P<n>\d+)$")
KILLED = {"killed", "timeout", "caught by type check", "segfault"}


@attrs.frozen
class Equivalent:
    function: str
    old: str
    new: str
    reason: str


def load_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    """``FUNCTION :: OLD LINE :: NEW LINE :: REASON`` per line (``#`` starts a comment); the
    lines are the mutated source line before and after, stripped."""
    out = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.split(" :: ")]
        if len(parts) != 4 or not all(parts):
            raise SystemExit(
                f"{path}:{number}: expected 'FUNCTION :: OLD LINE :: NEW LINE :: REASON', got "
                f"{line!r}"
            )
        out.append(Equivalent(*parts))
    return out


_NAME_IN_BULLET = re.compile(r"`(x_\w+?__mutmut_\d+)`")


def load_named_equivalents() -> dict[str, str]:
    """Mutant name -> reason, from each file of :data:`NAMED_EQUIVALENT_FILES`."""
    out: dict[str, str] = {}
    for path, module in NAMED_EQUIVALENT_FILES.items():
        if not path.exists():
            continue
        bullets: list[str] = []
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("- "):
                bullets.append(line[2:].strip())
            elif bullets and line.startswith("  ") and line.strip():
                bullets[-1] += " " + line.strip()
            elif not line.strip():
                bullets.append("")  # a blank line ends a bullet
        for bullet in filter(None, bullets):
            names = _NAME_IN_BULLET.findall(bullet)
            reason = f"{path.relative_to(ROOT)}: {bullet}"
            for name in names:
                out[module + name] = reason
    return out


def changed_lines(diff: str) -> tuple[str, str]:
    lines = diff.splitlines()
    old = [ln[1:].strip() for ln in lines if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:].strip() for ln in lines if ln.startswith("+") and not ln.startswith("+++")]
    return " / ".join(old), " / ".join(new)


def _prepare(work: Path, groups: Sequence[Group]) -> None:
    if work.exists():
        shutil.rmtree(work)
    (work / "src").mkdir(parents=True)
    (work / "tests").mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "core" / "src" / "rankseam", work / "src" / "rankseam", ignore=ignore)
    shutil.copytree(MMR / "src" / "rankseam_mmr", work / "src" / "rankseam_mmr", ignore=ignore)
    # tests that check the docs read them next to their folder's parent, as in the checkout
    shutil.copytree(ROOT / "docs", work / "docs", ignore=ignore)
    tests = sorted({t for g in groups for t in g.tests})
    for extra in tests[0].parent.glob("conftest.py"):
        shutil.copy2(extra, work / "tests" / extra.name)
    for test in tests:
        shutil.copy2(test, work / "tests" / test.name)
    files = sorted({f for g in groups for f in g.files})
    config = {
        "source_paths": ["src"],
        "only_mutate": files,
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-q"],
        "pytest_add_cli_args_test_selection": [f"tests/{t.name}" for t in tests],
        "use_git_change_detection": False,
        # a mutant that hangs (a deadline removed) sleeps without using CPU: give up after
        # 4 x (its tests' clean time + 5 s) of wall time instead of mutmut's 30 x
        "timeout_multiplier": 2.0,
        "timeout_constant": 5.0,
    }
    lines = ["[tool.mutmut]"]
    for key, value in config.items():
        lines.append(f"{key} = {json.dumps(value)}")
    lines += [
        "",
        "[tool.pytest.ini_options]",
        'filterwarnings = ["error::pytest.PytestUnraisableExceptionWarning"]',
    ]
    (work / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _mutmut(work: Path, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mutmut", *args]
    result = subprocess.run(command, cwd=work, capture_output=True, text=True)
    if log is not None:
        with log.open("a", encoding="utf-8") as out:
            out.write(f"$ {' '.join(command)}  (exit {result.returncode})\n")
            out.write(result.stdout[-20000:] + result.stderr[-20000:] + "\n")
    return result


def _statuses(work: Path) -> dict[str, int | None]:
    out: dict[str, int | None] = {}
    for meta in (work / "mutants").rglob("*.meta"):
        out.update(json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"])
    return out


def _belongs(name: str, group: Group) -> bool:
    match = _MUTANT.match(name)
    return bool(match) and any(fnmatch(match["function"], f) for f in group.functions)


def run(
    out: Path,
    names: Sequence[str],
    sample: int | None,
    seed: int,
    threshold: float,
    report_only: bool = False,
) -> int:
    from mutmut.stats import status_by_exit_code

    groups = [g for g in GROUPS if not names or g.name in names]
    if not groups:
        raise SystemExit(f"no group named {names}; groups: {[g.name for g in GROUPS]}")
    out.mkdir(parents=True, exist_ok=True)
    log = out / "mutmut.log"
    if not report_only:
        log.write_text("", encoding="utf-8")
    equivalents = load_equivalents()
    named = load_named_equivalents()
    used_equivalents: set[Equivalent] = set()
    started = time.monotonic()
    results: dict[str, dict[str, object]] = {}
    rng = random.Random(seed)
    for workdir in dict.fromkeys(g.workdir for g in groups):
        members = [g for g in groups if g.workdir == workdir]
        work = out / "work" / workdir
        if not report_only:
            _prepare(work, members)
            # first pass: the mutants and the coverage stats (no mutant matches the filter)
            first = _mutmut(work, "run", "rankseam-generate-only", log=log)
            if "failed to collect stats" in first.stdout + first.stderr:
                print(f"mutmut could not run the clean tests of {workdir!r}; see {log}")
                return 2
        every = sorted(_statuses(work))
        if not every:
            print(f"no mutants in {work}; see {log}")
            return 2
        chosen: dict[str, list[str]] = {}
        for group in members:
            mine = [n for n in every if _belongs(n, group)]
            if sample is not None and len(mine) > sample:
                mine = sorted(rng.sample(mine, sample))
            chosen[group.name] = mine
        selected = sorted({n for names_ in chosen.values() for n in names_})
        if selected and not report_only:
            _mutmut(work, "run", *selected, log=log)
        status = _statuses(work)
        for group in members:
            killed: list[str] = []
            survived: list[dict[str, str]] = []
            equivalent: list[dict[str, str]] = []
            for name in chosen[group.name]:
                state = status_by_exit_code[status.get(name)]
                if state in KILLED:
                    killed.append(name)
                    continue
                diff = _mutmut(work, "show", name).stdout
                old, new = changed_lines(diff)
                function = _MUTANT.match(name)["function"]  # type: ignore[index]
                entry = {"mutant": name, "status": state, "diff": diff}
                match = next(
                    (
                        e
                        for e in equivalents
                        if e.function == function and e.old == old and e.new == new
                    ),
                    None,
                )
                if match is not None:
                    used_equivalents.add(match)
                    equivalent.append({**entry, "reason": match.reason})
                elif name in named:
                    equivalent.append({**entry, "reason": named[name]})
                else:
                    survived.append(entry)
            live = len(killed) + len(survived)
            results[group.name] = {
                "files": list(group.files),
                "tests": [str(t.relative_to(ROOT)) for t in group.tests],
                "mutants": len(chosen[group.name]),
                "killed": len(killed),
                "survived": survived,
                "equivalent": equivalent,
                "score": (len(killed) / live) if live else 1.0,
            }
    elapsed = time.monotonic() - started
    previous = out / "report.json"
    if report_only and previous.exists():  # the time is the run's, not the rebuild's
        elapsed = float(json.loads(previous.read_text(encoding="utf-8"))["seconds"])
    stale = [e for e in equivalents if e not in used_equivalents]
    report = {
        "threshold": threshold,
        "sample": sample,
        "seed": seed,
        "seconds": round(elapsed, 1),
        "groups": results,
        # a sample or one group cannot tell a stale entry from one whose mutant was not drawn
        "unused_equivalent_entries": (
            [attrs.asdict(e) for e in stale] if not names and sample is None else []
        ),
    }
    (out / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    (out / "report.md").write_text(_markdown(report), encoding="utf-8")
    print(_summary(report))
    failing = [n for n, r in results.items() if float(r["score"]) < threshold]  # type: ignore[arg-type]
    if failing:
        print(f"below the threshold {threshold:.0%}: {', '.join(failing)} (see {out}/report.md)")
        return 1
    return 0


def _summary(report: dict) -> str:
    lines = [f"mutation testing: {report['seconds']:.0f} s, threshold {report['threshold']:.0%}"]
    if report["sample"] is not None:
        lines[0] += f", sample {report['sample']} per group, seed {report['seed']}"
    for name, r in report["groups"].items():
        lines.append(
            f"  {name:16} {r['killed']:4} killed / {r['killed'] + len(r['survived']):4} "
            f"non-equivalent = {r['score']:.1%}  ({len(r['equivalent'])} equivalent, "
            f"{r['mutants']} mutants)"
        )
    for entry in report["unused_equivalent_entries"]:
        lines.append(f"  stale equivalent entry (matches no mutant): {entry['function']}")
    return "\n".join(lines)


def _fenced(diff: str) -> list[str]:
    return ["```diff", diff.strip(), "```", ""]


def _markdown(report: dict) -> str:
    parts = ["# Mutation report", "", "```", _summary(report), "```", ""]
    for name, r in report["groups"].items():
        parts += [f"## {name}", "", f"files: {', '.join(r['files'])}", ""]
        parts += [f"tests: {', '.join(r['tests'])}", ""]
        parts += [f"### survived ({len(r['survived'])})", ""]
        for s in r["survived"]:
            parts += [f"`{s['mutant']}` ({s['status']})", "", *_fenced(s["diff"])]
        parts += [f"### equivalent ({len(r['equivalent'])})", ""]
        for s in r["equivalent"]:
            parts += [f"`{s['mutant']}`: {s['reason']}", "", *_fenced(s["diff"])]
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "mutation-out")
    parser.add_argument("--group", action="append", default=[], help="run only this group")
    parser.add_argument("--sample", type=int, default=None, help="mutants per group (random)")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rebuild the report from the last run's results (after reviewing equivalents)",
    )
    args = parser.parse_args(argv)
    return run(
        args.out.resolve(), args.group, args.sample, args.seed, args.threshold, args.report_only
    )


if __name__ == "__main__":
    sys.exit(main())
