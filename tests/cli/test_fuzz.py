"""Property-based fuzzing with hypothesis.

- ``dxrf.io.ingest`` of random CSV content either round-trips (values equal
  in float32, columns and levels as expected) or raises a clean ValueError or
  TypeError, and never leaves anything half-written next to the destination.
- ``dxrf.accumulate`` over random shapes (n, d, M), chunkings, tilings,
  targets and splits equals a dense NumPy reference in float64.
"""

from __future__ import annotations

import csv
import io
import tempfile
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import dxrf
import dxrf.io

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _leftovers(dest: Path) -> list[str]:
    return sorted(p.name for p in dest.parent.iterdir() if p.name.startswith(dest.name))


# -- ingest: structured random tables with a known expected encoding ----------------------

MISSING = object()  # an empty cell
HUGE = object()  # a finite float64 that overflows float32

# category words that pandas never reads as numbers, booleans or missing values
WORDS = st.one_of(
    st.sampled_from(["red", "green", "blue", "x y", "Zed", "é", "a,b", 'q"uote']),
    st.text(alphabet="bcdfghjkz", min_size=1, max_size=3),
)
NAMES = st.builds(lambda head, tail: head + tail, st.sampled_from("abcXYZ"), st.text(alphabet="abcdefgh_ XYZ", max_size=4))


@st.composite
def tables(draw):
    n = draw(st.integers(1, 25))
    n_cols = draw(st.integers(1, 4))
    names = [f"{draw(NAMES)}{i}" for i in range(n_cols + 1)]  # unique: they end in different numbers
    p_missing = draw(st.sampled_from([0.0, 0.0, 0.0, 0.1, 0.3]))
    cols = []
    for name in names[:n_cols]:
        kind = draw(st.sampled_from(["float", "int", "cat"]))
        if kind == "float":
            value = st.floats(allow_nan=False, allow_infinity=False, width=32)
        elif kind == "int":
            value = st.integers(-(2**31), 2**31)
        else:
            value = WORDS
        cells = []
        for _ in range(n):
            roll = draw(st.floats(0, 1))
            if roll < p_missing:
                cells.append(MISSING)
            elif kind == "float" and p_missing and roll < p_missing + 0.02:
                cells.append(HUGE)
            else:
                cells.append(draw(value))
        cols.append((name, kind, cells))
    target_kind = draw(st.sampled_from([None, "num", "cat"]))
    target = None
    if target_kind is not None:
        value = st.floats(-1e6, 1e6, width=32) if target_kind == "num" else WORDS
        cells = [MISSING if draw(st.floats(0, 1)) < p_missing / 2 else draw(value) for _ in range(n)]
        target = (names[-1], target_kind, cells)
    return cols, target


def _cell(v) -> str:
    if v is MISSING:
        return ""
    if v is HUGE:
        return "1e300"
    return repr(float(v)) if isinstance(v, float) else str(v)


def _write_csv(path: Path, cols, target) -> None:
    allc = cols + ([target] if target else [])
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c[0] for c in allc])
    for i in range(len(allc[0][2])):
        w.writerow([_cell(c[2][i]) for c in allc])
    path.write_text(buf.getvalue(), encoding="utf-8")


def _expected(cols, target, nan_policy):
    """(columns, X, y, classes, n_dropped) that ingest must produce, or the error message part.

    Levels and classes are collected from all rows of the source (the first
    pass), including rows that ``nan_policy="drop"`` drops later.
    """
    n = len(cols[0][2])
    bad = np.zeros(n, bool)
    for _, kind, cells in cols:
        if kind != "cat":
            bad |= np.array([v is MISSING or v is HUGE for v in cells])
    if target is not None:
        bad |= np.array([v is MISSING for v in target[2]])
    if bad.any() and nan_policy == "error":
        return "non-finite|missing"
    keep = ~bad
    if not keep.any():
        return "no rows to write"
    columns, blocks = [], []
    for name, kind, cells in cols:
        if kind == "cat":
            levels = sorted({v for v in cells if v is not MISSING})
            columns += [f"{name}={lv}" for lv in levels]
            blocks.append(np.array([[float(v == lv) for lv in levels] for v in cells], dtype=np.float32))
        else:
            columns.append(name)
            blocks.append(np.array([[np.float32(np.float64(v))] if v is not MISSING and v is not HUGE else [np.nan] for v in cells], dtype=np.float32))
    X = np.hstack(blocks)[keep]
    y = classes = None
    if target is not None:
        vals = [v for v, k in zip(target[2], keep) if k]
        if target[1] == "num":
            y = np.array([np.float32(v) for v in vals], dtype=np.float32)
        else:
            classes = sorted({v for v in target[2] if v is not MISSING})
            y = np.array([classes.index(v) for v in vals], dtype=np.int32)
    return columns, X, y, classes, int(bad.sum())


