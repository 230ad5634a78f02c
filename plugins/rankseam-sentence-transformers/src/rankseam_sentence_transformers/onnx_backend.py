"""The ONNX Runtime path: a local, one-time export of the model, and a runtime that uses it.

The export runs once per model revision, offline, from the model's own files: the
sentence-transformers pipeline (transformer, pooling, and normalisation when the model has
it) is traced with torch into one ONNX graph, fused with ONNX Runtime's transformer optimizer,
and, for ``quantize``, dynamically quantised to int8 (per-channel weights). The files go to
``<cache_dir>/<model name>-<revision>/`` (``model.onnx``, ``model-int8.onnx``); a later
process finds them there and never imports torch for encoding. Writes are atomic (a
temporary file, then a rename), so two processes exporting at once both end with a whole
file.

Encoding (``onnx_runtime.OnnxEncoder``) needs only ``onnxruntime``, ``tokenizers`` (the
model's ``tokenizer.json``) and numpy. The fp32 graph computes the torch backend's vectors to
within 1e-5 (float rounding; tests/test_onnx.py checks it), so it shares the torch backend's
vector space. The int8 graph does not: its vectors are a space of their own
(docs/plugins/sentence-transformers.md). Dynamic quantisation scales activations over the
whole batch, so int8 encodes one text at a time: a vector never depends on what else was
encoded with it. ``workers`` threads run such single-text encodes at once, so the vectors are
exactly those of one at a time.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from rankseam.errors import ConfigurationError
from rankseam_sentence_transformers.model import ModelFiles
from rankseam_sentence_transformers.onnx_runtime import OnnxEncoder, onnx_available

__all__ = ["CACHE_ENV", "default_cache_dir", "export_available", "export_onnx", "open_export"]

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


def export_available() -> bool:
    """Can this process export and run the model (ONNX Runtime and onnx installed: the
    ``export`` extra; torch comes with the ``torch`` extra)?"""
    return onnx_available() and importlib.util.find_spec("onnx") is not None


def _require_onnx() -> None:
    if not export_available():
        raise ConfigurationError(
            "backend 'onnx' needs ONNX Runtime, and torch and onnx for its one-time export: pip "
            "install 'rankseam-sentence-transformers[torch,export]' (or use backend = 'torch'; "
            "for embeddings without torch, the 'minilm-int8' embedder)"
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


def open_export(
    files: ModelFiles,
    *,
    quantize: bool,
    threads: int,
    cache_dir: Path,
    workers: int = 1,
    max_seq_length: int | None = None,
) -> OnnxEncoder:
    """The model's export (exported now the first time, see :func:`export_onnx`) in an ONNX
    Runtime session with the model's own tokenizer; int8 encodes one text at a time (dynamic
    quantisation, module docstring)."""
    _require_onnx()
    return OnnxEncoder(
        export_onnx(files, quantize=quantize, cache_dir=cache_dir),
        files.path / "tokenizer.json",
        dimensions=files.dimensions,
        max_seq_length=max_seq_length or _max_seq_length(files),
        threads=threads,
        one_at_a_time=quantize,
        workers=workers,
    )
