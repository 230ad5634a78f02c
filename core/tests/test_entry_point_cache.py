"""Entry points are remembered between processes (``RANKSEAM_CACHE_DIR``) and read again as
soon as the installed distributions change: installed, upgraded, reinstalled or removed.

Distributions here are real dist-info folders on ``sys.path`` (the ``install`` fixture); what
the host finds is read through the public plugin listing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rankseam.entry_points import FoundEntryPoint, cache_file, entry_points
from rankseam.plugins import get_plugins, reset_plugins

Install = Callable[..., None]

PLUGIN = """
import rankseam

@rankseam.hookimpl
def register_rerankers(register):
    register("{name}", lambda options, context: None)
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("RANKSEAM_CACHE_DIR", str(folder))
    return folder / "entry-points.json"


def _listed() -> dict[str, str | None]:
    reset_plugins()
    return {p.name: p.version for p in get_plugins()}


def _from_metadata(group: str) -> list[FoundEntryPoint]:
    from importlib import metadata

    return [
        FoundEntryPoint(ep.name, ep.value, ep.dist.version, ep.dist.metadata["Name"])
        for ep in metadata.entry_points(group=group)
        if ep.dist is not None
    ]


def test_the_cache_answers_as_the_installed_metadata(cache: Path) -> None:
    for group in ("rankseam", "console_scripts"):
        assert entry_points(group) == _from_metadata(group)  # read, then remembered
        assert entry_points(group) == _from_metadata(group)  # answered from the file
    assert cache == cache_file() and cache.is_file()


def test_a_later_process_reads_no_metadata_and_finds_the_same_plugins(cache: Path) -> None:
    code = (
        "import json, sys\n"
        "from rankseam.plugins import get_plugins\n"
        "names = sorted((p.name, p.version, p.distribution) for p in get_plugins())\n"
        "print(json.dumps([names, 'importlib.metadata' in sys.modules]))\n"
    )
    env = {**os.environ, "RANKSEAM_CACHE_DIR": str(cache.parent)}

    def run() -> tuple[list[list[str]], bool]:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        found, metadata_read = json.loads(out.stdout)
        return found, metadata_read

    first, first_read = run()
    second, second_read = run()
    assert first_read and not second_read
    assert second == first
    env["RANKSEAM_CACHE_DIR"] = ""  # no cache: the metadata is read every time
    third, third_read = run()
    assert third == first and third_read


def test_installing_upgrading_and_removing_a_distribution_is_seen(
    install: Install, cache: Path
) -> None:
    install("first", PLUGIN.format(name="first-reranker"))
    assert _listed().get("first") == "0.3.1"
    assert cache.is_file()

    install("second", PLUGIN.format(name="second-reranker"))  # installed
    assert {"first", "second"} <= set(_listed())

    site = Path(sys.path[0])
    old = site / "rs_test_second-0.3.1.dist-info"
    new = site / "rs_test_second-0.4.dist-info"  # upgraded: the folder is replaced
    shutil.copytree(old, new)
    shutil.rmtree(old)
    (new / "METADATA").write_text("Metadata-Version: 2.1\nName: rs_test_second\nVersion: 0.4\n")
    assert _listed()["second"] == "0.4"

    # reinstalled under the same folder name, with another entry point name
    (new / "entry_points.txt").write_text("[rankseam]\nsecond-renamed = rs_test_second\n")
    listed = _listed()
    assert "second-renamed" in listed and "second" not in listed

    # its metadata rewritten in place (another version, same folder)
    (new / "METADATA").write_text("Metadata-Version: 2.1\nName: rs_test_second\nVersion: 0.4.1\n")
    assert _listed()["second-renamed"] == "0.4.1"

    shutil.rmtree(new)  # removed
    listed = _listed()
    assert "second-renamed" not in listed and "first" in listed


def test_a_damaged_or_foreign_file_is_read_past_and_replaced(install: Install, cache: Path) -> None:
    install("first", PLUGIN.format(name="first-reranker"))
    expected = _listed()
    for damage in ("not json", "[]", '{"fingerprint": 3}', json.dumps({"entry_points": 1})):
        cache.write_text(damage)
        assert _listed() == expected
        assert json.loads(cache.read_text())["entry_points"]
    data = json.loads(cache.read_text())
    data["entry_points"] = [["ghost", "no_such_module", "1", "ghost"]]
    data["fingerprint"] = "from another environment"
    cache.write_text(json.dumps(data))
    assert _listed() == expected


def test_an_empty_cache_dir_keeps_nothing_and_an_unwritable_one_is_no_error(
    install: Install, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install("first", PLUGIN.format(name="first-reranker"))
    monkeypatch.setenv("RANKSEAM_CACHE_DIR", "")
    assert cache_file() is None
    assert "first" in _listed()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("RANKSEAM_CACHE_DIR", str(blocked / "cache"))  # cannot be created
    assert "first" in _listed()


def test_an_entry_point_loads_the_attribute_it_names() -> None:
    ep = FoundEntryPoint("x", "rankseam.entry_points:FoundEntryPoint.load", None, None)
    assert ep.load() is FoundEntryPoint.load
    assert FoundEntryPoint("x", "rankseam.entry_points", None, None).load().__name__ == (
        "rankseam.entry_points"
    )
    with pytest.raises(ValueError, match="malformed value"):
        FoundEntryPoint("x", "not a value!", None, None).load()
