"""Plugin tests import only public modules: `.ci/lint_plugin_tests.py` (run by `nox -s lint`)
applies the public-plugin-api import rule to every plugin's tests.

Like test_lint_rules.py, each test copies what the check reads (the root pyproject.toml, the
core sources, every plugin's tests and the script) into a temporary folder, adds one bad test
module, and runs the script there: it must fail and name the bad import. The unchanged copy
must pass, so a failure is the bad module's doing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / ".ci" / "lint_plugin_tests.py"

pytestmark = pytest.mark.skipif(
    not (SCRIPT.exists() and (ROOT / "plugins").is_dir()),
    reason="needs the rankseam source tree (.ci/, plugins/) next to core/",
)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / ".ci", tmp_path / ".ci", ignore=ignore)
    shutil.copytree(ROOT / "core" / "src", tmp_path / "core" / "src", ignore=ignore)
    for tests in ROOT.glob("plugins*/*/tests"):
        shutil.copytree(tests, tmp_path / tests.relative_to(ROOT), ignore=ignore)
    return tmp_path


def _check(tree: Path) -> subprocess.CompletedProcess[str]:
    # the script finds lint-imports next to this interpreter (the nox session installs it)
    script = tree / ".ci" / "lint_plugin_tests.py"
    return subprocess.run(
        [sys.executable, str(script), str(tree)], capture_output=True, text=True, timeout=300
    )


def _add(tree: Path, relative: str, source: str) -> None:
    (tree / relative).write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")


def test_the_plugin_tests_of_this_tree_pass(tree: Path) -> None:
    result = _check(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("source", "breach"),
    [
        (
            "from rankseam.compose import Config\n",
            "rankseam_mmr_tests.test_bad -> rankseam.compose",
        ),
        ("import rankseam.seam\n", "rankseam_mmr_tests.test_bad -> rankseam.seam"),
        (
            "def test_x():\n    from rankseam.plugins import get_registry\n",
            "rankseam_mmr_tests.test_bad -> rankseam.plugins",
        ),
        (
            "from rankseam.testing.reranker import synthetic_pool\n",
            "rankseam_mmr_tests.test_bad -> rankseam.testing.reranker",
        ),
    ],
)
def test_a_plugin_test_importing_an_internal_module_fails(
    tree: Path, source: str, breach: str
) -> None:
    _add(tree, "plugins/rankseam-mmr/tests/test_bad.py", source)
    result = _check(tree)
    assert result.returncode != 0
    assert breach in result.stdout


def test_a_helper_module_in_a_hosted_plugins_tests_is_checked_too(tree: Path) -> None:
    _add(tree, "plugins-hosted/rankseam-openai/tests/doubles.py", "from rankseam.cli import cli\n")
    result = _check(tree)
    assert result.returncode != 0
    assert "rankseam_openai_tests.doubles -> rankseam.cli" in result.stdout


def test_the_public_modules_are_allowed(tree: Path) -> None:
    _add(
        tree,
        "plugins/rankseam-mmr/tests/test_public.py",
        """
        import rankseam
        from rankseam.errors import ConfigurationError
        from rankseam.plugin.rerankers import make_candidates
        from rankseam.testing import build_component, run_reranker
        from rankseam.types import Hit
        """,
    )
    result = _check(tree)
    assert result.returncode == 0, result.stdout + result.stderr