@settings(max_examples=100, **SETTINGS)
@given(table=tables(), nan_policy=st.sampled_from(["error", "drop"]), chunk_rows=st.integers(1, 30))
def test_ingest_of_random_tables_round_trips(table, nan_policy, chunk_rows):
    cols, target = table
    # an all-missing categorical column is read as a numeric NaN column: keep the oracle simple
    assume(all(any(v is not MISSING for v in c[2]) for c in cols if c[1] == "cat"))
    expected = _expected(cols, target, nan_policy)
    with tempfile.TemporaryDirectory() as d:
        src, dest = Path(d) / "in.csv", Path(d) / "out.zarr"
        _write_csv(src, cols, target)
        kwargs = dict(target=None if target is None else target[0], nan_policy=nan_policy, chunk_rows=chunk_rows)
        if isinstance(expected, str):
            event(f"refused: {expected}")
            with pytest.raises(ValueError, match=expected):
                dxrf.io.ingest(src, dest, **kwargs)
            assert _leftovers(dest) == []
            return
        report = dxrf.io.ingest(src, dest, **kwargs)
        event("round trip" + (" with dropped rows" if expected[4] else ""))
        columns, X, y, classes, n_dropped = expected
        ds = dxrf.io.open_zarr(dest)
        assert ds.columns == columns and report.columns == columns
        assert report.n_dropped == n_dropped and report.n_rows == X.shape[0]
        Xs, ys = ds.compute()
        assert Xs.dtype == np.float32
        np.testing.assert_array_equal(Xs, X)
        if target is None:
            assert ds.y is None
        else:
            assert ys.dtype == y.dtype
            np.testing.assert_array_equal(ys, y)
            assert ds.classes == classes
        assert _leftovers(dest) == ["out.zarr"]


# -- ingest: arbitrary text --------------------------------------------------------------

CSV_TEXT = st.lists(st.sampled_from(list('ab1.5-e,"\n\r \t;xé') + ["nan", "inf", "NA", "1e39", "\n1,2\n"]), max_size=60).map("".join)


@settings(max_examples=150, **SETTINGS)
@given(text=CSV_TEXT, header=st.booleans(), target=st.sampled_from([None, 0, -1, "a"]), nan_policy=st.sampled_from(["error", "drop"]))
def test_ingest_of_arbitrary_text_is_clean(text, header, target, nan_policy):
    with tempfile.TemporaryDirectory() as d:
        src, dest = Path(d) / "in.csv", Path(d) / "out.zarr"
        src.write_text(text, encoding="utf-8")
        try:
            report = dxrf.io.ingest(src, dest, header=header, target=target, nan_policy=nan_policy, chunk_rows=3)
        except (ValueError, TypeError) as exc:
            event(f"refused: {type(exc).__name__}")
            assert _leftovers(dest) == []  # nothing half-written
            return
        event("ingested")
        ds = dxrf.io.open_zarr(dest)
        Xs, ys = ds.compute()
        assert Xs.shape == (report.n_rows, len(report.columns)) and report.n_rows >= 1
        assert np.isfinite(Xs).all()
        assert np.isfinite(ds.x_mean).all() and (ds.x_std > 0).all()
        if ys is not None:
            assert ys.shape == (report.n_rows,)
            if ds.classes is not None:
                assert ((ys >= 0) & (ys < len(ds.classes))).all()
            else:
                assert np.isfinite(ys).all()
        assert _leftovers(dest) == ["out.zarr"]


