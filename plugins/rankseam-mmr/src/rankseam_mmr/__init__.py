"""rankseam-mmr: a maximal marginal relevance reranker for rankseam.

Registers the reranker ``mmr``. Options (``[rerankers.mmr]`` or ``--mmr-<option>``):

- ``lambda`` (number in [0, 1], default :data:`DEFAULT_LAMBDA`): 1 = pure relevance,
  0 = pure diversity.
- ``relevance`` (``"coarse"`` default, or ``"query_cosine"``): what "relevant" means.

See docs/plugins/mmr.md for the formula, the edge cases and the measured evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rankseam.errors import ConfigurationError
from rankseam.plugin import RerankerRegister, hookimpl
from rankseam_mmr.reranker import (
    DEFAULT_LAMBDA,
    MAX_CANDIDATES,
    POLICY_ID,
    RELEVANCE_CHOICES,
    MMROptions,
    MMRReranker,
)

__all__ = [
    "DEFAULT_LAMBDA",
    "MAX_CANDIDATES",
    "POLICY_ID",
    "RELEVANCE_CHOICES",
    "MMROptions",
    "MMRReranker",
    "make_reranker",
    "register_rerankers",
]


def make_reranker(options: MMROptions | Mapping[str, Any], context: Any) -> MMRReranker:
    """Factory: ``options`` as the host checked them (or a table, checked here); for
    ``relevance = "query_cosine"`` (and only then) build the configured embedder from
    ``context`` to embed the query."""
    opts = options if isinstance(options, MMROptions) else MMROptions.from_mapping(options)
    embedder = None
    if opts.relevance == "query_cosine":
        name = context.config.embedder
        embedder = context.build("embedder", name)
        if not callable(getattr(embedder, "embed", None)):
            raise ConfigurationError(
                f"mmr relevance 'query_cosine' needs an embedder with embed(texts); {name!r} "
                "has none; choose another embedder or use relevance = 'coarse'"
            )
    return MMRReranker(opts, embedder)


@hookimpl
def register_rerankers(register: RerankerRegister) -> None:
    register(
        "mmr",
        make_reranker,
        summary="maximal marginal relevance over stored vectors (λ=1 relevance, λ=0 diversity)",
        options=MMROptions,
    )


#: The distribution's version (the one place it is written; pyproject.toml reads it).
__version__ = "0.1.0"
