"""The model file: scikit-learn's probabilities in pure numpy, and every hostile file refused
with a message naming the file and the cause."""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from rankseam.errors import ConfigurationError
from rankseam_learned.features import FEATURE_SET, FEATURES, PAIR_FEATURES
from rankseam_learned.model import FORMAT_VERSION, MAX_FILE_BYTES, export, load, loads

F = len(FEATURES)


def _data(rng: np.random.Generator, n: int, width: int, missing: float) -> np.ndarray:
    x = rng.normal(size=(n, width))
    x[rng.random(x.shape) < missing] = np.nan
    return x


def test_boosting_matches_sklearn_predict_proba() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(7)
    x = _data(rng, 2000, F, 0.03)  # missing values: both missing_go_to_left directions
    y = (np.nan_to_num(x[:, 0]) + np.nan_to_num(x[:, 3] * x[:, 9]) > 0.2).astype(int)
    est = HistGradientBoostingClassifier(max_iter=80, early_stopping=False).fit(x, y)
    model = loads(export(est, FEATURE_SET, {"n": 2000}))
    test = _data(rng, 1000, F, 0.05)
    np.testing.assert_allclose(model.predict_proba(test), est.predict_proba(test), atol=1e-9)
    assert model.rerank.kind == "gradient_boosting"
    assert model.rerank.n_trees == 80  # type: ignore[union-attr]


def test_logistic_pipeline_matches_sklearn_predict_proba() -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(3)
    x = rng.normal(loc=3.0, scale=[*range(1, F + 1)], size=(800, F))
    y = (x[:, 1] / 2 - x[:, 4] / 5 > 0).astype(int)
    est = make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)).fit(x, y)
    xp = rng.normal(size=(400, len(PAIR_FEATURES)))
    yp = (xp[:, 1] > 0).astype(int)
    bare = LogisticRegression().fit(xp, yp)
    model = loads(export(est, FEATURE_SET, {}, decision=bare))
    test = rng.normal(loc=3.0, scale=[*range(1, F + 1)], size=(300, F))
    np.testing.assert_allclose(model.predict_proba(test), est.predict_proba(test), atol=1e-9)
    assert model.decision is not None
    probe = rng.normal(size=(50, len(PAIR_FEATURES)))
    np.testing.assert_allclose(
        model.decision.predict_proba(probe), bare.predict_proba(probe), atol=1e-9
    )


def test_export_refuses_what_the_format_cannot_hold() -> None:
    from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, F))
    y = rng.integers(0, 3, size=200)
    multi = HistGradientBoostingClassifier(max_iter=3).fit(x, y)
    with pytest.raises(ValueError, match="binary"):
        export(multi, FEATURE_SET, {})
    forest = RandomForestClassifier(n_estimators=2).fit(x, y % 2)
    with pytest.raises(ValueError, match="RandomForestClassifier cannot be exported"):
        export(forest, FEATURE_SET, {})
    with pytest.raises(ValueError, match="feature set"):
        export(multi, "other-v9", {})


def test_the_summary_and_checksum_are_in_the_file(model_bytes: bytes) -> None:
    model = loads(model_bytes)
    header = json.loads(model_bytes.split(b"\n", 1)[0])
    assert header["feature_set"] == FEATURE_SET
    assert header["features"] == list(FEATURES)
    assert header["format_version"] == FORMAT_VERSION
    assert header["summary"] == {"data": "synthetic test rows"}
    assert header["sha256"] == model.sha256
    assert model.summary == {"data": "synthetic test rows"}


def test_loading_and_scoring_never_import_sklearn(model_file: Path) -> None:
    code = (
        "import sys, numpy as np\n"
        "from rankseam_learned.model import load\n"
        f"m = load({str(model_file)!r})\n"
        f"m.predict_proba(np.zeros((3, {F})))\n"
        "import rankseam_learned.plugin, rankseam_learned.reranker, rankseam_learned.decision\n"
        "print(sorted(k for k in sys.modules if k.split('.')[0] == 'sklearn'))\n"
        # nor the installed metadata: the host's cached entry points spare a later process
        # that read; the installed models are looked up only when a model is resolved
        "print('importlib.metadata' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False"]


