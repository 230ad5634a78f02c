"""Loading a ranker of the rerankers library, once per process and configuration.

The library (and with it torch and transformers) is imported here, inside :func:`load_ranker`,
never when the plugin is imported or registered. A loaded ranker is kept per configuration
(model, type, device, ...) for the life of the process: ``Memory.search(reranker="rerankers",
reranker_options=...)`` builds a reranker per call, and each build finds the model already
loaded. Calls into one loaded ranker are serialised (tokenizers are not safe to share between
threads). The library ``print``s as it loads; that text goes to this module's debug log, not
to the user's terminal (whose stdout may carry JSON).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from rankseam.errors import ConfigurationError
from rankseam_rerankers.options import RerankersOptions

__all__ = ["DETERMINISTIC_RANKERS", "LoadedRanker", "load_ranker"]

log = logging.getLogger("rankseam_rerankers")

#: Library ranker classes that compute the same scores for the same input (local models).
#: Hosted APIs and LLM rankers are not assumed to.
DETERMINISTIC_RANKERS = frozenset(
    {
        "TransformerRanker",
        "T5Ranker",
        "ColBERTRanker",
        "FlashRankRanker",
        "LLMLayerWiseRanker",
        "MxBaiV2Ranker",
        "PyLateRanker",
        "UPRRanker",
        "MonoVLMRanker",
    }
)


class LoadedRanker:
    """One library ranker and the lock that serialises calls into it."""

    def __init__(self, ranker: Any, library_version: str) -> None:
        self.ranker = ranker
        self.kind = type(ranker).__name__
        self.library_version = library_version
        self.lock = threading.Lock()

    def rank(self, query: str, texts: list[str]) -> Any:
        """The library's ranked results for ``texts``; document ``i`` has ``doc_id == i``."""
        with self.lock:
            return self.ranker.rank(query, texts, doc_ids=list(range(len(texts))))


@contextlib.contextmanager
def _quiet_library() -> Iterator[io.StringIO]:
    """Capture the library's prints, and keep transformers' progress bars and deprecation
    chatter off the terminal while a model loads; the user's settings come back afterwards."""
    printed = io.StringIO()
    hf_logging: Any = None
    with contextlib.suppress(ImportError):  # a model type that does not use transformers
        hf_logging = importlib.import_module("transformers.utils.logging")
    bars = verbosity = None
    if hf_logging is not None:
        bars = hf_logging.is_progress_bar_enabled()
        verbosity = hf_logging.get_verbosity()
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(printed):
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            yield printed
    finally:
        if hf_logging is not None:
            if bars:
                hf_logging.enable_progress_bar()
            hf_logging.set_verbosity(verbosity)
        if printed.getvalue().strip():
            log.debug("rerankers said: %s", printed.getvalue().strip())


def _construct(options: RerankersOptions) -> LoadedRanker:
    try:
        import rerankers
        from rerankers import Reranker
    except ImportError as exc:
        raise ConfigurationError(
            f"the rerankers library cannot be imported ({exc}); install it with "
            "pip install 'rankseam-rerankers' (CPU torch first: see docs/plugins/rerankers.md)"
        ) from exc
    what = f"model {options.model!r}" + (
        f" (model_type {options.model_type!r})" if options.model_type else ""
    )
    with _quiet_library() as printed:
        try:
            ranker = Reranker(options.model, **options.library_kwargs())
        except TypeError as exc:
            raise ConfigurationError(
                f"rerankers could not build {what}: {exc}. Some options (batch_size, device, "
                "dtype, max_length, api_key, url) apply only to some model types; remove the ones "
                "this model type does not take"
            ) from exc
        except Exception as exc:
            raise ConfigurationError(
                f"rerankers could not load {what}: {type(exc).__name__}: {exc}. Give a local "
                "directory the model was saved to, or a hub name that can be downloaded (set "
                "local_files_only = true to forbid downloads), and a model_type the library "
                "knows (e.g. 'cross-encoder', 't5', 'colbert', 'flashrank')"
            ) from exc
    if ranker is None:  # the library's answer when a model type's dependencies are missing
        said = " ".join(printed.getvalue().split())
        raise ConfigurationError(
            f"rerankers has no ranker for {what} in this environment: {said or 'no detail'}"
        )
    return LoadedRanker(ranker, str(getattr(rerankers, "__version__", "unknown")))


_CACHE: dict[tuple[Any, ...], LoadedRanker] = {}
_CACHE_LOCK = threading.Lock()


def load_ranker(options: RerankersOptions) -> LoadedRanker:
    """The process-wide loaded ranker for ``options`` (loaded on the first request)."""
    key = options.cache_key()
    with _CACHE_LOCK:
        loaded = _CACHE.get(key)
        if loaded is None:
            log.info(
                "loading a rerankers model",
                extra={"event": "rerankers.model.load", "model": options.model},
            )
            loaded = _construct(options)
            _CACHE[key] = loaded
        return loaded
