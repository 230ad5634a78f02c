"""Every code block of README.md, docs/*.md and docs/plugins/*.md runs as it is written
(docs/testing.md, "Code blocks in the docs").

- ```python: a fresh interpreter runs the block (with the blocks marked `continue` after it,
  as one program); ```console: the lines starting with `$ ` run in bash (a line ending in `\\`
  goes on with the next one; the other lines are output, not checked); ```bash / ```sh: the
  whole block runs in bash. Bash runs with `set -euo pipefail`.
- The blocks of one page run in page order in one temporary folder, which is also HOME, so a
  page may build a store in one block and search it in the next.
- An HTML comment on the line before a block changes what happens to it:
  `<!-- docs-test: skip reason="needs a PostgreSQL server" -->` skips it with that reason,
  `needs="rankseam-mmr"` skips it when a distribution it names is not installed, `continue`
  joins a python block to the one before it, `file="notes.jsonl"` writes the block into the
  page's folder before the page's first block runs, and `pytest` runs a python block with
  pytest (it must hold tests that pass).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "docs" / "plugins").glob("*.md")),
]
RUN = {"python": "python", "console": "console", "bash": "bash", "sh": "bash"}
TIMEOUT_S = 300

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<lang>[\w+-]*)[^\n]*$")
MARKER = re.compile(r"^ *<!-- docs-test: (?P<body>.*?) -->$")
OPTION = re.compile(r'(?P<key>[\w-]+)(?:="(?P<value>[^"]*)")?')
KEYS = ("skip", "reason", "needs", "continue", "file", "pytest")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def parse_marker(body: str, where: str) -> dict[str, str]:
    options: dict[str, str] = {}
    rest = body
    for match in OPTION.finditer(body):
        key, value = match.group("key"), match.group("value")
        if key not in KEYS:
            raise ValueError(f"{where}: unknown docs-test option {key!r}; known: {KEYS}")
        options[key] = value or ""
        rest = rest.replace(match.group(0), "", 1)
    if rest.strip():
        raise ValueError(f"{where}: cannot read {rest.strip()!r} in the docs-test marker")
    if "skip" in options and not options.get("reason"):
        raise ValueError(f'{where}: a skip needs a reason: skip reason="why"')
    if "reason" in options and "skip" not in options:
        raise ValueError(f"{where}: reason= belongs to skip")
    return options


def page_blocks(page: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of the page, with the marker on the line before it, if any."""
    lines = (page.read_text(encoding="utf-8") if text is None else text).split("\n")
    found: list[Block] = []
    index = 0
    pending: tuple[int, dict[str, str]] | None = None
    while index < len(lines):
        where = f"{page.relative_to(ROOT)}:{index + 1}"
        marker = MARKER.match(lines[index])
        if marker:
            pending = (index, parse_marker(marker.group("body"), where))
            index += 1
            continue
        fence = FENCE.match(lines[index])
        if pending is not None and (fence is None or pending[0] != index - 1):
            raise ValueError(
                f"{page.relative_to(ROOT)}:{pending[0] + 1}: a docs-test "
                "marker must be on the line right before a code block"
            )
        if fence is None:
            index += 1
            continue
        indent, ticks = len(fence.group("indent")), fence.group("fence")
        end = index + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        if end == len(lines):
            raise ValueError(f"{where}: the code block is never closed")
        body = [
            line[indent:] if line[:indent].strip() == "" else line
            for line in lines[index + 1 : end]
        ]
        options = pending[1] if pending is not None else {}
        found.append(Block(page, index + 1, fence.group("lang"), "\n".join(body) + "\n", options))
        pending = None
        index = end + 1
    if pending is not None:
        raise ValueError(
            f"{page.relative_to(ROOT)}:{pending[0] + 1}: a docs-test marker "
            "must be on the line right before a code block"
        )
    return found


def runnable() -> list[Block]:
    blocks = []
    for page in PAGES:
        for block in page_blocks(page):
            if block.lang in RUN or "file" in block.options:
                blocks.append(block)
            elif block.options:
                raise ValueError(
                    f"{block.id}: a docs-test marker on a ```{block.lang} block "
                    "that is not run (only file= applies to it)"
                )
    return blocks


BLOCKS = runnable()


def programs(blocks: list[Block]) -> list[list[Block]]:
    """Python blocks marked `continue` join the program before them; other blocks run alone."""
    out: list[list[Block]] = []
    for block in blocks:
        if "file" in block.options:
            continue
        if "continue" in block.options:
            assert (
                out and out[-1][0].page == block.page and out[-1][0].lang == "python" == block.lang
            ), f"{block.id}: `continue` joins a python block to the python block before it"
            out[-1].append(block)
        else:
            out.append([block])
    return out


PROGRAMS = programs(BLOCKS)


