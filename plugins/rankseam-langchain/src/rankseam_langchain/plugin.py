"""The ``rankseam`` entry point: makes ``rankseam plugins`` list this integration, and
registers the ``langchain`` embedder (a LangChain ``Embeddings`` object as rankseam's
embedder, :mod:`rankseam_langchain.embeddings`).

It imports nothing of LangChain (the embedder is handed a LangChain object; it never imports
one), so it costs the ``rankseam`` command nothing.
"""

from __future__ import annotations

from rankseam.plugin import EmbedderRegister, hookimpl
from rankseam_langchain.embeddings import EMBEDDER, EmbeddingsOptions, make_embedder


@hookimpl
def register_embedders(register: EmbedderRegister) -> None:
    register(
        EMBEDDER,
        make_embedder,
        summary="a LangChain Embeddings object (its embed_documents), as rankseam's embedder",
        options=EmbeddingsOptions,
    )
