"""The flights data sets, ``nycflights13`` and ``flights_3m``: loaded whole, or streamed to zarr
through :func:`dxrf.io.ingest` with the same random split of the raw rows."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd

from dxrf import io as _io
from dxrf.datasets.base import Dataset, _check_n_rows, _check_test_size, _count_data_rows, _file, _split_mask


NYCFLIGHTS_FEATURES = [
    "month", "day", "dep_time", "sched_dep_time", "dep_delay", "arr_time", "sched_arr_time",
    "air_time", "distance", "hour", "minute",
]
FLIGHTS_3M_FEATURES = ["distance", "hour", "day_of_year"]


# --------------------------------------------------------------------------- flights


def _flights_3m_features(df: pd.DataFrame) -> pd.DataFrame:
    """distance, fractional hour of day and day of year from the raw columns."""
    t = pd.to_datetime(df["date"], format="%Y-%m-%d %H:%M:%S")
    return pd.DataFrame(
        {
            "distance": df["distance"],
            "hour": t.dt.hour + t.dt.minute / 60.0,
            "day_of_year": t.dt.day_of_year,
            "delay": df["delay"],
        },
        index=df.index,
    )


_FLIGHTS = {
    "nycflights13": dict(
        file="nycflights13/flights.csv.gz",
        usecols=[*NYCFLIGHTS_FEATURES, "arr_delay"],
        target="arr_delay",
        features=NYCFLIGHTS_FEATURES,
        derive=None,
        title="nycflights13 flights (all flights departing NYC in 2013, CC0): regression of arr_delay "
        "(minutes) on the numeric columns",
    ),
    "flights_3m": dict(
        file="vega_flights_3m/flights-3m.csv.gz",
        usecols=["date", "delay", "distance"],
        target="delay",
        features=FLIGHTS_3M_FEATURES,
        derive=_flights_3m_features,
        title="Vega flights-3m (US BTS on-time data, Jan-Jun 2001): regression of delay (minutes) on "
        "distance, hour of day (fractional, from date) and day of year",
    ),
}


def _flights_frame(name: str, df: pd.DataFrame) -> pd.DataFrame:
    spec = _FLIGHTS[name]
    if spec["derive"] is not None:
        df = spec["derive"](df)
    return df[[*spec["features"], spec["target"]]]


def _load_flights(
    name: str, *, test_size: float = 0.1, random_state: int = 0, n_rows: int | None = None
) -> Dataset:
    test_size = _check_test_size(test_size)
    n_rows = _check_n_rows(n_rows)
    spec = _FLIGHTS[name]
    path = _file(spec["file"])
    df = _flights_frame(name, pd.read_csv(path, usecols=spec["usecols"], nrows=n_rows))
    n_raw = len(df)
    mask = _split_mask(n_raw, test_size, random_state)
    parts = []
    dropped = []
    for sel in (~mask, mask):
        part = df[sel]
        ok = part.notna().all(axis=1)
        dropped.append(int((~ok).sum()))
        parts.append(part[ok])
    feats, t = spec["features"], spec["target"]
    desc = (
        f"{spec['title']}.\n{n_raw} raw rows; random split of the raw rows (random_state={random_state}, "
        f"test_size={test_size}), then rows with a missing value dropped: {sum(dropped)} dropped "
        f"({dropped[0]} train, {dropped[1]} test); {len(parts[0])} train / {len(parts[1])} test."
    )
    return Dataset(
        name=name,
        X_train=parts[0][feats].to_numpy(np.float64),
        y_train=parts[0][t].to_numpy(np.float64),
        X_test=parts[1][feats].to_numpy(np.float64),
        y_test=parts[1][t].to_numpy(np.float64),
        feature_names=list(feats),
        task="regression",
        classes=None,
        description=desc,
        source_path=str(path),
        target_name=t,
    )


def _flights_to_zarr(
    name: str,
    dest: str | os.PathLike,
    *,
    split: str,
    chunk_rows: int,
    overwrite: bool,
    progress: Any,
    test_size: float = 0.1,
    random_state: int = 0,
    n_rows: int | None = None,
) -> _io.IngestReport:
    test_size = _check_test_size(test_size)
    n_rows = _check_n_rows(n_rows)
    spec = _FLIGHTS[name]
    path = _file(spec["file"])
    n_raw = _count_data_rows(path)
    if n_rows is not None:
        n_raw = min(n_raw, n_rows)
    # the same mask as load(): over the raw rows, before dropping NAs
    keep = _split_mask(n_raw, test_size, random_state) == (split == "test")

    def transform(df: pd.DataFrame) -> pd.DataFrame:
        df = _flights_frame(name, df)
        return df[keep[df.index.to_numpy()]]

    return _io.ingest(
        path,
        dest,
        format="csv",
        target=spec["target"],
        task="regression",
        chunk_rows=chunk_rows,
        nan_policy="drop",
        transform=transform,
        n_rows=n_rows,
        read_options={"usecols": spec["usecols"]},
        overwrite=overwrite,
        progress=progress,
    )
