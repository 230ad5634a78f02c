"""The integration is listed by `rankseam plugins` (found through its entry point) and
importing it does not import LlamaIndex."""

from __future__ import annotations

from rankseam.testing import assert_integration


def test_listed_by_rankseam_plugins_and_imports_no_llamaindex() -> None:
    assert_integration(
        "llamaindex",
        distribution="rankseam-llamaindex",
        package="rankseam_llamaindex",
        framework="llama_index",
    )
