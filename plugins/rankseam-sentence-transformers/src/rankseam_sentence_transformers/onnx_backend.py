"""The ONNX Runtime path: a local, one-time export of the model, and a runtime that uses it.

The export runs once per model revision, offline, from the model's own files: the
sentence-transformers pipeline (transformer, pooling, and normalisation when the model has
it) is traced with torch into one ONNX graph, fused with ONNX Runtime's transformer optimizer,
and, for ``quantize``, dynamically quantised to int8 (per-channel weights). The files go to
``<cache_dir>/<model name>-<revision>/`` (``model.onnx``, ``model-int8.onnx``); a later
process finds them there and never imports torch for encoding. Writes are atomic (a
temporary file, then a rename), so two processes exporting at once both end with a whole
file.

Encoding needs only ``onnxruntime``, ``tokenizers`` (the model's ``tokenizer.json``) and
numpy. The fp32 graph computes the torch backend's vectors to within 1e-5 (float rounding;
tests/test_onnx.py checks it), so it shares the torch backend's vector space. The int8 graph
does not: its vectors are a space of their own (docs/plugins/sentence-transformers.md).
Dynamic quantisation scales activations over the whole batch, so int8 encodes one text at a
time: a vector never depends on what else was encoded with it. ``workers`` threads run such
single-text encodes at once (ONNX Runtime releases the GIL), each text still alone in its run,
so the vectors are exactly those of one at a time. Texts far longer than ``max_seq_length`` are
tokenized from a prefix cut at a word boundary when the prefix alone already overflows (the
kept tokens are then those of the whole text; otherwise the whole text is tokenized).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from rankseam.errors import ConfigurationError
from rankseam_sentence_transformers.model import (
    PREFIX_CHARS_PER_TOKEN,
    WORD_SPLITTING,
    ModelFiles,
    prefix_cuts,
)

__all__ = ["CACHE_ENV", "OnnxModel", "default_cache_dir", "export_onnx", "onnx_available"]

log = logging.getLogger("rankseam_sentence_transformers")

_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
#: Bump when the exported graph changes for the same model files (a new file name follows).
_EXPORT_FORMAT = 1


#: The environment variable that moves the default export folder.
CACHE_ENV = "RANKSEAM_MODEL_CACHE"


def default_cache_dir() -> Path:
    """Where exports go unless ``cache_dir`` says otherwise: ``$RANKSEAM_MODEL_CACHE`` when
    set, else ``rankseam/models`` in the platform's per-user data folder, beside rankseam's
    default store."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "rankseam" / "models"


def onnx_available() -> bool:
    """Is ONNX Runtime importable (the ``onnx`` extra)?"""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def _require_onnx() -> None:
    if not onnx_available():
        raise ConfigurationError(
            "backend 'onnx' needs ONNX Runtime: pip install 'rankseam-sentence-transformers[onnx]' "
            "(or use backend = 'torch')"
        )


def _export_dir(files: ModelFiles, cache_dir: Path) -> Path:
    return cache_dir / f"{files.name}-{files.revision.removeprefix('sha256:')}"


def _atomic_target(target: Path) -> Path:
    return target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def _trace(files: ModelFiles, target: Path) -> None:
    """Trace the sentence-transformers pipeline into ``target`` (fp32, fused)."""
    import torch
    from sentence_transformers import SentenceTransformer

    from rankseam_sentence_transformers.model import quiet_loading

    with quiet_loading():
        model = SentenceTransformer(
            str(files.path),
            device="cpu",
            local_files_only=True,
            trust_remote_code=False,
            model_kwargs={"attn_implementation": "eager"},  # a graph ORT's optimizer can fuse
        ).eval()
    features = model.tokenize(["an example sentence", "a second, longer example sentence"])
    names = [name for name in _INPUTS if name in features]

    class Pipeline(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: Any) -> Any:
            return self.model(dict(zip(names, tensors, strict=True)))["sentence_embedding"]

    raw = _atomic_target(target.with_suffix(".raw.onnx"))
    axes = {name: {0: "batch", 1: "sequence"} for name in names}
    # The tracer warns about shape checks it turns into constants; they hold for every input
    # this runtime feeds (one attention mask per input, no cache), and tests/test_onnx.py
    # compares the graph's vectors with torch's over texts of many lengths.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            Pipeline().eval(),
            tuple(features[name] for name in names),
            str(raw),
            dynamo=False,
            input_names=names,
            output_names=["sentence_embedding"],
            dynamic_axes={**axes, "sentence_embedding": {0: "batch"}},
            opset_version=17,
        )
    try:
        config = json.loads((files.path / "config.json").read_text(encoding="utf-8"))
        heads, hidden = int(config.get("num_attention_heads", 0)), int(config.get("hidden_size", 0))
        from onnxruntime.transformers import optimizer

        fused = optimizer.optimize_model(
            str(raw), model_type="bert", num_heads=heads, hidden_size=hidden, opt_level=1
        )
        tmp = _atomic_target(target)
        fused.save_model_to_file(str(tmp))
        os.replace(tmp, target)
    finally:
        raw.unlink(missing_ok=True)


