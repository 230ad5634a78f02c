"""``rankseam bench cli``: what one ``rankseam`` process costs to start and answer.

Each command runs as a fresh process, the way a user or a shell script runs it, and is timed
by the CPU time of that child (user + system, from the operating system's accounting of the
finished child) beside its wall time. The commands run interleaved: every round runs each of
them once, in a rotated order, so that a change in the machine's load falls on all of them
alike; ``python -c "import numpy"`` runs with them as the floor (a search cannot cost less
than importing numpy). One untimed round first fills the bytecode and entry-point caches, as
an installed package has them; ``PYTHONDONTWRITEBYTECODE`` is not passed on.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RANKSEAM", "default_commands", "run_startup", "startup_markdown"]

#: How a console script starts ``rankseam``: what ``rankseam ARGS`` runs, in this interpreter.
RANKSEAM = (
    "-c",
    "import sys; from rankseam.cli import main; sys.argv[0] = 'rankseam'; sys.exit(main())",
)


def default_commands(db: str, query: str, *, rerank: str | None = "mmr") -> dict[str, list[str]]:
    """label -> arguments (after the interpreter) of each timed command; ``rerank``: the
    reranker of the reranked search (``None``: no reranked search)."""
    rankseam = list(RANKSEAM)
    commands = {
        "python (no imports)": ["-c", "pass"],
        "floor: import numpy": ["-c", "import numpy"],
        "rankseam --version": [*rankseam, "--version"],
        "rankseam --help": [*rankseam, "--help"],
        "rankseam plugins": [*rankseam, "plugins"],
        "rankseam search": [*rankseam, "search", query, "--db", db],
        "rankseam search (no entry-point cache)": [*rankseam, "search", query, "--db", db],
    }
    if rerank is not None:
        search = [*rankseam, "search", query, "--db", db, "--rerank", rerank]
        commands[f"rankseam search --rerank {rerank}"] = search
    return commands


#: Extra environment of a command, by label (the rest inherit this process's environment).
_ENV = {"rankseam search (no entry-point cache)": {"RANKSEAM_CACHE_DIR": ""}}

FLOOR = "floor: import numpy"


def _run(label: str, args: Sequence[str], env: Mapping[str, str]) -> tuple[float, float]:
    """Run one child to its end: its CPU seconds (user + system) and wall seconds."""
    import resource  # POSIX only; `rankseam bench cli` checks for it first

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *args],
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise RuntimeError(
            f"`{label}` failed with exit status {done.returncode}: " + " / ".join(error)
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def _source_folders(checkout: Path) -> list[str]:
    """The source folders of a checkout's distributions (core and every plugin)."""
    folders = [checkout / "core" / "src"]
    for kind in ("plugins", "plugins-hosted"):
        folders += sorted((checkout / kind).glob("*/src"))
    if not (folders[0] / "rankseam" / "cli.py").is_file():
        raise ValueError(f"--baseline {checkout}: not a rankseam checkout (no core/src/rankseam)")
    return [str(f) for f in folders]


#: Builds a store of N synthetic memories at PATH (``python -c BUILD PATH N``), in the code of
#: the child's ``PYTHONPATH``: each version searches a store it wrote (a newer store schema
#: may be unreadable to older code).
BUILD = (
    "import sys\n"
    "from rankseam.bench import synthetic\n"
    "from rankseam.memory import open_memory\n"
    "with open_memory(sys.argv[1]) as memory:\n"
    "    memory.ingest(synthetic.texts(int(sys.argv[2])))\n"
)


def _build_store(label: str, path: Path, memories: int, env: Mapping[str, str]) -> str:
    _run(label, ["-c", BUILD, str(path), str(memories)], env)
    return str(path)


def _summary(cpu: Sequence[float], wall: Sequence[float]) -> dict[str, float]:
    return {
        "cpu_s_median": statistics.median(cpu),
        "cpu_s_min": min(cpu),
        "cpu_s_max": max(cpu),
        "wall_s_median": statistics.median(wall),
    }