# -- accumulate against a dense reference -------------------------------------------------


@st.composite
def chunkings(draw, n):
    cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=min(6, n - 1)))) if n > 1 else []
    edges = [0, *cuts, n]
    return tuple(b - a for a, b in zip(edges, edges[1:]))


FEATURE_MAPS = {
    "rff-gaussian": lambda m, s: dxrf.RandomFourierFeatures(m, bandwidth=1.3, dtype="float64", random_state=s),
    "rff-laplacian": lambda m, s: dxrf.RandomFourierFeatures(m, kernel="laplacian", bandwidth=2.0, dtype="float64", random_state=s),
    "rff-cauchy-qmc": lambda m, s: dxrf.RandomFourierFeatures(m, kernel="cauchy", sampling="qmc", dtype="float64", random_state=s),
    "rff-structured": lambda m, s: dxrf.RandomFourierFeatures(m, sampling="structured", dtype="float64", random_state=s),
    "relu": lambda m, s: dxrf.RandomReLUFeatures(m, dtype="float64", random_state=s),
    "maxout": lambda m, s: dxrf.RandomMaxoutFeatures(m, pieces=3, dtype="float64", random_state=s),
    "sketch": lambda m, s: dxrf.RandomLinearSketch(m, dtype="float64", random_state=s),
}


def _close(got, ref) -> None:
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    err = float(np.abs(np.asarray(got) - ref).max(initial=0.0))
    assert err <= 1e-10 * scale, (err, scale)


@settings(max_examples=100, **SETTINGS)
@given(data=st.data())
def test_accumulate_matches_dense_reference(data):
    n = data.draw(st.integers(1, 60), label="n")
    d = data.draw(st.integers(1, 5), label="d")
    m = data.draw(st.integers(1, 12), label="M")
    k = data.draw(st.sampled_from([None, 1, 3]), label="k")
    kind = data.draw(st.sampled_from(sorted(FEATURE_MAPS)), label="features")
    chunks = data.draw(chunkings(n), label="chunks")
    tile_rows = data.draw(st.one_of(st.none(), st.integers(1, 70)), label="tile_rows")
    split_every = data.draw(st.integers(2, 5), label="split_every")
    use_split = data.draw(st.booleans(), label="split")
    seed = data.draw(st.integers(0, 2**16), label="seed")

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 2.0, size=d)
    Y = None if k is None else rng.normal(size=(n, k))
    y_in = None if Y is None else (Y[:, 0] if k == 1 else Y)
    fmap = FEATURE_MAPS[kind](m, seed).fit(X)
    Z = fmap.transform(X).astype(np.float64)
    mask = rng.random(n) < 0.3 if use_split else None

    Xd = da.from_array(X, chunks=(chunks, d))
    yd = None if y_in is None else da.from_array(y_in, chunks=(chunks,) + y_in.shape[1:])
    md = None if mask is None else da.from_array(mask, chunks=(chunks,))
    with dask.config.set(scheduler="threads"):
        out = dxrf.accumulate(Xd, yd, features=fmap, split=md, tile_rows=tile_rows, split_every=split_every, progress=False)
    groups = (out,) if mask is None else out
    rows = [np.ones(n, bool)] if mask is None else [~mask, mask]
    for stats, sel in zip(groups, rows):
        Zs = Z[sel]
        assert stats.n == int(sel.sum())
        assert stats.n_components == Z.shape[1]
        _close(stats.gram, Zs.T @ Zs)
        _close(stats.sum, Zs.sum(axis=0))
        if Y is None:
            assert stats.cross is None
        else:
            Ys = Y[sel]
            _close(stats.cross, Zs.T @ Ys)
            _close(stats.ysum, Ys.sum(axis=0))
            _close(stats.yy, Ys.T @ Ys)
    # the same pass on NumPy input (in this process, one block)
    ref = dxrf.accumulate(X, y_in, features=fmap, split=mask)
    for a, b in zip(groups, (ref,) if mask is None else ref):
        _close(a.gram, b.gram)
        assert a.n == b.n
