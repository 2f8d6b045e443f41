"""IngestOptions mirrors the keyword arguments of dxrf.io.ingest: names, defaults and documentation."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

import dxrf.io as dio
from dxrf.io import IngestOptions, ingest, ingest_with, open_zarr


def test_fields_are_the_keyword_arguments():
    params = inspect.signature(ingest).parameters
    kw = {k: p.default for k, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY and k != "_source"}
    fields = {f.name: f.default for f in dataclasses.fields(IngestOptions)}
    assert fields == kw


def test_every_option_is_documented_on_ingest():
    doc = ingest.__doc__
    assert "{options}" not in doc
    for f in dataclasses.fields(IngestOptions):
        assert f.name in doc
    assert doc.index("    dest : path or URL") < doc.index("    target : str or int") < doc.index("    Returns")


def test_options_are_checked(tmp_path):
    opts = IngestOptions(chunk_rows=10, drop_columns=("a",), max_levels=np.int64(5))
    checked = opts.checked("csv")
    assert checked.drop_columns == ["a"] and type(checked.max_levels) is int
    with pytest.raises(ValueError, match="only apply to CSV and Parquet"):
        IngestOptions(sep=";").checked("npy")
    with pytest.raises(TypeError, match="drop_columns"):
        IngestOptions(drop_columns="a").checked("csv")


def test_ingest_with_equals_ingest(tmp_path):
    src = tmp_path / "a.csv"
    src.write_text("x,y,t\n1,2,a\n3,4,b\n5,6,a\n")
    a = ingest(src, tmp_path / "a.zarr", target="t", chunk_rows=2)
    b = ingest_with(src, tmp_path / "b.zarr", IngestOptions(target="t", chunk_rows=2))
    assert a.n_rows == b.n_rows == 3
    da_, db = open_zarr(tmp_path / "a.zarr"), open_zarr(tmp_path / "b.zarr")
    np.testing.assert_array_equal(da_.X.compute(), db.X.compute())
    np.testing.assert_array_equal(da_.y.compute(), db.y.compute())
    assert da_.attrs["source"] == db.attrs["source"] == str(src)
    assert "IngestOptions" in dio.__all__ and "ingest_with" in dio.__all__