def run_startup(
    *,
    runs: int = 7,
    memories: int = 1000,
    db: str | None = None,
    query: str = "harbour ferry timetable",
    only: Sequence[str] | None = None,
    rerank: str | None = "mmr",
    baseline: Path | None = None,
    echo: Callable[[str], None] = lambda _msg: None,
) -> dict[str, Any]:
    """Time each command ``runs`` times, interleaved; the report body (see the module
    docstring). ``db``: an existing store to search (default: a new one of ``memories``
    synthetic memories in a temporary folder). ``only``: the labels to time (the floor is
    always timed). ``rerank``: the reranker of the reranked search (``None``: none).
    ``baseline``: another checkout of this repository; each ``rankseam`` command also runs
    with its code first on ``PYTHONPATH``, interleaved with the others, labelled
    ``[baseline]``."""
    given_db = db is not None
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    with tempfile.TemporaryDirectory(prefix="rankseam-bench-cli-") as tmp:
        base_env: dict[str, str] = {}
        if baseline is not None:
            path = os.pathsep.join([*_source_folders(baseline), env.get("PYTHONPATH", "")])
            base_env = {**env, "PYTHONPATH": path}
        base_db = db
        if db is None:
            echo(f"building a store of {memories} synthetic memories")
            db = _build_store("building the store", Path(tmp) / "store.sqlite3", memories, env)
            if baseline is not None:
                base_db = _build_store(
                    "building the baseline's store", Path(tmp) / "base.sqlite3", memories, base_env
                )
        commands = default_commands(db, query, rerank=rerank)
        if only is not None:
            unknown = sorted(set(only) - set(commands))
            if unknown:
                raise ValueError(
                    f"unknown command label(s) {unknown}; choose from {list(commands)}"
                )
            commands = {k: v for k, v in commands.items() if k in only or k == FLOOR}
        envs = {label: {**env, **_ENV.get(label, {})} for label in commands}
        if baseline is not None:
            assert base_db is not None
            base_commands = default_commands(base_db, query, rerank=rerank)
            for label in [k for k in commands if k.startswith("rankseam") and k not in _ENV]:
                commands[f"{label} [baseline]"] = base_commands[label]
                envs[f"{label} [baseline]"] = {**envs[label], **base_env}
        labels = list(commands)
        echo(f"warming up (bytecode and entry-point caches): {len(labels)} commands")
        for label in labels:
            _run(label, commands[label], envs[label])
        load_before = os.getloadavg()
        cpu: dict[str, list[float]] = {label: [] for label in labels}
        wall: dict[str, list[float]] = {label: [] for label in labels}
        for round_ in range(runs):
            echo(f"round {round_ + 1}/{runs}")
            shift = round_ % len(labels)
            for label in labels[shift:] + labels[:shift]:
                c, w = _run(label, commands[label], envs[label])
                cpu[label].append(c)
                wall[label].append(w)
        load_after = os.getloadavg()
    floor = statistics.median(cpu[FLOOR])
    results = {}
    for label in labels:
        summary = _summary(cpu[label], wall[label])
        summary["cpu_vs_floor"] = summary["cpu_s_median"] / floor if floor > 0 else float("nan")
        results[label] = {
            "argv": ["python", *commands[label]],
            "env": {k: v for k, v in envs[label].items() if env.get(k) != v},
            **summary,
            "cpu_s": cpu[label],
            "wall_s": wall[label],
        }
    return {
        "kind": "cli",
        "configuration": {
            "runs": runs,
            "memories": None if given_db else memories,
            "db": db if given_db else "(temporary)",
            "query": query,
            "interpreter": sys.executable,
            "bytecode": "cached (one untimed warm-up round)",
            "baseline": None if baseline is None else str(baseline),
        },
        "load_average": {"before": list(load_before), "after": list(load_after)},
        "results": results,
    }


def startup_markdown(report: Mapping[str, Any]) -> str:
    """The report as a Markdown table: CPU median (and range), wall median, CPU / floor."""
    lines = [
        "| command | CPU median (s) | CPU min–max (s) | wall median (s) | CPU / floor |",
        "|---|---|---|---|---|",
    ]
    for label, r in report["results"].items():
        lines.append(
            f"| `{label}` | {r['cpu_s_median']:.3f} | {r['cpu_s_min']:.3f}–{r['cpu_s_max']:.3f} "
            f"| {r['wall_s_median']:.3f} | {r['cpu_vs_floor']:.2f} |"
        )
    load = report.get("load_average", {})
    runs = report["configuration"]["runs"]
    lines += [
        "",
        f"CPU = user + system time of each child process, median of {runs} interleaved runs; "
        f"load average {', '.join(f'{x:.1f}' for x in load.get('before', []))} before, "
        f"{', '.join(f'{x:.1f}' for x in load.get('after', []))} after.",
    ]
    return "\n".join(lines) + "\n"
