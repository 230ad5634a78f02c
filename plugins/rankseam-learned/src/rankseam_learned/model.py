"""The model file: data, never code.

A model file is one UTF-8 JSON document (docs/plugins/learned.md, "Model files are data")::

    {"format": "rankseam-learned-model", "format_version": 1,
     "feature_set": "pool-v1", "features": [... every column name of the feature set ...],
     "summary": {... the training summary: data, folds, figures ...},
     "rerank_order": {"model_weight": w, "rank_constant": k} (optional),
     "heads": {"rerank": HEAD, "decision": HEAD (optional)},
     "sha256": "<hex>"}

``rerank_order`` says how the ``learned`` reranker mixes the model's order with the coarse
order (:func:`rankseam_learned.reranker.blended_order`): each candidate scores
``w / (k + its rank by the model) + (1 - w) / (k + its coarse rank)`` (ranks from 0), so
``w = 1`` is the model's order alone (the default when the field is absent) and ``w = 0`` the
coarse order. Training chooses ``w`` by cross-validation (docs/plugins/learned.md).

``sha256`` is the SHA-256 of the document without it, serialised canonically (keys sorted,
no spaces, no NaN). A head is one fitted binary classifier as plain numbers, over the columns
it names (``features``, names of the feature set; the ``decision`` head only over
:data:`~rankseam_learned.features.PAIR_FEATURES`, what one decision request carries):

- ``{"kind": "gradient_boosting", "features": [...], "baseline": b, "trees": [TREE, ...]}``
  with each tree ``{"feature": [...], "threshold": [...], "left": [...], "right": [...],
  "missing_left": [...], "value": [...]}`` (one entry per node; node 0 is the root; a leaf
  has ``left = right = -1`` and its ``value``; a split sends a row left when its value is
  ``<= threshold``, a missing (NaN) value where ``missing_left`` says). The probability is
  ``1 / (1 + exp(-(b + sum of the leaves reached)))``: scikit-learn's
  ``HistGradientBoostingClassifier`` (binary, numeric features; categorical splits are
  refused at export).
- ``{"kind": "logistic", "features": [...], "coef": [...], "intercept": c, "mean": [...],
  "scale": [...]}``: ``1 / (1 + exp(-(((x - mean) / scale) @ coef + c)))``: scikit-learn's
  ``LogisticRegression`` (binary), alone or after a ``StandardScaler`` in a ``Pipeline``.

:func:`export` turns a fitted scikit-learn estimator into such a file (scikit-learn is imported
there only); :func:`load` reads one with numpy alone and refuses, with a
:class:`ModelFileError` naming the file and the cause, a file that is too large (checked
before reading), a pickle, truncated or not JSON, of another format version or feature set,
with a wrong checksum, non-finite numbers, node indices out of range or a cycle.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeGuard

import attrs
import numpy as np

from rankseam.errors import ConfigurationError
from rankseam_learned.features import FEATURE_SET, FEATURES, PAIR_FEATURES
from rankseam_learned.heads import GradientBoostingHead, Head, LogisticHead, checked_rows
from rankseam_learned.sklearn_export import head_document

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_FILE_BYTES",
    "RANK_CONSTANT",
    "GradientBoostingHead",
    "Head",
    "LogisticHead",
    "Model",
    "ModelFileError",
    "export",
    "load",
    "loads",
]

#: The ``format`` field of every model file.
FORMAT = "rankseam-learned-model"
#: The version of the layout this module reads and writes.
FORMAT_VERSION = 1
#: Larger files are refused before they are read (the shipped model is well under 1 MB).
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Bounds on what one head may hold (far above any useful model; they bound load time).
MAX_TREES = 5000
MAX_NODES = 1_000_000
#: The heads a model file may hold.
HEAD_NAMES = ("rerank", "decision")
#: The rank constant ``k`` of the blended order (``rerank_order``) when a file gives none.
RANK_CONSTANT = 10.0
#: The first bytes of a pickle (protocol 2+) and of a zip archive (joblib, npz, skops).
_PICKLE_MAGIC = b"\x80"
_ZIP_MAGIC = b"PK\x03\x04"


class ModelFileError(ConfigurationError):
    """A model file that cannot be used; the message names the file, the cause and the fix."""


def _canonical(document: Mapping[str, Any]) -> bytes:
    return json.dumps(
        document, sort_keys=True, separators=(",", ":"), allow_nan=False, ensure_ascii=True
    ).encode("ascii")


def _checksum(header: Mapping[str, Any], payload: bytes) -> str:
    """SHA-256 of the header without its ``sha256`` (canonical JSON), a newline and the
    model's bytes as they are in the file."""
    body = {k: v for k, v in header.items() if k != "sha256"}
    try:
        head = _canonical(body)
    except ValueError:  # a non-finite number (1e999 parses as inf): it cannot match
        head = repr(sorted(body.items())).encode("utf-8", "replace")
    except TypeError:
        head = b""
    return hashlib.sha256(head + b"\n" + payload).hexdigest()


