"""The listwise reranker (with the local backend) passes the reranker conformance kit,
both in one-call mode and in sliding-window mode."""

from __future__ import annotations

from rankseam.testing import RerankerContract
from rankseam_listwise import ListwiseOptions, ListwiseReranker, LocalGenerationBackend


class TestListwiseOneCall(RerankerContract):
    capabilities = frozenset({"needs_backend"})

    def make_reranker(self) -> ListwiseReranker:
        options = ListwiseOptions.from_mapping({"backend": "local", "window": 200, "stride": 100})
        return ListwiseReranker(LocalGenerationBackend(), options)


class TestListwiseSlidingWindows(RerankerContract):
    capabilities = frozenset({"needs_backend"})

    def make_reranker(self) -> ListwiseReranker:
        options = ListwiseOptions.from_mapping({"backend": "local", "window": 6, "stride": 3})
        return ListwiseReranker(LocalGenerationBackend(), options)
