"""The reranker inside LangChain: rankseam-langchain's RankseamCompressor runs it by name and
puts the cross-encoder's score on each returned document."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip(
    "rankseam_langchain.compressor",
    reason="needs rankseam-langchain (its nox session installs it: test-with)",
)
from langchain_core.documents import Document

from rankseam_langchain import RankseamCompressor

QUERY = "when is the conference in lisbon"


def test_the_compressor_returns_the_models_order_with_its_scores(tiny_model: Path) -> None:
    same = "the spare key is under the blue flowerpot"
    docs = [
        Document(page_content=same, metadata={"id": "a"}),
        Document(page_content="alice booked a flight to lisbon for the conference in may"),
        Document(page_content=same, metadata={"id": "b"}),
        Document(page_content="bob adopted a grey cat named pixel"),
    ]
    compressor = RankseamCompressor(
        reranker="rerankers",
        options={"model": str(tiny_model), "model_type": "cross-encoder"},
        top_n=4,
    )
    out = compressor.compress_documents(docs, QUERY)
    assert len(out) == 4
    positions = [d.metadata["rerank"]["coarse_rank"] for d in out]
    assert sorted(positions) == [1, 2, 3, 4]  # the two identical texts stay distinct documents
    assert {d.metadata.get("id") for d in out if d.page_content == same} == {"a", "b"}
    scores = [d.metadata["rerank"]["rerank_score"] for d in out]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
    assert out[0].metadata["rerank"]["trace"]["scores"] == [round(s, 6) for s in scores]
    assert docs[0].metadata == {"id": "a"}  # the inputs are not modified
