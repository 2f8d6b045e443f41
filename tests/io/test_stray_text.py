"""Text where numbers belong is refused, naming the column, the row and the value.

A numeric column with a stray value would otherwise be one-hot encoded, one
column per distinct number. Decimals are numbers; dates and times are refused
(convert them first). ``na_values`` reads the stray values as missing.
"""

from __future__ import annotations

import datetime
import re
import decimal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dxrf


def _csv(tmp_path, b_values, name="t.csv"):
    rows = [f"{i + 0.5},{b},{i}" for i, b in enumerate(b_values)]
    path = tmp_path / name
    path.write_bytes(("a,b,y\n" + "\n".join(rows) + "\n").encode("utf-8", "surrogateescape"))
    return path


NUMS = [str(v) for v in np.round(np.linspace(1, 3, 12), 3)]


@pytest.mark.parametrize("bad,row", [
    ("N/A?", 4), ("3\x00", 7), ("1,5", 0), ("--", 11), ("1.2.3", 5), ("nan?", 2), ("12abc", 9), ("\x00", 3),
])
@pytest.mark.parametrize("chunk_rows", [3, 100])
def test_stray_value_refused_with_column_row_value(tmp_path, bad, row, chunk_rows):
    values = list(NUMS)
    values[row] = f'"{bad}"' if "," in bad else bad
    src = _csv(tmp_path, values)
    dest = tmp_path / "o.zarr"
    expected = f"column 'b' holds numbers but has the value {bad!r} at row {row}"
    with pytest.raises(ValueError, match=re.escape(expected)):
        dxrf.io.ingest(src, dest, target="y", chunk_rows=chunk_rows, parallel=False)
    assert list(tmp_path.glob("o.zarr*")) == []


def test_stray_value_cli_one_line(tmp_path, capsys):
    from dxrf.cli.commands import main

    values = list(NUMS)
    values[6] = "N/A?"
    code = main(["ingest", str(_csv(tmp_path, values)), str(tmp_path / "o.zarr"), "--target", "y", "--scheduler", "none"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1
    assert "column 'b' holds numbers but has the value 'N/A?' at row 6" in err[0] and "--na-values" in err[0]


def test_stray_value_read_as_missing_when_asked(tmp_path):
    values = list(NUMS)
    values[6] = "N/A?"
    src = _csv(tmp_path, values)
    with pytest.raises(ValueError, match=r"column 'b' has a missing or non-finite value at row 6"):
        dxrf.io.ingest(src, tmp_path / "o.zarr", target="y", na_values=["N/A?"])
    dxrf.io.ingest(src, tmp_path / "o.zarr", target="y", na_values=["N/A?"], nan_policy="drop")
    ds = dxrf.io.open_zarr(tmp_path / "o.zarr")
    assert ds.columns == ["a", "b"] and ds.X.shape == (11, 2)


def test_categorical_columns_still_encoded(tmp_path):
    src = _csv(tmp_path, ["red", "blue", "red", "green"])
    dxrf.io.ingest(src, tmp_path / "o.zarr", target="y")
    assert dxrf.io.open_zarr(tmp_path / "o.zarr").columns == ["a", "b=blue", "b=green", "b=red"]
    # numbers-looking codes with one word: categorical only when declared so
    src = _csv(tmp_path, ["1", "2", "3", "other", "1"], name="codes.csv")
    with pytest.raises(ValueError, match=r"value 'other' at row 3"):
        dxrf.io.ingest(src, tmp_path / "c.zarr", target="y")
    dxrf.io.ingest(src, tmp_path / "c.zarr", target="y", categorical=["b"])
    assert dxrf.io.open_zarr(tmp_path / "c.zarr").columns == ["a", "b=1", "b=2", "b=3", "b=other"]


@pytest.mark.parametrize("precision,scale", [(5, 2), (38, 10), (12, 3)])
def test_parquet_decimals_are_numbers(tmp_path, precision, scale):
    vals = [decimal.Decimal("1.25"), decimal.Decimal("-2.5"), None, decimal.Decimal("7")]
    t = pa.table({"a": pa.array(vals, pa.decimal128(precision, scale)), "y": [1.0, 2.0, 3.0, 4.0]})
    pq.write_table(t, tmp_path / "d.parquet")
    dxrf.io.ingest(tmp_path / "d.parquet", tmp_path / "o.zarr", target="y", nan_policy="drop")
    ds = dxrf.io.open_zarr(tmp_path / "o.zarr")
    assert ds.columns == ["a"]
    np.testing.assert_array_equal(ds.X.compute()[:, 0], [1.25, -2.5, 7.0])


@pytest.mark.parametrize("array", [
    pa.array([datetime.datetime(2020, 1, d) for d in (1, 2, 3)]),
    pa.array([datetime.date(2020, 1, d) for d in (1, 2, 3)]),
    pa.array([datetime.timedelta(seconds=s) for s in (1, 2, 3)]),
    pa.array([datetime.time(1, s) for s in (1, 2, 3)]),
    pa.array([datetime.datetime(2020, 1, d) for d in (1, 2, 3)]).dictionary_encode(),
])
def test_parquet_dates_and_times_refused(tmp_path, array):
    pq.write_table(pa.table({"t": array, "a": [1.0, 2.0, 3.0], "y": [1.0, 2.0, 3.0]}), tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"column 't' .* holds dates or times .*convert it to numbers first"):
        dxrf.io.ingest(tmp_path / "t.parquet", tmp_path / "o.zarr", target="y")
    assert list(tmp_path.glob("o.zarr*")) == []
    dxrf.io.ingest(tmp_path / "t.parquet", tmp_path / "o.zarr", target="y", drop_columns=["t"])


def test_dates_from_a_transform_refused(tmp_path):
    src = _csv(tmp_path, NUMS)

    def with_date(df):
        return df.assign(when=pd.Timestamp("2020-01-01") + pd.to_timedelta(df["a"], unit="D"))

    with pytest.raises(ValueError, match=r"column 'when' holds dates or times"):
        dxrf.io.ingest(src, tmp_path / "o.zarr", target="y", transform=with_date)


def test_codes_with_leading_zeros_stay_categorical(tmp_path):
    src = _csv(tmp_path, ["01", "2", "01", "A7", "007"])
    dxrf.io.ingest(src, tmp_path / "o.zarr", target="y")
    assert dxrf.io.open_zarr(tmp_path / "o.zarr").columns == ["a", "b=007", "b=01", "b=2", "b=A7"]
    # ... but a control character is damage even among codes
    src = _csv(tmp_path, ["01", "2", "x\x00", "A7"], name="nul.csv")
    with pytest.raises(ValueError, match=r"column 'b' holds numbers but has the value"):
        dxrf.io.ingest(src, tmp_path / "n.zarr", target="y")