@attrs.frozen(eq=False)
class Model:
    """A loaded model file: its heads and what the file says about them.

    ``predict_proba(X)`` scores rows of the whole feature set (:func:`rankseam_learned.
    features.compute`) with the ``rerank`` head, as scikit-learn's ``predict_proba``: an
    ``(n, 2)`` array whose column 1 is the probability that the candidate is relevant.
    """

    source: str
    feature_set: str
    features: tuple[str, ...]
    sha256: str
    summary: Mapping[str, Any]
    rerank: Head
    decision: Head | None = None
    size_bytes: int = 0
    #: The ``rerank_order`` of the file: the model's weight against the coarse order, and the
    #: rank constant (see the module docstring).
    model_weight: float = 1.0
    rank_constant: float = RANK_CONSTANT

    def predict_proba(self, x: Any) -> np.ndarray:
        rows = checked_rows(x, len(self.features))
        return self.rerank.predict_proba(self.columns(rows, self.rerank, self.features))

    @staticmethod
    def columns(rows: np.ndarray, head: Head, names: Sequence[str]) -> np.ndarray:
        """The columns of ``rows`` (named ``names``) that ``head`` reads, in its order."""
        if tuple(names) == head.features:
            return rows
        index = [list(names).index(name) for name in head.features]
        return rows[:, index]


# loading ------------------------------------------------------------------------------------


def load(path: str | os.PathLike[str]) -> Model:
    """The model in the file ``path``, checked (see the module docstring); a
    :class:`ModelFileError` naming the file and the cause otherwise."""
    file = Path(path)
    try:
        size = file.stat().st_size
    except OSError as exc:
        raise ModelFileError(
            f"model file {str(file)!r} cannot be read ({exc.strerror or exc}); give the path of "
            "a model file, the name of an installed model, or train one (docs/plugins/learned.md)"
        ) from exc
    if size > MAX_FILE_BYTES:
        raise ModelFileError(
            f"model file {str(file)!r} is {size} bytes, over the {MAX_FILE_BYTES}-byte limit "
            "of a model file (refused unread); a model this size is not one this plugin wrote: "
            "check the path, or train a smaller model"
        )
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ModelFileError(
            f"model file {str(file)!r} cannot be read ({exc.strerror or exc})"
        ) from exc
    return loads(data, source=str(file))


