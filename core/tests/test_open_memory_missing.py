"""``open_memory`` on a path with no store yet (docs/store.md, "Opening a store"): created
as sqlite3.connect creates a file; a name close to a store beside it (the typo case) is
created with a ``UserWarning`` naming both paths; ``create=True`` creates without that check;
``create=False`` refuses, naming the path."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

import rankseam
from rankseam.errors import ConfigurationError


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder holding one store, memories.sqlite3, with one memory."""
    with rankseam.open_memory(tmp_path / "memories.sqlite3", create=True) as memory:
        memory.add("we had pasta for dinner")
    return tmp_path


def test_a_typo_of_a_stores_name_warns_with_both_paths(folder: Path) -> None:
    typo = folder / "memoreis.sqlite3"
    with pytest.warns(UserWarning) as caught:
        memory = rankseam.open_memory(typo)
    with memory:
        assert memory.search("dinner").hits == ()  # the new store is empty, as warned
    (warning,) = caught
    message = str(warning.message)
    assert str(typo) in message and str(folder / "memories.sqlite3") in message
    assert "did you mean" in message and "create=False" in message
    assert warning.filename == __file__  # it points at the caller's line, not rankseam's
    assert typo.exists()


def test_a_typo_in_a_relative_path_names_the_absolute_paths(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(folder)
    with pytest.warns(UserWarning, match="did you mean") as caught:
        rankseam.open_memory("memorie.sqlite3").close()
    assert str(folder / "memories.sqlite3") in str(caught[0].message)


@pytest.mark.parametrize(
    "name",
    [
        "notes.sqlite3",  # a new name, not close to the store beside it
        "memories.db",  # another suffix
        "memories.sqlite3",  # the store itself
    ],
)
def test_no_warning_for_a_new_name_or_an_existing_store(folder: Path, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rankseam.open_memory(folder / name).close()


def test_short_names_that_share_only_their_suffix_are_not_a_typo(tmp_path: Path) -> None:
    rankseam.open_memory(tmp_path / "c.sqlite3").close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rankseam.open_memory(tmp_path / "d.sqlite3").close()  # the names, not the suffix


def test_a_first_store_in_an_empty_folder_is_created_silently(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with rankseam.open_memory(tmp_path / "memories.sqlite3") as memory:
            memory.add("first")
    assert (tmp_path / "memories.sqlite3").exists()


def test_create_true_creates_without_the_check(folder: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rankseam.open_memory(folder / "memoreis.sqlite3", create=True).close()
    assert (folder / "memoreis.sqlite3").exists()


def test_create_false_refuses_a_missing_store_naming_it(folder: Path) -> None:
    typo = folder / "memoreis.sqlite3"
    with pytest.raises(ConfigurationError, match="no rankseam store at") as raised:
        rankseam.open_memory(typo, create=False)
    assert str(typo) in str(raised.value)
    assert not typo.exists()
    with rankseam.open_memory(folder / "memories.sqlite3", create=False) as memory:
        assert len(memory.search("dinner").hits) == 1
