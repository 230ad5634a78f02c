"""`rankseam plugins` lists the integration, which implements no hook; importing it does not
import LlamaIndex."""

from __future__ import annotations

from rankseam.testing import assert_integration


def test_listed_and_imports_no_llamaindex() -> None:
    assert_integration(
        "llamaindex", distribution="rankseam-llamaindex", framework="llama_index", hooks=[]
    )
