"""The integration is listed by `rankseam plugins` (found through its entry point) and
importing it does not import LangChain."""

from __future__ import annotations

from rankseam.testing import assert_integration


def test_listed_by_rankseam_plugins_and_imports_no_langchain() -> None:
    assert_integration(
        "langchain",
        distribution="rankseam-langchain",
        package="rankseam_langchain",
        framework="langchain",
    )
