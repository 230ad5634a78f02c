"""register(..., options=...) records the option names a component accepts."""

from __future__ import annotations

import pytest

from rankseam.errors import PluginError
from rankseam.registry import Registry, RerankerRegister


def factory(options, context):  # type: ignore[no-untyped-def]
    return None


def test_declared_options_are_recorded_and_undeclared_are_none() -> None:
    registry = Registry()
    register = RerankerRegister(registry, "plugin-a")
    register("declared", factory, options=["lambda", "relevance"])
    register("none-taken", factory, options=())
    register("undeclared", factory)
    assert registry.get("reranker", "declared").options == ("lambda", "relevance")
    assert registry.get("reranker", "none-taken").options == ()
    assert registry.get("reranker", "undeclared").options is None


@pytest.mark.parametrize("bad", [[1], ["ok", ""], [None]])
def test_options_that_are_not_names_are_refused(bad: list[object]) -> None:
    register = RerankerRegister(Registry(), "plugin-a")
    with pytest.raises(PluginError, match="option names as strings"):
        register("x", factory, options=bad)  # type: ignore[arg-type]