# hostile files --------------------------------------------------------------------------------


def _sign(header: dict, body: bytes) -> bytes:
    """A model file of ``header`` and the model bytes ``body``, with a checksum that matches
    (so that the check under test, not the checksum, is what refuses it)."""
    header = {**header, "payload_bytes": len(body)}
    header.pop("sha256", None)
    canonical = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    header["sha256"] = hashlib.sha256(canonical + b"\n" + body).hexdigest()
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\n" + body


def _resign(data: bytes, change_header: object = None, change_heads: object = None) -> bytes:
    """``data`` with its header and heads changed, signed again (:func:`_sign`)."""
    head, payload = data.split(b"\n", 1)
    header = json.loads(head)
    heads = json.loads(payload)
    if callable(change_header):
        change_header(header)
    if callable(change_heads):
        change_heads(heads)
    return _sign(header, json.dumps(heads, sort_keys=True, separators=(",", ":")).encode())


def _refused(tmp_path: Path, data: bytes, *expected: str) -> str:
    path = tmp_path / "hostile.json"
    path.write_bytes(data)
    with pytest.raises(ConfigurationError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message, message
    for part in expected:
        assert part in message, message
    return message


def test_truncated(tmp_path: Path, model_bytes: bytes) -> None:
    _refused(tmp_path, model_bytes[: len(model_bytes) // 2], "is truncated")
    _refused(tmp_path, model_bytes[:40], "is truncated")


def test_bad_json(tmp_path: Path, model_bytes: bytes) -> None:
    _refused(tmp_path, b"{this is not json}\n{}", "is not valid JSON")
    head, payload = model_bytes.split(b"\n", 1)
    _refused(tmp_path, _sign(json.loads(head), b"#" + payload[1:]), "is not valid JSON")
    _refused(tmp_path, b"\xff\xfe\x00garbage", "is not UTF-8")


def test_wrong_checksum(tmp_path: Path, model_bytes: bytes) -> None:
    head, payload = model_bytes.split(b"\n", 1)
    flipped = payload.replace(b'"baseline":', b'"baseline":1', 1)  # same shape, other number
    flipped = flipped[: len(payload) - 1] + b"\n"  # keep the announced length
    _refused(tmp_path, head + b"\n" + flipped, "fails its checksum")


def test_other_feature_set_and_version(tmp_path: Path, model_bytes: bytes) -> None:
    def other_set(header: dict) -> None:
        header["feature_set"] = "pool-v0"

    def fewer(header: dict) -> None:
        header["features"] = header["features"][:-1]

    def newer(header: dict) -> None:
        header["format_version"] = FORMAT_VERSION + 1

    _refused(tmp_path, _resign(model_bytes, other_set), "'pool-v0'", "retrain")
    _refused(tmp_path, _resign(model_bytes, fewer), "feature set", "retrain")
    _refused(tmp_path, _resign(model_bytes, newer), f"format version {FORMAT_VERSION + 1}")


def test_a_bad_rerank_order_is_refused(tmp_path: Path, model_bytes: bytes) -> None:
    def order(value: object):
        def change(header: dict) -> None:
            header["rerank_order"] = value

        return change

    for bad in (2.0, -0.1, "0.5", True, None):
        _refused(
            tmp_path,
            _resign(model_bytes, order({"model_weight": bad})),
            "'rerank_order' model_weight",
            "from 0",
        )
    _refused(
        tmp_path,
        _resign(model_bytes, order({"model_weight": 0.5, "rank_constant": 0})),
        "rank_constant of 0",
    )
    _refused(tmp_path, _resign(model_bytes, order([0.5])), "not an object")
    _refused(tmp_path, _resign(model_bytes, order({"weight": 0.5})), "not an object")
    # a valid one loads, and the field is optional (absent: the model's order alone)
    assert loads(_resign(model_bytes, order({"model_weight": 0.3}))).model_weight == 0.3
    assert loads(model_bytes).model_weight == 1.0


def test_export_writes_the_weight_and_refuses_one_outside_0_1() -> None:
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    x = rng.normal(size=(100, F))
    est = LogisticRegression().fit(x, (x[:, 0] > 0).astype(int))
    model = loads(export(est, FEATURE_SET, {}, model_weight=0.4))
    assert (model.model_weight, model.rank_constant) == (0.4, 10.0)
    with pytest.raises(ValueError, match="model_weight must be a number from 0 to 1"):
        export(est, FEATURE_SET, {}, model_weight=1.5)


def test_oversized_is_refused_before_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: nothing written

    def unread(self: Path) -> bytes:
        raise AssertionError("an oversized model file was read")

    monkeypatch.setattr(Path, "read_bytes", unread)
    with pytest.raises(ConfigurationError, match="over the 8388608-byte limit") as info:
        load(path)
    assert str(path) in str(info.value)


def test_nan_and_infinite_thresholds(tmp_path: Path, model_bytes: bytes) -> None:
    head, payload = model_bytes.split(b"\n", 1)
    heads = json.loads(payload)
    split = heads["rerank"]["trees"][0]["threshold"]
    index = next(i for i, f in enumerate(heads["rerank"]["trees"][0]["left"]) if f != -1)
    nan = json.dumps(split[index])
    for bad, expected in ((b"NaN", "non-finite number NaN"), (b"1e999", "non-finite")):
        body = payload.replace(nan.encode(), bad, 1)
        _refused(tmp_path, _sign(json.loads(head), body), expected)


def test_node_indices_out_of_range_and_cycles(tmp_path: Path, model_bytes: bytes) -> None:
    def first_split(heads: dict) -> tuple[dict, int]:
        tree = heads["rerank"]["trees"][0]
        return tree, next(i for i, child in enumerate(tree["left"]) if child != -1)

    def out_of_range(heads: dict) -> None:
        tree, i = first_split(heads)
        tree["left"][i] = 10_000

    def cycle(heads: dict) -> None:
        tree, i = first_split(heads)
        tree["right"][i] = i  # a node that is its own child

    def back_edge(heads: dict) -> None:
        tree = heads["rerank"]["trees"][0]
        last = max(i for i, child in enumerate(tree["left"]) if child != -1)
        tree["left"][last] = 0  # back to the root

    def bad_feature(heads: dict) -> None:
        tree, i = first_split(heads)
        tree["feature"][i] = F

    for change in (out_of_range, cycle, back_edge):
        _refused(
            tmp_path, _resign(model_bytes, None, change), "out of range or not after its parent"
        )
    _refused(tmp_path, _resign(model_bytes, None, bad_feature), "feature index outside")


def test_a_pickle_is_refused_unloaded(tmp_path: Path) -> None:
    class Boom:
        def __reduce__(self) -> tuple:
            return (print, ("unpickled!",))

    message = _refused(tmp_path, pickle.dumps(Boom()), "is a pickle", "not loaded")
    assert "export" in message


def test_a_zip_archive_is_refused(tmp_path: Path) -> None:
    archive = tmp_path / "model.joblib"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("data.pkl", b"x")
    _refused(tmp_path, archive.read_bytes(), "zip archive")


def test_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot be read"):
        load(tmp_path / "absent.json")


def test_loading_the_exported_model_twice_gives_equal_scores(model_bytes: bytes) -> None:
    rows = np.random.default_rng(1).random((30, F))
    np.testing.assert_array_equal(
        loads(model_bytes).predict_proba(rows), loads(model_bytes).predict_proba(rows)
    )
