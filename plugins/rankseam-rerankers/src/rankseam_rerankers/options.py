"""The options of the ``rerankers`` reranker, checked before anything is loaded.

``model`` and ``model_type`` are the rerankers library's own words (``Reranker(model,
model_type=...)``); the rest are the knobs that matter in a search: batch size, device, dtype,
max length, and for hosted APIs the key and URL. Every value is checked here, with an error
that says how to fix it; nothing is imported or loaded.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from rankseam.plugin import OptionError, option, parse_options

__all__ = ["DTYPES", "RerankersOptions"]

#: dtypes the library understands by name (anything else it silently treats as float32).
Dtype = Literal["float32", "float16", "fp16", "bfloat16", "bf16"]
DTYPES: tuple[str, ...] = typing.get_args(Dtype)
_MAX_BATCH = 4096


def _model(model: str) -> str:
    """A local model directory, made absolute; or a hub name or library alias as given."""
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if model.startswith(("/", "./", "../", "~")) or "\\" in model:
        raise OptionError(
            "model",
            f"{model!r} looks like a path but is not a directory; give the directory a model "
            "was saved to (save_pretrained), or a hub name such as "
            "'cross-encoder/ms-marco-MiniLM-L-6-v2'",
        )
    return model  # a hub name or a library alias: the library resolves it when it loads


@attrs.frozen
class RerankersOptions:
    """The options of the ``rerankers`` reranker (``[rerankers.rerankers]``,
    ``--rerankers-<option>``). ``None`` means "the library's default"."""

    model: str = option(
        nonempty=True,
        converter=_model,
        help="a local model directory or a model name as the rerankers library takes it, e.g. "
        "'cross-encoder/ms-marco-MiniLM-L-6-v2'",
    )
    model_type: str | None = option(
        None, nonempty=True, help="as the rerankers library names it, e.g. 'cross-encoder'"
    )
    lang: str = option("en", nonempty=True, help="a language code such as 'en'")
    batch_size: int | None = option(None, ge=1, le=_MAX_BATCH, help="texts per model batch")
    device: str | None = option(None, nonempty=True, help="'cpu', 'cuda', 'cuda:N' or 'mps'")
    dtype: Dtype | None = option(None, help="the model's float type")
    max_length: int | None = option(
        None, ge=8, le=1_000_000, help="tokens per query and text (longer is cut)"
    )
    local_files_only: bool = option(False, help="never download: load from local files only")
    api_key: str | None = option(
        None,
        nonempty=True,
        env=True,
        secret=True,
        help='the key of a hosted API; {"$env" = "NAME"} reads it from the environment',
    )
    url: str | None = option(None, nonempty=True, help="the rerank endpoint of a hosted API")
    deterministic: bool | None = option(
        None, help="whether the model answers the same for the same input (default: by type)"
    )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RerankersOptions:
        """The options of the ``[rerankers.rerankers]`` table ``options``, checked; nothing is
        imported or loaded."""
        return parse_options(cls, options, "rerankers.rerankers")

    def library_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``rerankers.Reranker`` beyond the model name (only the ones
        set, so each model type keeps its own defaults)."""
        kwargs: dict[str, Any] = {"lang": self.lang, "verbose": 0}
        if self.model_type is not None:
            kwargs["model_type"] = self.model_type
        for name in ("batch_size", "device", "dtype", "api_key", "url"):
            value = getattr(self, name)
            if value is not None:
                kwargs[name] = value
        tokenizer: dict[str, Any] = {}
        model: dict[str, Any] = {}
        if self.max_length is not None:
            tokenizer["model_max_length"] = self.max_length
        if self.local_files_only:
            tokenizer["local_files_only"] = model["local_files_only"] = True
        if tokenizer:
            kwargs["tokenizer_kwargs"] = tokenizer
        if model:
            kwargs["model_kwargs"] = model
        return kwargs

    def cache_key(self) -> tuple[Any, ...]:
        """What makes two loads the same loaded model (deterministic is not one of them)."""
        return (
            self.model,
            self.model_type,
            self.lang,
            self.batch_size,
            self.device,
            self.dtype,
            self.max_length,
            self.local_files_only,
            self.api_key,
            self.url,
        )
