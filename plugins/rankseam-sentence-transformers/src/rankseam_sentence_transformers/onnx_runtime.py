"""Encoding with an ONNX graph of a sentence-transformers model: ONNX Runtime, the model's fast
tokenizer (``tokenizers``) and numpy, never torch.

Two kinds of graph run here: the plugin's own export (``onnx_backend``), whose output is the
sentence embedding, and a graph that stops at the transformer (``last_hidden_state``, one
vector per token, such as the packaged int8 graph of the ``minilm-int8`` embedder), whose
token vectors are mean-pooled over the attention mask here, as sentence-transformers' Pooling
module does for all-MiniLM-L6-v2. Normalisation (L2) is the caller's choice.

A graph quantised *dynamically* (activations scaled over the whole batch) must encode one text
at a time, or a vector would depend on what it was batched with: ``one_at_a_time``, with
``workers`` threads running such single-text encodes at once (ONNX Runtime releases the GIL),
each text still alone in its run. Other graphs batch texts of similar lengths. Texts far longer
than ``max_seq_length`` are tokenized from a prefix cut at a word boundary when the prefix
alone already overflows (the kept tokens are then those of the whole text; otherwise the whole
text is tokenized).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from rankseam.errors import ConfigurationError
from rankseam_sentence_transformers.model import (
    PREFIX_CHARS_PER_TOKEN,
    WORD_SPLITTING,
    prefix_cuts,
)

__all__ = ["OnnxEncoder", "onnx_available", "require_onnxruntime"]


def onnx_available() -> bool:
    """Is ONNX Runtime importable (the ``onnx`` extra)?"""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def require_onnxruntime(what: str) -> None:
    """Raise :class:`ConfigurationError` naming ``what`` unless ONNX Runtime is installed."""
    if not onnx_available():
        raise ConfigurationError(
            f"{what} needs ONNX Runtime: pip install 'rankseam-sentence-transformers[onnx]'"
        )


class OnnxEncoder:
    """An ONNX graph in an ONNX Runtime session, with the model's own tokenizer.

    ``encode`` sorts the texts by length and runs them in batches of similar lengths (one at
    a time with ``one_at_a_time``, on ``workers`` threads at once, see the module docstring).
    Thread-safe (serialised).
    """

    def __init__(
        self,
        graph: Path,
        tokenizer_file: Path,
        *,
        dimensions: int,
        max_seq_length: int,
        threads: int = 1,
        one_at_a_time: bool = False,
        workers: int = 1,
    ) -> None:
        require_onnxruntime("an ONNX graph")
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if not tokenizer_file.is_file():
            raise ConfigurationError(
                f"an ONNX graph needs the model's fast tokenizer ({str(tokenizer_file)!r} is "
                "missing); save the model with a fast tokenizer, or use backend = 'torch'"
            )
        self.path = graph
        self.dimensions = dimensions
        self.max_seq_length = max_seq_length
        self.one_at_a_time = one_at_a_time
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_seq_length)
        pre = type(self._tokenizer.pre_tokenizer).__name__
        self._prefix_chars = max_seq_length * PREFIX_CHARS_PER_TOKEN if pre in WORD_SPLITTING else 0
        self.workers = workers if one_at_a_time else 1
        self._pool: ThreadPoolExecutor | None = None
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(graph), options, providers=["CPUExecutionProvider"]
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
        out = np.asarray(self._session.run(None, feeds)[0], dtype=np.float32)
        if out.ndim == 3:  # token vectors: mean over the real tokens (not the padding)
            weights = mask[:, :, None].astype(np.float32)
            out = (out * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return out

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
            size = 1 if self.one_at_a_time else batch_size
            order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
            out = np.empty((len(texts), self.dimensions), dtype=np.float32)
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
