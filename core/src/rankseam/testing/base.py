"""The base of every contract: capability flags and the guard against silent skips."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import pytest

__all__ = ["Capability", "ContractBase", "StoreContractPart"]


class Capability(enum.StrEnum):
    """The capability flags a component can declare (each contract knows some of them)."""

    #: RerankerContract: the reranker uses ``Candidate.embedding``; the kit attaches vectors.
    EMBEDDINGS = "embeddings"
    #: RerankerContract: informational; the reranker calls a model backend.
    NEEDS_BACKEND = "needs_backend"
    #: GenerationBackendContract: ``make_failure_case()`` gives a request that must fail.
    FAILURE_CASE = "failure_case"
    #: EmbedderContract: same text, same vector, across instances and batches.
    DETERMINISTIC = "deterministic"
    #: StoreContract: the store can be opened from several processes (declared by default).
    PROCESSES = "processes"


class ContractBase:
    """Base class of the conformance contracts.

    - ``capabilities``: flags the component declares (:class:`Capability` members, or their
      string values). A flag the contract does not know (``known_capabilities``) is a
      ``TypeError`` when the subclass is created. A standard test that needs a flag calls
      :meth:`require`, which skips with a message naming it.
    - ``waived_tests``: ``{"test_name": "reason"}``. The only way to not run a standard test;
      the test is then reported as skipped with the reason. Overriding, deleting or shadowing
      a standard test any other way raises ``TypeError`` when the subclass is created.
    """

    capabilities: ClassVar[frozenset[Capability]] = frozenset()
    #: The flags this contract understands (set per contract class).
    known_capabilities: ClassVar[frozenset[Capability]] = frozenset()
    waived_tests: ClassVar[Mapping[str, str]] = {}
    #: Names of the standard tests of the contract (filled per contract class).
    _standard_tests: ClassVar[dict[str, Any]] = {}
    #: Set on the contract classes themselves (not on plugin subclasses).
    _is_contract: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("_is_contract", False):
            standard: dict[str, Any] = {}
            for base in reversed(cls.__mro__[1:]):  # every contract it builds on
                standard.update(base.__dict__.get("_standard_tests", {}))
            for name, value in cls.__dict__.items():
                if name.startswith("test_") and callable(value):
                    standard[name] = value
            cls._standard_tests = standard
            return
        cls.capabilities = _checked_capabilities(cls)
        waived = dict(cls.waived_tests)
        unknown = sorted(set(waived) - set(cls._standard_tests))
        if unknown:
            raise TypeError(
                f"{cls.__name__}.waived_tests names unknown standard test(s) {unknown}; "
                f"standard tests are {sorted(cls._standard_tests)}"
            )
        for name, original in cls._standard_tests.items():
            current = getattr(cls, name, None)
            if name in waived:
                reason = waived[name]
                if not isinstance(reason, str) or not reason.strip():
                    raise TypeError(f"{cls.__name__}.waived_tests[{name!r}] needs a reason")
                setattr(cls, name, _waived(name, reason))
                continue
            if current is not original:
                raise TypeError(
                    f"{cls.__name__} overrides or removes the standard contract test {name!r}; "
                    "standard tests cannot be changed silently. To not run it, list it in "
                    f"waived_tests = {{{name!r}: 'why'}}; to test more, add a new test method."
                )

    def require(self, capability: Capability) -> None:
        """Skip the calling standard test unless the component declares ``capability``."""
        capability = Capability(capability)
        if capability not in self.capabilities:
            pytest.skip(
                f"needs capability {capability!r}, which {type(self).__name__}.capabilities "
                "does not declare"
            )


def _checked_capabilities(cls: type[ContractBase]) -> frozenset[Capability]:
    declared = cls.capabilities
    if isinstance(declared, str) or not isinstance(declared, frozenset | set | tuple | list):
        raise TypeError(
            f"{cls.__name__}.capabilities must be a frozenset of rankseam.testing.Capability "
            f"members, e.g. frozenset({{Capability.EMBEDDINGS}}), got {declared!r}"
        )
    known = cls.known_capabilities
    out = set()
    for flag in declared:
        try:
            member = Capability(flag)
        except ValueError:
            member = None
        if member is None or member not in known:
            raise TypeError(
                f"{cls.__name__}.capabilities names {flag!r}, which this contract does not know; "
                f"known capabilities: {sorted(c.value for c in known) or 'none'}. A misspelt "
                "flag would silently skip the tests that need it"
            )
        out.add(member)
    return frozenset(out)


def _waived(name: str, reason: str) -> Any:
    def test(self: Any) -> None:
        pytest.skip(f"waived by the plugin: {reason}")

    test.__name__ = name
    return test


class StoreContractPart(ContractBase):
    """A part of :class:`~rankseam.testing.StoreContract` (its reader, structure, filter, forget,
    feedback, vector-limit and re-embedding tests), which runs them all: the store's capability
    flags, and the ``memory`` its tests open (StoreContract's)."""

    _is_contract = True
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.PROCESSES})
    known_capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.PROCESSES})

    def memory(self, target: str, **overrides: Any) -> AbstractContextManager[Any]:
        raise NotImplementedError  # StoreContract's
