"""Nothing on the command line or in a model file is dropped or coerced silently.

Each case is refused with one ``dxrf: error:`` line and exit status 2 (or,
where the help promises it, does what the help says).
"""

from __future__ import annotations

import numpy as np
import pytest

import dxrf
from dxrf.cli.commands import main


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(argv: list[str], capsys, pattern: str) -> str:
    code, _, err = run(argv, capsys)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("dxrf: error:"), err
    assert __import__("re").search(pattern, lines[0]), lines[0]
    return lines[0]


@pytest.fixture
def csv3(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("1,2,3\n4,5,6\n7,8,9\n")
    return path


@pytest.mark.parametrize("option", ["--bandwidth", "--alphas", "--n-components", "--select"])
@pytest.mark.parametrize("value", ["1,,2", "1,2,", ",1", "1, ,2"])
def test_empty_list_items_refused(tmp_path, capsys, option, value):
    if option == "--select":
        value = value.replace("1", "top").replace("2", "sample")
    refused(["fit", str(tmp_path / "d.zarr"), "--out", str(tmp_path / "m"), f"{option}={value}"], capsys,
            r"argument --[a-z-]+: empty item in the comma-separated")
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("names,header", [("a,b", True), ("a,b", False), ("a,b,c,d", False), ("a", False)])
def test_names_must_match_the_fields(tmp_path, csv3, capsys, names, header):
    argv = ["ingest", str(csv3), str(tmp_path / "o.zarr"), "--names", names] + ([] if header else ["--no-header"])
    refused(argv, capsys, rf"gives {len(names.split(','))} column names but the first line .* has 3 fields")
    assert list(tmp_path.glob("o.zarr*")) == []


def test_names_empty_item_refused(tmp_path, csv3, capsys):
    refused(["ingest", str(csv3), str(tmp_path / "o.zarr"), "--no-header", "--names", "a,,b"], capsys,
            r"argument --names: empty item")


def test_names_that_match_are_used(tmp_path, csv3, capsys):
    code, out, err = run(["ingest", str(csv3), str(tmp_path / "o.zarr"), "--no-header", "--names", "a,b,c",
                          "--target", "c", "--scheduler", "none"], capsys)
    assert code == 0, err
    ds = dxrf.io.open_zarr(str(tmp_path / "o.zarr"))
    assert ds.columns == ["a", "b"]
    np.testing.assert_array_equal(ds.X.compute(), [[1, 2], [4, 5], [7, 8]])
    np.testing.assert_array_equal(ds.y.compute(), [3, 6, 9])


@pytest.mark.parametrize("target,expect", [("2", 2), ("-1", 2), ("0", 0)])
def test_npy_target_index_as_the_help_says(tmp_path, capsys, target, expect):
    A = np.arange(30.0).reshape(10, 3)
    np.save(tmp_path / "a.npy", A)
    code, _, err = run(["ingest", str(tmp_path / "a.npy"), str(tmp_path / "o.zarr"), "--target", target,
                        "--scheduler", "none"], capsys)
    assert code == 0, err
    ds = dxrf.io.open_zarr(str(tmp_path / "o.zarr"))
    np.testing.assert_array_equal(ds.y.compute(), A[:, expect])
    assert ds.X.shape == (10, 2)


@pytest.mark.parametrize("target,pattern", [("3", r"target index 3 out of range for 3 columns"),
                                            ("x", r"target 'x' is not a column name or index")])
def test_npy_target_bad_refused(tmp_path, capsys, target, pattern):
    np.save(tmp_path / "a.npy", np.arange(30.0).reshape(10, 3))
    refused(["ingest", str(tmp_path / "a.npy"), str(tmp_path / "o.zarr"), "--target", target], capsys, pattern)


@pytest.mark.parametrize("dest", ["memory://x.zarr", "MEMORY://x.zarr", "memory:///a/b.zarr"])
def test_in_memory_destinations_refused(tmp_path, csv3, capsys, dest):
    refused(["ingest", str(csv3), dest], capsys, r"in-memory store, which is gone when the command exits")
    refused(["fit", str(tmp_path / "d.zarr"), "--out", dest], capsys, r"in-memory store")
    refused(["predict", str(tmp_path / "m"), str(tmp_path / "d.zarr"), "--out", dest], capsys, r"in-memory store")


X = np.random.default_rng(0).normal(size=(60, 2))


@pytest.mark.parametrize("make", [
    lambda: dxrf.RandomFeatureRidge(), lambda: dxrf.RandomFeatureClassifier(),
    lambda: dxrf.RandomFeatureClassifier(loss="logistic"),
])
@pytest.mark.parametrize("value", ["yes", 1, 0, None, 1.0])
def test_fit_intercept_checked_at_fit(make, value):
    est = make().set_params(fit_intercept=value)  # scikit-learn's convention: set_params stores, fit checks
    y = X[:, 0] if isinstance(est, dxrf.RandomFeatureRidge) else X[:, 0] > 0
    with pytest.raises(TypeError, match=rf"fit_intercept must be True or False, got {value!r}"):
        est.fit(X, y)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint8, bool])
@pytest.mark.parametrize("name", ["coef_", "intercept_"])
def test_non_float_fitted_arrays_refused_on_load(tmp_path, dtype, name):
    est = dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(n_components=8, bandwidth=1.0, random_state=0))
    est.fit(X, np.c_[X[:, 0], X[:, 1]])
    setattr(est, name, np.ones_like(getattr(est, name), dtype=dtype))
    dxrf.save(est, tmp_path / "m")
    with pytest.raises(ValueError, match=rf"{name} must be a floating-point array \(got dtype {np.dtype(dtype)}\)"):
        dxrf.load(tmp_path / "m")