def missing(block: Block) -> list[str]:
    absent = []
    for name in block.options.get("needs", "").split():
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def environment(home: Path) -> dict[str, str]:
    """The user's environment without rankseam's settings, with HOME in the page's folder and
    the interpreter running the tests (a nox session's) first on PATH, as `python`."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("RANKSEAM_", "XDG_"))}
    keep["HOME"] = str(home)
    keep["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{keep.get('PATH', '')}"
    keep["PYTHONDONTWRITEBYTECODE"] = "1"
    keep["NO_COLOR"] = "1"
    return keep


@pytest.fixture(scope="session")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path], Path]:
    """The page's folder, made (with the page's file= blocks in it) when first asked for."""
    made: dict[Path, Path] = {}

    def of(page: Path) -> Path:
        if page not in made:
            work = tmp_path_factory.mktemp(re.sub(r"\W+", "-", str(page.relative_to(ROOT))))
            for block in BLOCKS:
                if block.page == page and "file" in block.options:
                    (work / block.options["file"]).write_text(block.code, encoding="utf-8")
            made[page] = work
        return made[page]

    return of


def script(program: list[Block]) -> tuple[list[str], str | None]:
    """The command that runs the program, and the test file it needs (pytest blocks)."""
    first = program[0]
    if first.lang == "python":
        code = "".join(block.code for block in program)
        if "pytest" in first.options:
            return [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-x",
                "_block_test.py",
            ], code
        return [sys.executable, "-c", code], None
    if RUN[first.lang] == "console":
        commands, current = [], ""
        for line in first.code.splitlines():
            if current:
                current += "\n" + line
            elif line.startswith("$ "):
                current = line[2:]
            else:
                continue  # output
            if not current.endswith("\\"):
                commands.append(current)
                current = ""
        assert commands, f"{first.id}: a console block without a `$ ` command line"
        body = "\n".join(commands)
    else:
        body = first.code
    return ["bash", "-c", "set -euo pipefail\n" + body], None


def run(program: list[Block], work: Path) -> subprocess.CompletedProcess[str]:
    command, test_file = script(program)
    if test_file is not None:
        (work / "_block_test.py").write_text(test_file, encoding="utf-8")
    try:
        return subprocess.run(
            command,
            cwd=work,
            env=environment(work),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
    finally:
        if test_file is not None:
            (work / "_block_test.py").unlink()


@pytest.mark.parametrize("program", PROGRAMS, ids=[p[0].id for p in PROGRAMS])
def test_block_runs(program: list[Block], folder: Callable[[Path], Path]) -> None:
    for block in program:
        if "skip" in block.options:
            pytest.skip(block.options["reason"])
        absent = missing(block)
        if absent:
            pytest.skip(f"needs {' '.join(absent)}, not installed")
    proc = run(program, folder(program[0].page))
    assert proc.returncode == 0, (
        f"{program[0].id} failed (exit {proc.returncode}): {shlex.join(proc.args[:-1])} <block>\n"
        f"--- block ---\n{''.join(b.code for b in program)}"
        f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
    )


@pytest.mark.parametrize(
    ("lang", "code", "error"),
    [
        ("python", "print(texts)\n", "NameError"),
        ("console", "$ true\nnot run: output\n$ rankseam no-such-command\n", "No such command"),
        ("bash", "false | cat\necho never\n", ""),
    ],
)
def test_a_broken_block_fails(lang: str, code: str, error: str, tmp_path: Path) -> None:
    """What a block that does not work does to the test: it exits non-zero, with the error."""
    proc = run([Block(ROOT / "README.md", 1, lang, code)], tmp_path)
    assert proc.returncode != 0 and error in proc.stderr and "never" not in proc.stdout


def test_the_pages_have_blocks_to_run() -> None:
    """The extraction finds the blocks (a test that runs nothing would pass on anything)."""
    ran = [p for p in PROGRAMS if not any("skip" in b.options for b in p)]
    by_page = {p[0].page.name for p in ran}
    assert {"README.md", "integrations.md", "store.md", "writing-plugins.md"} <= by_page, by_page
    assert sum(1 for p in ran if p[0].lang == "python") >= 15


def test_markers_are_read() -> None:
    assert parse_marker('skip reason="a server"', "here") == {"skip": "", "reason": "a server"}
    assert parse_marker('needs="rankseam-mmr rankseam-postgres" continue', "here") == {
        "needs": "rankseam-mmr rankseam-postgres",
        "continue": "",
    }
    for bad in ("skip", 'skiip reason="x"', 'reason="x"', "skip reason=x"):
        with pytest.raises(ValueError):
            parse_marker(bad, "here")
    text = (
        'a\n\n<!-- docs-test: needs="x" -->\n```python\nprint(1)\n```\n\n'
        "- item\n\n  ```console\n  $ echo 2\n  ```\n\nb\n"
    )
    first, second = page_blocks(ROOT / "README.md", text)
    assert (first.lang, first.code, first.options, first.line) == (
        "python",
        "print(1)\n",
        {"needs": "x"},
        4,
    )
    assert (second.lang, second.code, second.options) == ("console", "$ echo 2\n", {})
    for misplaced in ("\nprose\n", "\n\n```python\nx = 1\n```\n", ""):
        with pytest.raises(ValueError, match="right before a code block"):
            page_blocks(ROOT / "README.md", text + "<!-- docs-test: continue -->" + misplaced)
