"""A LangChain ``Embeddings`` object as a rankseam embedder.

:class:`LangChainEmbedder` wraps any LangChain ``Embeddings`` (OpenAI, HuggingFace, Ollama,
a fake for tests...) into rankseam's embedder protocol, so that a rankseam store embeds its
memories and queries with the model a LangChain application already uses. The plugin
registers it as the embedder ``langchain``; its options (``[embedders.langchain]``) name the
``Embeddings`` object: in code the object itself, in ``rankseam.toml`` an import path
(``"my_app.models:embeddings"``).

rankseam embeds a query and a memory with the same call, ``embed_documents``: a LangChain
model whose ``embed_query`` differs from ``embed_documents`` (one that adds a query prefix)
is used on its document side for both (the plugin README's "Known differences").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rankseam.errors import ConfigurationError
from rankseam.plugin import option
from rankseam.plugin.embedders import EmbedderDescriptor

__all__ = [
    "EMBEDDER",
    "EmbeddingsOptions",
    "LangChainEmbedder",
    "embedding_config",
    "make_embedder",
]

#: The name the plugin registers the adapter under (``open_memory(embedder="langchain")``).
EMBEDDER = "langchain"
#: The text the adapter embeds once to learn the dimensions when none are given.
_PROBE = "rankseam dimensions probe"
#: Attributes of common LangChain embeddings that name their model (the first one found that
#: holds a string joins the default space name).
_MODEL_ATTRIBUTES = ("model", "model_name", "model_id")


def _fusion_scale(_inst: object, attr: attrs.Attribute[Any], value: object) -> None:
    if value is not None and value not in ("max", "unit", "minmax"):
        raise ValueError(f"{attr.name} must be 'max', 'unit' or 'minmax', got {value!r}")


@attrs.frozen
class EmbeddingsOptions:
    """The options of the ``langchain`` embedder (``[embedders.langchain]``)."""

    embeddings: Any = option(
        help="a LangChain Embeddings object, or 'module:attribute' naming one (a class there "
        "is called with no arguments)"
    )
    name: str | None = option(
        None,
        nonempty=True,
        help="the vector space's name (default: 'langchain/' + the class and its model)",
    )
    revision: str = option("1", nonempty=True, help="bump it when the model's vectors change")
    dimensions: int | None = option(
        None, ge=1, help="the vectors' dimensions (default: embed one probe text when opening)"
    )
    fusion_weight: float | None = option(
        None, ge=0, help="the vector channel's weight in fusion (default: rankseam's, 0.5)"
    )
    fusion_scale: str | None = option(
        None,
        validator=_fusion_scale,
        help="'unit', 'minmax' (advised for semantic models) or 'max' (default: 'unit')",
    )


def _resolve(embeddings: Any) -> Any:
    """The ``Embeddings`` object the option names: the object, or what ``'module:attr'``
    imports (a class there is instantiated with no arguments)."""
    if isinstance(embeddings, str):
        module, _, attribute = embeddings.partition(":")
        if not module or not attribute:
            raise ConfigurationError(
                f"[embedders.{EMBEDDER}] embeddings must be 'module:attribute' naming a "
                f"LangChain Embeddings object, got {embeddings!r}"
            )
        try:
            found = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(
                f"[embedders.{EMBEDDER}] embeddings {embeddings!r} could not be imported "
                f"({type(exc).__name__}: {exc}); check the module path and the attribute"
            ) from None
        embeddings = found() if isinstance(found, type) else found
    if not callable(getattr(embeddings, "embed_documents", None)):
        raise ConfigurationError(
            f"[embedders.{EMBEDDER}] embeddings must be a LangChain Embeddings object (with "
            f"embed_documents), got {type(embeddings).__name__}"
        )
    return embeddings


def _space_name(embeddings: Any) -> str:
    cls = type(embeddings)
    name = f"{EMBEDDER}/{cls.__module__}.{cls.__qualname__}"
    for attribute in _MODEL_ATTRIBUTES:
        model = getattr(embeddings, attribute, None)
        if isinstance(model, str) and model:
            return f"{name}/{model}"
    return name


class LangChainEmbedder:
    """Texts -> float32 unit vectors with a LangChain ``Embeddings`` object.

    The vectors are ``embeddings.embed_documents(texts)`` scaled to unit length (rankseam
    compares vectors by cosine, which the scaling does not change; a zero vector stays
    zero). The descriptor names the space ``langchain/<module>.<class>[/<model>]`` (or
    ``name``) at ``revision``, with the dimensions given or measured once on a probe text: a
    store keeps vectors per space, so another model never mixes with these.
    """

    def __init__(
        self,
        embeddings: Any,
        *,
        name: str | None = None,
        revision: str = "1",
        dimensions: int | None = None,
        fusion_weight: float | None = None,
        fusion_scale: str | None = None,
    ) -> None:
        self.embeddings = _resolve(embeddings)
        if dimensions is None:
            dimensions = len(self.embeddings.embed_documents([_PROBE])[0])
        self.descriptor = EmbedderDescriptor(
            name=name or _space_name(self.embeddings),
            dimensions=dimensions,
            normalization="l2",
            revision=revision,
            fusion_weight=fusion_weight,
            fusion_scale=fusion_scale,
        )

    @classmethod
    def from_options(cls, options: EmbeddingsOptions) -> LangChainEmbedder:
        return cls(
            options.embeddings,
            name=options.name,
            revision=options.revision,
            dimensions=options.dimensions,
            fusion_weight=options.fusion_weight,
            fusion_scale=options.fusion_scale,
        )

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.descriptor.dimensions), dtype=np.float32)
        vectors = np.asarray(self.embeddings.embed_documents(list(texts)), dtype=np.float32)
        if vectors.ndim != 2:
            return vectors  # the host refuses the shape, naming the embedder
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # a zero vector stays zero (no direction: it scores 0 against every query)
        return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)

    def __repr__(self) -> str:
        return f"LangChainEmbedder({self.descriptor.key!r})"


def make_embedder(options: EmbeddingsOptions, context: Any) -> LangChainEmbedder:
    """Factory of the ``langchain`` embedder."""
    return LangChainEmbedder.from_options(options)


def embedding_config(
    embedding: Any, config: Mapping[str, Any] | None = None, **options: Any
) -> dict[str, Any]:
    """``config`` (a mapping of the ``rankseam.toml`` layout) with ``embedding`` as the
    ``langchain`` embedder's ``embeddings`` (beside its other ``options``), for
    ``open_memory(..., embedder="langchain", config=...)``."""
    if config is not None and not isinstance(config, Mapping):
        raise TypeError(
            "with embedding=, pass config as a mapping of the rankseam.toml layout (or use "
            f"config_file=), got {type(config).__name__}"
        )
    out = dict(config or {})
    tables = dict(out.get("embedders") or {})
    tables[EMBEDDER] = {**dict(tables.get(EMBEDDER) or {}), **options, "embeddings": embedding}
    out["embedders"] = tables
    return out