def loads(data: bytes, *, source: str = "<bytes>") -> Model:
    """The model in ``data`` (a model file's bytes); ``source`` names it in errors."""

    def fail(cause: str) -> ModelFileError:
        return ModelFileError(f"model file {source!r} {cause}")

    if len(data) > MAX_FILE_BYTES:
        raise fail(f"is {len(data)} bytes, over the {MAX_FILE_BYTES}-byte limit of a model file")
    if data.startswith(_PICKLE_MAGIC):
        raise fail(
            "is a pickle: a pickle is code, and a model file here is data; it was not loaded. "
            "Export the fitted estimator with rankseam_learned.model.export "
            "(docs/plugins/learned.md)"
        )
    if data.startswith(_ZIP_MAGIC):
        raise fail(
            "is a zip archive (joblib, npz or skops), not a model file (JSON); it was not "
            "loaded. Export the fitted estimator with rankseam_learned.model.export"
        )
    cut = data.find(b"\n")
    header = _json(data if cut < 0 else data[:cut], "its header", fail, complete=cut >= 0)
    if not isinstance(header, dict):
        raise fail(f"holds a JSON {type(header).__name__}, not a model header")
    if header.get("format") != FORMAT:
        raise fail(f"is not a rankseam-learned model (its 'format' is {header.get('format')!r})")
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise fail(
            f"has format version {version!r}; this rankseam-learned reads version "
            f"{FORMAT_VERSION}: install the rankseam-learned that wrote it, or retrain"
        )
    size = header.get("payload_bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise fail("has no valid 'payload_bytes' in its header")
    payload = data[cut + 1 : cut + 1 + size] if cut >= 0 else b""
    if len(payload) < size:
        raise fail(
            f"is truncated: its header announces {size} bytes of model, the file holds "
            f"{len(payload)}; copy the file again or re-export the model"
        )
    if data[cut + 1 + size :].strip():
        raise fail("has data after its model; copy the file again or re-export the model")
    stated = header.get("sha256")
    actual = _checksum(header, payload)
    if stated != actual:
        raise fail(
            f"fails its checksum (sha256 {str(stated)[:16]}..., content {actual[:16]}...): "
            "it was altered or damaged after export; copy it again or re-export the model"
        )
    feature_set = header.get("feature_set")
    features = header.get("features")
    if feature_set != FEATURE_SET or features != list(FEATURES):
        raise fail(
            f"was trained on the feature set {feature_set!r}; this rankseam-learned computes "
            f"{FEATURE_SET!r} ({len(FEATURES)} features): retrain the model with this version "
            "(docs/plugins/learned.md, 'Training')"
        )
    summary = header.get("summary", {})
    if not isinstance(summary, dict):
        raise fail("has a 'summary' that is not a JSON object")
    model_weight, rank_constant = _rerank_order(header.get("rerank_order"), fail)
    heads = _json(payload, "its model", fail)
    if not isinstance(heads, dict) or "rerank" not in heads:
        raise fail("has no 'rerank' head (the model must be an object holding one)")
    unknown = sorted(set(heads) - set(HEAD_NAMES))
    if unknown:
        raise fail(f"has unknown heads {unknown}; a model file holds {list(HEAD_NAMES)}")
    try:
        rerank = _head(heads["rerank"], FEATURES)
        decision = (
            _head(heads["decision"], PAIR_FEATURES) if heads.get("decision") is not None else None
        )
    except _BadHead as exc:
        raise fail(f"has a malformed head: {exc}; re-export the model") from None
    return Model(
        source=source,
        feature_set=FEATURE_SET,
        features=FEATURES,
        sha256=actual,
        summary=summary,
        rerank=rerank,
        decision=decision,
        size_bytes=len(data),
        model_weight=model_weight,
        rank_constant=rank_constant,
    )


def _rerank_order(order: Any, fail: Callable[[str], ModelFileError]) -> tuple[float, float]:
    """The ``rerank_order`` field's weight and rank constant, checked; ``(1.0, 10.0)`` when
    the file has none (the model's order alone)."""
    if order is None:
        return 1.0, RANK_CONSTANT
    if not isinstance(order, dict) or set(order) - {"model_weight", "rank_constant"}:
        raise fail(
            "has a 'rerank_order' that is not an object of 'model_weight' and 'rank_constant'; "
            "re-export the model"
        )
    weight = order.get("model_weight", 1.0)
    constant = order.get("rank_constant", RANK_CONSTANT)
    if not _real(weight) or not 0.0 <= weight <= 1.0:
        raise fail(
            f"has a 'rerank_order' model_weight of {weight!r}; it must be a number from 0 "
            "(the coarse order) to 1 (the model's order): re-export the model"
        )
    if not _real(constant) or not 1.0 <= constant <= 1e6:
        raise fail(
            f"has a 'rerank_order' rank_constant of {constant!r}; it must be a number from 1 "
            "to 1e6: re-export the model"
        )
    return float(weight), float(constant)


def _real(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a finite JSON number (not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _json(
    data: bytes, part: str, fail: Callable[[str], ModelFileError], *, complete: bool = True
) -> Any:
    """``data`` parsed as JSON; NaN and infinities refused (the format's numbers are finite).
    ``complete``: whether ``data`` ended where the format says (a header ends at a newline);
    when it did not, a parse error means the file was cut short."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(
            f"is not UTF-8 text in {part} ({exc.reason} at byte {exc.start}); not a model file"
        ) from exc

    def no_constant(name: str) -> Any:
        raise fail(
            f"holds the non-finite number {name} in {part} (e.g. a NaN threshold); every "
            "number of a model must be finite: retrain or re-export the model"
        )

    try:
        return json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        cause = "is not valid JSON" if complete else "is truncated"
        raise fail(
            f"{cause} in {part} ({exc.msg} at line {exc.lineno} column {exc.colno}); copy the "
            "file again or re-export the model"
        ) from exc


class _BadHead(ValueError):
    pass


def _array(head: Mapping[str, Any], key: str, where: str, kinds: str) -> np.ndarray:
    values = head.get(key)
    array = np.array(values) if isinstance(values, list) else None
    if array is None or array.ndim != 1 or (array.size and array.dtype.kind not in kinds):
        what = "integers" if kinds == "iu" else "numbers"
        raise _BadHead(f"{where} '{key}' is not a list of {what}")
    return array


def _numbers(
    head: Mapping[str, Any], key: str, where: str, length: int | None = None
) -> np.ndarray:
    array = _array(head, key, where, "iuf").astype(np.float64)
    if not np.isfinite(array).all():
        raise _BadHead(f"{where} '{key}' holds a non-finite number (NaN or infinity)")
    if length is not None and len(array) != length:
        raise _BadHead(f"{where} '{key}' has {len(array)} entries, not {length}")
    return array


def _integers(head: Mapping[str, Any], key: str, where: str, length: int) -> np.ndarray:
    array = _array(head, key, where, "iu").astype(np.int64)
    if len(array) != length:
        raise _BadHead(f"{where} '{key}' has {len(array)} entries, not {length}")
    return array


def _scalar(head: Mapping[str, Any], key: str, where: str) -> float:
    value = head.get(key)
    if not _real(value):
        raise _BadHead(f"{where} '{key}' is not a finite number")
    return float(value)


def _head(head: Any, allowed: tuple[str, ...]) -> Head:
    if not isinstance(head, dict):
        raise _BadHead("a head is not a JSON object")
    names = head.get("features")
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) for n in names)
        or len(set(names)) != len(names)
    ):
        raise _BadHead("'features' is not a list of distinct feature names")
    outside = [n for n in names if n not in allowed]
    if outside:
        raise _BadHead(f"it reads features it cannot have: {outside[:5]}")
    features = tuple(names)
    kind = head.get("kind")
    if kind == "logistic":
        width = len(features)
        scale = _numbers(head, "scale", "the logistic head's", width)
        if (scale <= 0).any():
            raise _BadHead("the logistic head's 'scale' holds a value <= 0")
        return LogisticHead(
            features=features,
            coef=_numbers(head, "coef", "the logistic head's", width),
            intercept=_scalar(head, "intercept", "the logistic head's"),
            mean=_numbers(head, "mean", "the logistic head's", width),
            scale=scale,
        )
    if kind == "gradient_boosting":
        return _boosting(head, features)
    raise _BadHead(f"unknown kind {kind!r} (known: 'gradient_boosting', 'logistic')")


def _boosting(head: Mapping[str, Any], features: tuple[str, ...]) -> GradientBoostingHead:
    trees = head.get("trees")
    if not isinstance(trees, list) or not trees:
        raise _BadHead("'trees' is not a non-empty list")
    if len(trees) > MAX_TREES:
        raise _BadHead(f"{len(trees)} trees, over the limit of {MAX_TREES}")
    keys = ("feature", "threshold", "left", "right", "missing_left", "value")
    joined: dict[str, list[Any]] = {k: [] for k in keys}
    sizes = []
    for t, tree in enumerate(trees):
        if not isinstance(tree, dict):
            raise _BadHead(f"tree {t} is not a JSON object")
        lists: list[list[Any]] = [tree.get(k) for k in keys]  # type: ignore[misc]
        if not all(isinstance(v, list) for v in lists):
            raise _BadHead(f"tree {t} lacks one of the lists {list(keys)}")
        n = len(lists[0])
        if n == 0 or any(len(v) != n for v in lists):
            raise _BadHead(f"tree {t} has no nodes, or lists of different lengths")
        sizes.append(n)
        for k, v in zip(keys, lists, strict=True):
            joined[k].extend(v)
    total = sum(sizes)
    if total > MAX_NODES:
        raise _BadHead(f"{total} nodes, over the limit of {MAX_NODES}")
    where = "the trees'"
    feature = _integers(joined, "feature", where, total)
    threshold = _numbers(joined, "threshold", where, total)
    left = _integers(joined, "left", where, total)
    right = _integers(joined, "right", where, total)
    missing = _integers(joined, "missing_left", where, total)
    value = _numbers(joined, "value", where, total)
    roots = np.cumsum([0, *sizes[:-1]], dtype=np.int64)
    offset = np.repeat(roots, sizes)  # each node's tree's first index
    local = np.arange(total) - offset  # each node's index within its tree
    size = np.repeat(np.array(sizes, dtype=np.int64), sizes)
    leaf = left == -1
    if not np.array_equal(leaf, right == -1):
        raise _BadHead("a node has one child (left or right is -1, not both)")
    split = ~leaf
    # children come after their parent, inside its tree: no cycle, no self-reference
    for child in (left, right):
        bad = split & ((child <= local) | (child >= size))
        if bad.any():
            t = int(np.searchsorted(roots, np.flatnonzero(bad)[0], side="right") - 1)
            raise _BadHead(
                f"tree {t} has a child index out of range or not after its parent (a cycle)"
            )
    if (split & ((feature < 0) | (feature >= len(features)))).any():
        raise _BadHead(f"a tree splits on a feature index outside 0..{len(features) - 1}")
    if ((missing != 0) & (missing != 1)).any():
        raise _BadHead("'missing_left' holds a value other than 0 or 1")
    index = np.arange(total)
    # in the flat table a leaf points to itself, a split to its children
    left = np.where(leaf, index, left + offset)
    right = np.where(leaf, index, right + offset)
    depth = 0
    frontier = roots[split[roots]]
    while frontier.size:  # level by level; terminates: children have larger indices
        children = np.concatenate((left[frontier], right[frontier]))
        frontier = children[split[children]]
        depth += 1
    return GradientBoostingHead(
        features=features,
        baseline=_scalar(head, "baseline", "the boosting head's"),
        roots=roots,
        feature=np.where(leaf, 0, feature),
        threshold=threshold,
        left=left,
        right=right,
        missing_left=missing.astype(bool),
        value=np.where(leaf, value, 0.0),
        depth=depth,
    )


# export -------------------------------------------------------------------------------------


def export(
    estimator: Any,
    feature_set: str,
    summary: Mapping[str, Any] | None = None,
    *,
    features: Sequence[str] = FEATURES,
    decision: Any = None,
    decision_features: Sequence[str] = PAIR_FEATURES,
    model_weight: float = 1.0,
) -> bytes:
    """The model file (bytes) of the fitted scikit-learn ``estimator`` (the ``rerank`` head,
    over the columns ``features`` of the feature set) and, optionally, of ``decision`` (the
    ``decision`` head, over ``decision_features``, columns of
    :data:`~rankseam_learned.features.PAIR_FEATURES`), with the training ``summary`` (a
    JSON-able mapping). ``feature_set`` must be the one this version computes.
    ``model_weight`` (0..1) is the model's weight against the coarse order in the reranker's
    order (the file's ``rerank_order``; 1: the model's order alone).

    Estimators: ``HistGradientBoostingClassifier`` (binary, numeric features) and
    ``LogisticRegression`` (binary), alone or as the last step of a ``Pipeline`` after a
    ``StandardScaler``. Anything else is a :class:`ValueError` that says so. The file loads
    back (:func:`loads`) before it is returned.
    """
    if feature_set != FEATURE_SET:
        raise ValueError(
            f"this rankseam-learned computes the feature set {FEATURE_SET!r}, not {feature_set!r}"
        )
    if not _real(model_weight) or not 0.0 <= model_weight <= 1.0:
        raise ValueError(f"model_weight must be a number from 0 to 1, got {model_weight!r}")
    heads: dict[str, Any] = {"rerank": head_document(estimator, tuple(features))}
    if decision is not None:
        heads["decision"] = head_document(decision, tuple(decision_features))
    try:
        payload = _canonical(heads)
        header: dict[str, Any] = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "feature_set": FEATURE_SET,
            "features": list(FEATURES),
            "summary": dict(summary or {}),
            "payload_bytes": len(payload),
        }
        if model_weight != 1.0:
            header["rerank_order"] = {
                "model_weight": float(model_weight),
                "rank_constant": RANK_CONSTANT,
            }
        header["sha256"] = hashlib.sha256(_canonical(header) + b"\n" + payload).hexdigest()
        data = _canonical(header) + b"\n" + payload + b"\n"
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"the model or its summary cannot be written as JSON with finite numbers: {exc}"
        ) from exc
    loads(data, source="<exported model>")  # what it writes, it can read
    return data
