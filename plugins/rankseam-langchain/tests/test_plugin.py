"""`rankseam plugins` lists the integration with its one hook (the ``langchain`` embedder);
importing it does not import LangChain."""

from __future__ import annotations

import pytest

from rankseam.testing import assert_integration


def test_listed_and_imports_no_langchain() -> None:
    assert_integration(
        "langchain",
        distribution="rankseam-langchain",
        framework="langchain",
        hooks=["register_embedders"],
    )


def test_the_hooks_are_checked_when_named() -> None:
    with pytest.raises(AssertionError, match=r"implements the hooks \['register_embedders'\]"):
        assert_integration(
            "langchain", distribution="rankseam-langchain", framework="langchain", hooks=[]
        )
