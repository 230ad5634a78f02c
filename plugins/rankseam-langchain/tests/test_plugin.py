"""`rankseam plugins` lists the integration; importing it does not import LangChain."""

from __future__ import annotations

from rankseam.testing import assert_integration


def test_listed_and_imports_no_langchain() -> None:
    assert_integration("langchain", distribution="rankseam-langchain", framework="langchain")