def _quantize(source: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    tmp = _atomic_target(target)
    quantize_dynamic(
        str(source),
        str(tmp),
        weight_type=QuantType.QInt8,
        per_channel=True,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    os.replace(tmp, target)


def export_onnx(files: ModelFiles, *, quantize: bool, cache_dir: Path) -> Path:
    """The exported graph for ``files`` (``model-int8.onnx`` when ``quantize``), exported now
    when the cache does not hold it yet (once; a message says so)."""
    _require_onnx()
    folder = _export_dir(files, cache_dir)
    fp32 = folder / f"model-v{_EXPORT_FORMAT}.onnx"
    target = folder / f"model-v{_EXPORT_FORMAT}-int8.onnx" if quantize else fp32
    if target.is_file():
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot create the ONNX cache folder {str(folder)!r} ({exc}); set "
            "[embedders.sentence-transformers] cache_dir (and the semantic reranker's) to a "
            "writable folder"
        ) from exc
    log.warning(
        "exporting %s to ONNX%s once, from its local files (seconds to a minute); cached in %s",
        files.name,
        " (int8)" if quantize else "",
        folder,
        extra={"event": "st.onnx.export", "model": files.name, "folder": str(folder)},
    )
    started = time.perf_counter()
    if not fp32.is_file():
        _trace(files, fp32)
    if quantize:
        _quantize(fp32, target)
    log.info(
        "ONNX export done",
        extra={
            "event": "st.onnx.exported",
            "model": files.name,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )
    return target


def _max_seq_length(files: ModelFiles) -> int:
    path = files.path / "sentence_bert_config.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("max_seq_length")
    except (OSError, ValueError):
        value = None
    return int(value) if isinstance(value, int) and value > 0 else 512


class OnnxModel:
    """An exported model in an ONNX Runtime session, with the model's own tokenizer.

    ``encode`` sorts the texts by length and runs them in batches of similar lengths (one at
    a time for int8, on ``workers`` threads at once, see the module docstring). Thread-safe
    (serialised).
    """

    def __init__(
        self,
        files: ModelFiles,
        *,
        quantize: bool,
        threads: int,
        cache_dir: Path,
        workers: int = 1,
        max_seq_length: int | None = None,
    ) -> None:
        _require_onnx()
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tokenizer_file = files.path / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise ConfigurationError(
                f"backend 'onnx' needs the model's fast tokenizer ({str(tokenizer_file)!r} is "
                "missing); save the model with a fast tokenizer, or use backend = 'torch'"
            )
        self.files = files
        self.quantize = quantize
        self.path = export_onnx(files, quantize=quantize, cache_dir=cache_dir)
        self.max_seq_length = max_seq_length or _max_seq_length(files)
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(self.max_seq_length)
        pre = type(self._tokenizer.pre_tokenizer).__name__
        self._prefix_chars = (
            self.max_seq_length * PREFIX_CHARS_PER_TOKEN if pre in WORD_SPLITTING else 0
        )
        self.workers = workers if quantize else 1
        self._pool: ThreadPoolExecutor | None = None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(self.path), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = [i.name for i in self._session.get_inputs()]
        self._lock = threading.Lock()

    def _run(self, encodings: Sequence[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        arrays = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        feeds = {name: arrays[name] for name in self._inputs}
        return np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)

    def _tokenize(self, texts: Sequence[str]) -> list[Any]:
        """The truncated encodings of ``texts``; a long text is tokenized from a prefix cut at
        a space when that prefix overflows ``max_seq_length`` (the same tokens, less work)."""
        sources, cut = prefix_cuts(texts, self._prefix_chars)
        encodings = self._tokenizer.encode_batch(sources)
        short = [i for i in cut if not encodings[i].overflowing]
        if short:
            for i, enc in zip(
                short, self._tokenizer.encode_batch([texts[i] for i in short]), strict=True
            ):
                encodings[i] = enc
        return encodings

    def encode_counted(
        self, texts: Sequence[str], *, batch_size: int, normalize: bool
    ) -> tuple[np.ndarray, int]:
        """The vectors of ``texts`` and the number of tokens encoded."""
        with self._lock:
            encodings = self._tokenize(texts)
            size = 1 if self.quantize else batch_size
            order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
            out = np.empty((len(texts), self.files.dimensions), dtype=np.float32)
            if size == 1 and self.workers > 1 and len(texts) > 1:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self.workers, "rankseam-onnx")
                runs = self._pool.map(lambda i: self._run([encodings[i]]), order)
                for i, vector in zip(order, runs, strict=True):
                    out[i] = vector[0]
            else:
                for start in range(0, len(order), size):
                    rows = order[start : start + size]
                    out[rows] = self._run([encodings[i] for i in rows])
        if normalize:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.where(norms > 0, norms, 1.0)
        return out, sum(len(e.ids) for e in encodings)

    def encode(self, texts: Sequence[str], *, batch_size: int, normalize: bool) -> np.ndarray:
        return self.encode_counted(texts, batch_size=batch_size, normalize=normalize)[0]

    def count_tokens(self, texts: Sequence[str]) -> int:
        with self._lock:
            return sum(len(e.ids) for e in self._tokenize(texts))
