"""`rankseam plugins` lists the integration; importing it does not import Haystack."""

from __future__ import annotations

from rankseam.testing import assert_integration


def test_listed_and_imports_no_haystack() -> None:
    assert_integration("haystack", distribution="rankseam-haystack", framework="haystack")
