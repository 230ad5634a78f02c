"""The options of the ``rerankers`` reranker, checked before anything is loaded.

``model`` and ``model_type`` are the rerankers library's own words (``Reranker(model,
model_type=...)``); the rest are the knobs that matter in a search: batch size, device, dtype,
max length, and for hosted APIs the key and URL. Every value is checked here, with an error
that says how to fix it; nothing is imported or loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from rankseam.errors import ConfigurationError
from rankseam.plugin import check_options, is_int, resolve_env_refs

__all__ = ["DTYPES", "OPTION_NAMES", "RerankersOptions"]

_WHERE = "reranker 'rerankers'"
#: dtypes the library understands by name (anything else it silently treats as float32).
DTYPES = ("float32", "float16", "fp16", "bfloat16", "bf16")
OPTION_NAMES = (
    "model",
    "model_type",
    "lang",
    "batch_size",
    "device",
    "dtype",
    "max_length",
    "local_files_only",
    "api_key",
    "url",
    "deterministic",
)
_MAX_BATCH = 4096


def _optional_str(options: Mapping[str, Any], name: str, hint: str) -> str | None:
    value = options.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(
            f"{_WHERE}: {name} must be a non-empty string ({hint}), got {value!r}"
        )
    return value.strip()


def _optional_int(options: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = options.get(name)
    if value is None:
        return None
    if not is_int(value) or not low <= value <= high:
        raise ConfigurationError(
            f"{_WHERE}: {name} must be an integer in {low}..{high}, got {value!r}"
        )
    return value


def _optional_bool(options: Mapping[str, Any], name: str) -> bool | None:
    value = options.get(name)
    if value is None or isinstance(value, bool):
        return value
    raise ConfigurationError(f"{_WHERE}: {name} must be true or false, got {value!r}")


def _model(value: object) -> str:
    if value is None:
        raise ConfigurationError(
            f"{_WHERE} needs the option model: a local model directory or a model name as the "
            "rerankers library takes it, e.g. --rerankers-model /models/ms-marco-MiniLM-L-6-v2 "
            "or [rerankers.rerankers] model = 'cross-encoder/ms-marco-MiniLM-L-6-v2'"
        )
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{_WHERE}: model must be a non-empty string, got {value!r}")
    model = value.strip()
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    if model.startswith(("/", "./", "../", "~")) or "\\" in model:
        raise ConfigurationError(
            f"{_WHERE}: model {model!r} looks like a path but is not a directory; give the "
            "directory a model was saved to (save_pretrained), or a hub name such as "
            "'cross-encoder/ms-marco-MiniLM-L-6-v2'"
        )
    return model  # a hub name or a library alias: the library resolves it when it loads


@attrs.frozen
class RerankersOptions:
    """Checked options. ``None`` means "the library's default"."""

    model: str
    model_type: str | None = None
    lang: str = "en"
    batch_size: int | None = None
    device: str | None = None
    dtype: str | None = None
    max_length: int | None = None
    local_files_only: bool = False
    api_key: str | None = attrs.field(default=None, repr=False)
    url: str | None = None
    deterministic: bool | None = None

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RerankersOptions:
        check_options(_WHERE, options, OPTION_NAMES)
        dtype = _optional_str(options, "dtype", f"one of {', '.join(DTYPES)}")
        if dtype is not None and dtype not in DTYPES:
            raise ConfigurationError(
                f"{_WHERE}: dtype must be one of {', '.join(DTYPES)}, got {dtype!r}"
            )
        api_key = resolve_env_refs(options.get("api_key"), what=f"{_WHERE} api_key")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise ConfigurationError(
                f"{_WHERE}: api_key must be a string or {{'$env': 'VARIABLE'}} (read from the "
                "environment), got a value of type " + type(api_key).__name__
            )
        return cls(
            model=_model(options.get("model")),
            model_type=_optional_str(
                options, "model_type", "as the rerankers library names it, e.g. 'cross-encoder'"
            ),
            lang=_optional_str(options, "lang", "a language code such as 'en'") or "en",
            batch_size=_optional_int(options, "batch_size", 1, _MAX_BATCH),
            device=_optional_str(options, "device", "'cpu', 'cuda', 'cuda:N' or 'mps'"),
            dtype=dtype,
            max_length=_optional_int(options, "max_length", 8, 1_000_000),
            local_files_only=bool(_optional_bool(options, "local_files_only")),
            api_key=api_key,
            url=_optional_str(options, "url", "the rerank endpoint of a hosted API"),
            deterministic=_optional_bool(options, "deterministic"),
        )

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
