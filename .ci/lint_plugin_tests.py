"""The public-plugin-api import rule, applied to every plugin's tests.

A plugin's tests may import only what its users import: ``rankseam``, ``rankseam.plugin`` and its
role modules (``rankseam.plugin.stores`` ...), ``.types``, ``.errors`` and ``.testing`` (the kit's
package, not its modules). Test folders are not
packages, so import-linter cannot see them where they are; this script copies each plugin's
``tests/`` into a temporary folder as the package ``<distribution>_tests`` (``rankseam_mmr_tests``
...) and runs ``lint-imports`` there with the contract ``plugin-tests-public-api``: the
``forbidden_modules`` of the root pyproject.toml's ``public-plugin-api`` contract (one list for
plugins and their tests), plus the kit's own modules.

    python .ci/lint_plugin_tests.py [ROOT]        # nox -s lint runs it; exit status 1 on a breach
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

CONTRACT_ID = "plugin-tests-public-api"

#: Imports known to break the rule, each until the change that removes it (import-linter fails
#: on a listed import that no longer exists, so a fixed one must leave this list too).
KNOWN_BREACHES: list[str] = []


def _tool(name: str) -> str:
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        sys.exit(f"{name} is not installed (pip install import-linter)")
    return found


def test_packages(root: Path) -> dict[str, Path]:
    """``<distribution>_tests`` -> the tests folder, for every plugin that has one."""
    found = {}
    for tests in sorted(root.glob("plugins*/*/tests")):
        if tests.is_dir() and any(tests.rglob("*.py")):
            found[tests.parent.name.replace("-", "_") + "_tests"] = tests
    return found


def kit_modules(root: Path) -> list[str]:
    """The modules of ``rankseam.testing``: internal; tests import the package."""
    testing = root / "core" / "src" / "rankseam" / "testing"
    names = [p.stem for p in testing.glob("*.py") if p.stem != "__init__"]
    names += [p.name for p in testing.iterdir() if (p / "__init__.py").is_file()]
    return sorted(f"rankseam.testing.{name}" for name in names)


def _stage(packages: dict[str, Path], into: Path) -> None:
    for name, tests in packages.items():
        for source in tests.rglob("*.py"):
            if "__pycache__" in source.parts:
                continue
            target = into / name / source.relative_to(tests)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        for folder in [into / name, *(p for p in (into / name).rglob("*") if p.is_dir())]:
            (folder / "__init__.py").touch()


def _config(root: Path, packages: list[str]) -> str:
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (public,) = [c for c in contracts if c["id"] == "public-plugin-api"]
    forbidden = sorted(set(public["forbidden_modules"]) | set(kit_modules(root)))

    def strings(values: list[str]) -> str:
        return "[" + ", ".join(json.dumps(v) for v in values) + "]"

    return "\n".join(
        [
            "[tool.importlinter]",
            f"root_packages = {strings(['rankseam', *packages])}",
            "include_external_packages = false",
            "",
            "[[tool.importlinter.contracts]]",
            f'id = "{CONTRACT_ID}"',
            'name = "plugin tests import only rankseam, rankseam.plugin (and its role modules), '
            '.types, .errors and .testing"',
            'type = "forbidden"',
            f"source_modules = {strings(packages)}",
            f"forbidden_modules = {strings(forbidden)}",
            "allow_indirect_imports = true",
            f"ignore_imports = {strings(KNOWN_BREACHES)}",
            "",
        ]
    )


def main(root: Path) -> int:
    packages = test_packages(root)
    if not packages:
        print(f"no plugin tests found under {root}/plugins*/*/tests", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="rankseam-plugin-tests-") as tmp:
        staged = Path(tmp)
        _stage(packages, staged / "tests")
        (staged / "pyproject.toml").write_text(_config(root, sorted(packages)), encoding="utf-8")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(staged / "tests"), str(root / "core" / "src")]),
        }
        done = subprocess.run(
            [_tool("lint-imports"), "--no-cache", "--no-logo", str(staged / "pyproject.toml")],
            cwd=staged,
            env=env,
            capture_output=True,
            text=True,
        )
    sys.stdout.write(done.stdout)
    sys.stderr.write(done.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
