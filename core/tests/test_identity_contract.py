"""The identity reranker passes the conformance kit; the kit's guard refuses silent skips."""

from __future__ import annotations

import pytest

from rankseam.default_plugins.identity import IdentityReranker
from rankseam.testing import RerankerContract


class TestIdentityReranker(RerankerContract):
    def make_reranker(self) -> IdentityReranker:
        return IdentityReranker()


def test_overriding_a_standard_test_is_refused() -> None:
    with pytest.raises(TypeError, match="standard contract test 'test_inputs_not_mutated'"):

        class Sneaky(RerankerContract):
            def make_reranker(self) -> IdentityReranker:
                return IdentityReranker()

            def test_inputs_not_mutated(self) -> None:
                pass


def test_deleting_a_standard_test_is_refused() -> None:
    with pytest.raises(TypeError, match="overrides or removes"):

        class Sneaky(RerankerContract):
            test_protocol_shape = None  # type: ignore[assignment]


def test_waiving_needs_a_known_test_and_a_reason() -> None:
    with pytest.raises(TypeError, match="unknown standard test"):

        class Typo(RerankerContract):
            waived_tests = {"test_no_such_thing": "because"}

    with pytest.raises(TypeError, match="needs a reason"):

        class NoReason(RerankerContract):
            waived_tests = {"test_protocol_shape": " "}


class TestWaivedIsReportedAsSkip(RerankerContract):
    waived_tests = {"test_hostile_candidate_text": "demonstrates the waiver path of the kit"}

    def make_reranker(self) -> IdentityReranker:
        return IdentityReranker()
