"""The plugin API by role: a small top level (`rankseam.plugin`), one module per role, and the
0.1 imports still working for one release (docs/plugin-api/index.md).

The docs pages of each module are pinned by test_plugin_api_docs.py; the check that every
public name is needed by something is `.ci/plugin_api_users.py`, run here too.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import rankseam.plugin
from rankseam.search.fusion import SCALES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(rankseam.plugin.__file__).parent
ROLES = ("adapters", "channels", "decision", "embedders", "generation", "rerankers", "stores")

#: ``rankseam.plugin.__all__`` of 0.1: every one of these must still import from
#: ``rankseam.plugin`` for one release.
NAMES_0_1 = (
    "ADAPTER_KEYS DEFAULT_FUSION_SCALE DEFAULT_FUSION_WEIGHT DEFAULT_MAX_CHARS MAX_POOL MAX_TERMS "
    "RERANK_DECISION_KIND RERANK_QUESTION RERANK_ROLE SCALES STOPWORDS WRITE_GATE_DECISION_KIND "
    "WRITE_GATE_QUESTION WRITE_GATE_ROLE AssemblyConfig BatchCounts BatchWriter BulkReader "
    "BulkRevision BulkWriter CandidateSource CandidateSourceRegister CandidateViews "
    "ConcurrentReader DecisionBackend DecisionBackendRegister DecisionFailurePolicy "
    "DecisionOutcome DecisionRequest DecisionResult Embedder EmbedderDescriptor EmbedderRegister "
    "FactoryContext GenerationBackend GenerationBackendRegister GenerationRequest "
    "GenerationResult Identities ImportanceReader LexicalQuery LexicalReader MemoryHead "
    "MemoryKey MemoryNotFoundError MemoryRows OptionError PageFetch PendingText PreparedRecord "
    "RerankedBatch Reranker RerankerRegister RevisionDigest RevisionRow Role ScoreSpec ScoredKey "
    "ScoredKeys SourceRequest SpaceRow Store StoreCounts StoreReader StoreRegister StoreTarget "
    "StoredMemory VectorItem VectorReader Vectors WriteOrder WritePlan checked_result "
    "hits_metadata hookimpl is_int is_real lazy_exports make_candidates memory_pages "
    "normalize_ranks option parse_options parse_output pending_pages plan_write query_terms "
    "rerank_request reranked_items reranker_arguments resolve_env_refs result_score "
    "search_arguments store_stats thaw unwrap upstream_scores validate_output write_gate_request"
).split()

#: The names of 0.1 that left the plugin API (no plugin needed them), with their internal home.
LEFT = {
    "ADAPTER_KEYS": "rankseam.adapters",
    "BatchCounts": "rankseam.store.records",
    "SCALES": "rankseam.search.fusion",
    "WRITE_GATE_DECISION_KIND": "rankseam.decision",
    "WRITE_GATE_QUESTION": "rankseam.decision",
    "is_real": "rankseam.checks",
    "plan_write": "rankseam.store.records",
    "resolve_env_refs": "rankseam.options",
}


def _role(name: str) -> ModuleType:
    return importlib.import_module(f"rankseam.plugin.{name}")


def _home(name: str) -> str | None:
    """The role module whose ``__all__`` holds ``name``, or None."""
    homes = [role for role in ROLES if name in _role(role).__all__]
    assert len(homes) <= 1, f"{name} is public in {homes}: one name, one module"
    return homes[0] if homes else None


def test_the_top_level_holds_at_most_20_names() -> None:
    assert len(rankseam.plugin.__all__) <= 20, rankseam.plugin.__all__
    assert len(set(rankseam.plugin.__all__)) == len(rankseam.plugin.__all__)
    for name in rankseam.plugin.__all__:
        assert getattr(rankseam.plugin, name) is not None


def test_the_role_modules_are_the_ones_documented() -> None:
    found = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__")
    assert found == sorted(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_a_role_module_only_re_exports(role: str) -> None:
    """A docstring, imports and ``__all__``: no logic, nothing defined there."""
    tree = ast.parse((PACKAGE / f"{role}.py").read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"rankseam.plugin.{role} needs a docstring"
    for node in tree.body[1:]:
        if isinstance(node, ast.ImportFrom):
            assert node.module == "__future__" or node.module.startswith("rankseam."), node.module
            assert not (node.module or "").startswith("rankseam.plugin"), "import from the home"
            continue
        assert isinstance(node, ast.Assign), f"{role}.py line {node.lineno}: only re-exports"
        assert [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]
    module = _role(role)
    imported = {k for k, v in vars(module).items() if not k.startswith("_") and k != "annotations"}
    assert sorted(module.__all__) == sorted(imported), "export every name it imports, once"


@pytest.mark.parametrize("role", ROLES)
def test_no_name_is_public_twice(role: str) -> None:
    for name in _role(role).__all__:
        assert name not in rankseam.plugin.__all__, f"{name}: the top level and {role}"
        assert _home(name) == role


@pytest.mark.parametrize("name", NAMES_0_1)
def test_every_name_of_0_1_still_imports_from_rankseam_plugin(name: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(rankseam.plugin, name)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    if name in rankseam.plugin.__all__:
        assert not messages, f"{name} is public at the top level: no warning"
        return
    assert len(messages) == 1, f"rankseam.plugin.{name} must warn once, got {messages}"
    home = _home(name)
    if home is not None:
        assert f"rankseam.plugin.{home}.{name}" in messages[0]
        assert value is getattr(_role(home), name)
    else:
        assert name in LEFT, f"{name} left rankseam.plugin without a home: list it in LEFT"
        assert "no longer part of the plugin API" in messages[0]
        assert LEFT[name] in messages[0]
        assert value is getattr(importlib.import_module(LEFT[name]), name)


def test_an_old_import_statement_warns_where_it_is_written() -> None:
    with pytest.warns(DeprecationWarning, match=r"rankseam\.plugin\.stores\.StoreTarget") as got:
        exec("from rankseam.plugin import StoreTarget", {})  # the statement a plugin writes
    assert got[0].filename == "<string>"  # stacklevel: the importing line, not rankseam's


def test_the_left_names_are_public_nowhere() -> None:
    for name in LEFT:
        assert name not in rankseam.plugin.__all__ and _home(name) is None


@pytest.mark.parametrize(
    ("old", "home"),
    [("FailurePolicy", "rankseam.plugin.decision"), ("check_options", "")],
)
def test_the_older_deprecated_aliases_still_work(old: str, home: str) -> None:
    with pytest.warns(DeprecationWarning, match=home or "options class"):
        assert callable(getattr(rankseam.plugin, old))


def test_a_role_module_is_an_attribute_of_the_package() -> None:
    assert rankseam.plugin.stores is importlib.import_module("rankseam.plugin.stores")
    assert set(ROLES) <= set(dir(rankseam.plugin))
    with pytest.raises(AttributeError, match="no attribute 'Nonesuch'"):
        _ = rankseam.plugin.Nonesuch


SCRIPT = ROOT / ".ci" / "plugin_api_users.py"


@pytest.mark.skipif(
    not (SCRIPT.exists() and (ROOT / "plugins").is_dir()),
    reason="needs the rankseam source tree (.ci/, plugins/) next to core/",
)
def test_every_public_name_is_needed_by_something() -> None:
    """A plugin, an in-tree plugin, the kit, an example or a docs block imports it, it is a
    role's contract, or it is in the signature of a name that is needed."""
    spec = importlib.util.spec_from_file_location("plugin_api_users", SCRIPT)
    assert spec is not None and spec.loader is not None
    users = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(users)
    names = users.surface()
    assert set(names) == set(rankseam.plugin.__all__).union(
        *(_role(role).__all__ for role in ROLES)
    )
    why = users.needed(ROOT)
    unused = sorted(set(names) - set(why))
    assert not unused, f"{unused} are public but nothing needs them (python {SCRIPT})"
    assert why["Vectors"] == "in the signature of Store"  # no plugin imports it
    # the check can fail: made public again, a name that left the API is needed by nothing
    users.surface = lambda: {**names, "SCALES": ("rankseam.search.fusion", SCALES)}
    assert "SCALES" not in users.needed(ROOT)
