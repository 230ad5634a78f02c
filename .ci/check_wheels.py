"""Build every distribution, check what would be uploaded, and use it the way a user would.

    python .ci/check_wheels.py OUT_DIR        (run by `nox -s wheels`)

1. `uv build` each distribution (core/, plugins/*, plugins-hosted/*): an sdist, then the wheel
   built FROM that sdist, so a file missing from the sdist fails here.
2. `twine check` every file (metadata and a README that renders on a package index).
3. Each wheel: its version is the one its package's ``__version__`` says, its license is
   the one its pyproject.toml declares (Apache-2.0 for code; tests/test_packaging.py names the
   distributions of data under their data's licence) with the LICENSE file inside, its README
   links nothing relative.
4. A fresh virtual environment gets the core and the mmr plugin FROM THE WHEELS (their
   third-party dependencies from the index), then `rankseam add` / `search --rerank mmr`
   run there, from a folder outside the checkout, and must cite the stored memory.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def distributions() -> dict[str, Path]:
    found = {}
    for pyproject in [
        ROOT / "core" / "pyproject.toml",
        *sorted(ROOT.glob("plugins/*/pyproject.toml")),
        *sorted(ROOT.glob("plugins-hosted/*/pyproject.toml")),
    ]:
        found[tomllib.loads(pyproject.read_text())["project"]["name"]] = pyproject.parent
    return found


def source_version(path: Path) -> str:
    """The ``__version__`` literal the pyproject's dynamic version points at."""
    meta = tomllib.loads((path / "pyproject.toml").read_text())
    attr = meta["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, _, name = attr.rpartition(".")
    parts = module.split(".")
    base = path / "src" / Path(*parts)
    source = base.with_suffix(".py") if base.with_suffix(".py").exists() else base / "__init__.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return str(ast.literal_eval(node.value))
    raise SystemExit(f"{source}: no {name} = '...' literal")


def run(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    print("+", " ".join(map(str, args)), flush=True)
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode:
        raise SystemExit(f"failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc.stdout


def check_wheel(name: str, version: str, wheel: Path, licence: str = "Apache-2.0") -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = zf.read(meta_name).decode()
    problems = []
    if f"\nVersion: {version}\n" not in meta:
        problems.append(f"version is not {version}")
    if f"License-Expression: {licence}" not in meta:
        problems.append(f"no License-Expression: {licence}")
    if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
        problems.append("no LICENSE file inside")
    for py in ("3.11", "3.12", "3.13"):
        if f"Programming Language :: Python :: {py}" not in meta:
            problems.append(f"no classifier for Python {py}")
    relative = re.findall(r"\]\((?!https?://|#)([^)]+)\)", meta)
    if relative:
        problems.append(f"README links relative paths {relative} (broken on a package index)")
    if problems:
        raise SystemExit(f"{wheel.name} ({name}): " + "; ".join(problems))


def main() -> int:
    out = Path(sys.argv[1]).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    dists = distributions()
    wheels: dict[str, Path] = {}
    for name, path in dists.items():
        run(uv, "build", "-q", "--sdist", "--wheel", "--out-dir", out, path)
        version = source_version(path)
        stem = name.replace("-", "_")
        wheel = out / f"{stem}-{version}-py3-none-any.whl"
        sdist = out / f"{stem}-{version}.tar.gz"
        if not wheel.exists() or not sdist.exists():
            raise SystemExit(f"{name}: expected {wheel.name} and {sdist.name} in {out}")
        declared = tomllib.loads((path / "pyproject.toml").read_text())["project"]["license"]
        check_wheel(name, version, wheel, declared)
        wheels[name] = wheel
    files = sorted(p for p in out.iterdir() if p.name.endswith((".whl", ".tar.gz")))
    print(run(sys.executable, "-m", "twine", "check", "--strict", *files))

    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RANKSEAM_", "VIRTUAL_ENV", "PYTHON"))
    }
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        run(uv, "venv", "-q", "--python", sys.executable, venv, env=env)
        python = venv / "bin" / "python"
        run(
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            python,
            wheels["rankseam"],
            wheels["rankseam-mmr"],
            env=env,
        )
        where = run(
            python,
            "-c",
            "import rankseam, rankseam_mmr; print(rankseam.__file__)",
            cwd=Path(tmp),
            env=env,
        )
        if str(ROOT / "core" / "src") in where or "site-packages" not in where:
            raise SystemExit(f"rankseam was not imported from the installed wheel: {where}")
        rankseam = venv / "bin" / "rankseam"
        db = Path(tmp) / "m.sqlite3"
        run(
            rankseam,
            "add",
            "Dana's birthday dinner is on Friday",
            "--id",
            "dinner",
            "--db",
            db,
            cwd=Path(tmp),
            env=env,
        )
        run(rankseam, "add", "Moved the weekly standup to 9:30", "--db", db, cwd=Path(tmp), env=env)
        found = json.loads(
            run(
                rankseam,
                "search",
                "when is dinner with dana?",
                "--db",
                db,
                "--rerank",
                "mmr",
                "--json",
                cwd=Path(tmp),
                env=env,
            )
        )
        hits = found["hits"] if isinstance(found, dict) else found
        if not hits or hits[0]["memory_id"] != "dinner":
            raise SystemExit(f"search from the wheels did not find the memory: {found}")
        plugins = json.loads(run(rankseam, "plugins", cwd=Path(tmp), env=env))
        if [p["name"] for p in plugins] != ["mmr"]:
            raise SystemExit(f"rankseam plugins from the wheels lists {plugins}")
    print(f"ok: {len(files)} files for {len(dists)} distributions; core + mmr from wheels search")
    return 0


if __name__ == "__main__":
    sys.exit(main())
