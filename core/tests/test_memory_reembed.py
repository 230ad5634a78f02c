"""Re-embedding (docs/store.md, "Re-embedding"): slices with ``max_memories`` / ``--max``
continue where they stopped, progress, the switch, argument checks. The store contract's
re-embedding tests (a killed run resumes; beside writes and searches) run on every store in
test_store_contract.py."""

from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from click.testing import CliRunner

from rankseam import ValidationError, open_memory
from rankseam.cli import cli
from rankseam.memory import ReembedProgress

OTHER = {"embedders": {"hashed": {"dimensions": 128}}}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def db(tmp_path):
    """A store of 45 memories written with the default hashed embedder (256 dimensions)."""
    path = str(tmp_path / "reembed.sqlite3")
    with open_memory(path) as m:
        m.ingest({"id": f"m{i:02d}", "text": f"memory {i} about a field vole"} for i in range(45))
        m.delete("m03")
    return path


def test_slices_continue_where_they_stopped_and_progress_is_reported(db):
    with open_memory(db, config=OTHER) as m:  # active: the 128-dimension space, still empty
        space = m.embedder.descriptor.key
        seen: list[ReembedProgress] = []
        first = m.reembed(batch_size=10, max_memories=25, progress=seen.append)
        assert (first.embedded, first.complete, first.switched) == (25, False, False)
        assert [(p.embedded, p.remaining) for p in seen] == [
            (0, 44),
            (10, 34),
            (20, 24),
            (25, 19),
        ]
        assert m.stats()["vectors_by_space"][space] == 25
        rest = m.reembed(batch_size=10)
        assert (rest.embedded, rest.complete) == (19, True)
        assert m.stats()["vector_coverage"] == 1.0
        assert m.reembed().embedded == 0
        # every stored vector is its own text's, whatever slice wrote it
        live = [i for i in range(45) if i != 3]
        stored = m.store.vectors_of([i + 1 for i in live], m.embedder.descriptor)
        want = m.embedder.embed([f"memory {i} about a field vole" for i in live])
        np.testing.assert_allclose(np.asarray(stored), want, atol=1e-6)
    assert ReembedProgress(space, 3, 1).fraction == 0.75
    assert ReembedProgress(space, 0, 0).fraction == 1.0


def test_switch_changes_the_active_space_of_this_memory_only(db):
    with open_memory(db) as m, open_memory(db, config=OTHER) as view:
        old, new = m.embedder.descriptor.key, view.embedder.descriptor.key
        report = m.reembed(view.embedder, switch=True)
        assert report.switched and report.complete and report.embedded == 44
        assert m.embedder.descriptor.key == new
        assert m.stats()["vector_coverage"] == 1.0
        m.add("a vole written after the switch", memory_id="after")
        assert m.stats()["vectors_by_space"] == {old: 44, new: 45}
        assert view.embedder.descriptor.key == new  # the other Memory was already there
    with open_memory(db) as again:  # opened again: the configured embedder
        assert again.embedder.descriptor.key == old
        assert again.stats()["vector_coverage"] == pytest.approx(44 / 45, abs=1e-6)
        # switching to the space that is already active switches nothing
        assert again.reembed(switch=True).switched is False


def test_bad_arguments_are_refused_before_anything_is_embedded(db):
    with open_memory(db, config=OTHER) as m:
        for kwargs in ({"batch_size": 0}, {"max_memories": 0}, {"max_memories": 2.5}):
            with pytest.raises(ValidationError):
                m.reembed(**kwargs)
        assert m.stats()["vectors_by_space"].get(m.embedder.descriptor.key, 0) == 0


def test_cli_max_then_resume_json(db, tmp_path):
    cfg = tmp_path / "rankseam.toml"
    cfg.write_text("[embedders.hashed]\ndimensions = 128\n")
    runner = CliRunner()
    args = ["reembed", "--db", db, "--config", str(cfg), "--batch-size", "10"]
    out = runner.invoke(cli, [*args, "--max", "15", "--no-progress"])
    assert out.exit_code == 0, out.output
    assert "embedded 15 memories into hashed" in out.output
    assert "stopped at --max 15: 15 of 44 live memories" in out.output
    out = runner.invoke(cli, [*args, "--json", "--no-progress"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["embedded"] == 29 and report["complete"] is True
    assert (report["vectors"], report["memories"]) == (44, 44)
    with open_memory(db, config=OTHER) as m:
        vectors = m.store.vectors_of(list(range(1, 46)), m.embedder.descriptor)
        assert sum(v is not None for v in vectors) == 44  # all but the deleted m03
        assert all(np.isclose(np.linalg.norm(v), 1.0) for v in vectors if v is not None)


def test_a_progress_callback_may_write_through_the_same_memory(db):
    with open_memory(db) as m, open_memory(db, config=OTHER) as view:
        new = view.embedder
        added: list[str] = []

        def progress(p: ReembedProgress) -> None:
            mid = f"from-progress-{len(added)}"
            m.add(f"a vole noted while re-embedding, {p.embedded} done", memory_id=mid)
            added.append(mid)

        done: list[object] = []
        runner = threading.Thread(
            target=lambda: done.append(
                m.reembed(new, batch_size=10, progress=progress, switch=True)
            )
        )
        runner.start()
        runner.join(300)  # a deadlock never ends; 300 s is far beyond any machine's need
        assert not runner.is_alive(), "the re-embed deadlocked on its own progress callback"
        assert done and done[0].switched  # type: ignore[attr-defined]
        assert len(added) >= 6  # the first tick, 5 pages, the last tick
        assert all(m.get(mid).ref.revision == 1 for mid in added)
        assert m.stats()["vector_coverage"] == 1.0
