"""The first hour with the `dxrf` command: ingest options, split, prediction files, help, quiet output."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import dxrf
import dxrf.io
from dxrf.cli import commands as cli


def run_dxrf(*args: str, env_extra: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dxrf.cli", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env_extra or {})}, **kwargs)


def run_main(capsys, *args: str) -> tuple[int, str, str]:
    """``dxrf ARGS`` in this process (commands without a cluster); (status, stdout, stderr)."""
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        rc = cli.main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def tables(tmp_path):
    """A training CSV saved with its row index, and test CSVs: a level missing, columns reordered, an unseen level."""
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({
        "a": rng.normal(size=n),
        "colour": rng.choice(["red", "green", "blue"], n),
        "b": rng.normal(size=n),
        "y": rng.choice(["no", "yes"], n),
    })
    df.to_csv(tmp_path / "train.csv")  # the index becomes the column 'Unnamed: 0'
    test = df.iloc[:60]
    test = test[test.colour != "green"][["b", "colour", "a", "y"]]
    test.to_csv(tmp_path / "test.csv", index=False)
    unseen = test.copy()
    unseen.loc[unseen.index[4], "colour"] = "purple"
    unseen.to_csv(tmp_path / "unseen.csv", index=False)
    return tmp_path, df, test


def test_ingest_warns_about_a_saved_row_index_and_drop_removes_it(capsys, tables):
    d, df, _ = tables
    # a real process: pytest would catch the warning before it reaches stderr
    proc = run_dxrf("ingest", str(d / "train.csv"), str(d / "with-index.zarr"), "--target", "y")
    assert proc.returncode == 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    err = proc.stderr
    assert len(lines) == 1 and lines[0].startswith("dxrf: warning: column 'Unnamed: 0'"), err
    assert "--drop 'Unnamed: 0'" in lines[0]
    rc, out, err = run_main(capsys, "ingest", str(d / "train.csv"), str(d / "train.zarr"), "--target", "y",
                            "--drop", "Unnamed: 0")
    assert rc == 0 and err == ""
    assert dxrf.io.open_zarr(d / "train.zarr").columns == ["a", "colour=blue", "colour=green", "colour=red", "b"]


@pytest.mark.parametrize("name,values,warned", [
    ("id", np.arange(5, 305), True),
    ("INDEX", np.arange(300, 0, -1), True),
    ("id", np.r_[np.arange(150), np.arange(150)], False),  # not monotone
    ("id", np.arange(300) + 0.5, False),  # not integers
    ("count", np.arange(300), False),  # not named like an index
])
def test_index_warning_cases(tmp_path, name, values, warned):
    df = pd.DataFrame({name: values, "x": np.linspace(0, 1, 300)})
    df.to_csv(tmp_path / "t.csv", index=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dxrf.io.ingest(tmp_path / "t.csv", tmp_path / "t.zarr", chunk_rows=64)
    got = [str(w.message) for w in caught if "row index" in str(w.message)]
    assert bool(got) == warned, got


def test_levels_from_gives_the_training_columns(capsys, tables):
    d, df, test = tables
    assert run_main(capsys, "ingest", str(d / "train.csv"), str(d / "train.zarr"), "--target", "y",
                    "--drop", "Unnamed: 0")[0] == 0
    rc, out, err = run_main(capsys, "ingest", str(d / "test.csv"), str(d / "test.zarr"), "--target", "y",
                            "--levels-from", str(d / "train.zarr"))
    assert rc == 0, err
    train, tst = dxrf.io.open_zarr(d / "train.zarr"), dxrf.io.open_zarr(d / "test.zarr")
    assert tst.columns == train.columns and tst.classes == train.classes
    X = tst.X.compute()
    np.testing.assert_array_equal(X[:, 2], 0)  # colour=green: absent from the test file, all zeros
    np.testing.assert_allclose(X[:, 0], test["a"].to_numpy(np.float32))
    np.testing.assert_allclose(X[:, 4], test["b"].to_numpy(np.float32))
    np.testing.assert_array_equal(X[:, 1], (test["colour"] == "blue").to_numpy())
    # its statistics are its own rows'
    np.testing.assert_allclose(tst.x_mean[0], test["a"].mean(), rtol=1e-5)
    # without --levels-from the columns differ (what the option is for)
    assert run_main(capsys, "ingest", str(d / "test.csv"), str(d / "plain.zarr"), "--target", "y")[0] == 0
    assert dxrf.io.open_zarr(d / "plain.zarr").columns != train.columns


def test_handle_unknown(capsys, tables):
    d, _, test = tables
    assert run_main(capsys, "ingest", str(d / "train.csv"), str(d / "train.zarr"), "--target", "y",
                    "--drop", "Unnamed: 0")[0] == 0
    args = ["ingest", str(d / "unseen.csv"), str(d / "u.zarr"), "--target", "y", "--levels-from", str(d / "train.zarr")]
    rc, out, err = run_main(capsys, *args)
    assert rc == 2 and err.count("\n") == 1
    assert "column 'colour': value 'purple' at row 4" in err
    assert not (d / "u.zarr").exists()
    rc, out, err = run_main(capsys, *args, "--handle-unknown", "ignore")
    assert rc == 0, err
    X = dxrf.io.open_zarr(d / "u.zarr").X.compute()
    np.testing.assert_array_equal(X[4, 1:4], 0)  # the unseen level: an all-zero one-hot row
    assert X[:, 1:4].sum() == len(test) - 1


@pytest.mark.parametrize("extra,message", [
    (["--drop", "zz,a"], "not in the source: ['zz']"),
    (["--levels-from", "{d}/train.zarr"], "columns ['Unnamed: 0'] are not in the training group"),
    (["--levels-from", "{d}/nowhere.zarr"], "nowhere.zarr' does not exist"),
    (["--drop", ","], "expected comma-separated column names"),
])
def test_ingest_option_errors(capsys, tables, extra, message):
    d, _, _ = tables
    assert run_main(capsys, "ingest", str(d / "train.csv"), str(d / "train.zarr"), "--target", "y",
                    "--drop", "Unnamed: 0")[0] == 0
    try:
        rc, out, err = run_main(capsys, "ingest", str(d / "train.csv"), str(d / "bad.zarr"), "--target", "y",
                                *[e.format(d=d) for e in extra])
    except SystemExit as exc:  # argparse's own errors
        rc, (out, err) = exc.code, capsys.readouterr()
    assert rc == 2 and err.startswith("dxrf: error: ") and err.count("\n") == 1, err
    assert message in err
    assert not (d / "bad.zarr").exists() and not list(d.glob("bad.zarr.tmp-*"))


def test_levels_from_with_a_missing_column_names_it(tmp_path, tables):
    d, df, test = tables
    dxrf.io.ingest(d / "train.csv", d / "train.zarr", target="y", drop_columns=["Unnamed: 0"])
    test.drop(columns=["b"]).to_csv(tmp_path / "nob.csv", index=False)
    with pytest.raises(ValueError, match=r"training group's columns \['b'\] are not in the source"):
        dxrf.io.ingest(tmp_path / "nob.csv", tmp_path / "nob.zarr", target="y", like=d / "train.zarr")
    with pytest.raises(ValueError, match="give levels or like, not both"):
        dxrf.io.ingest(d / "test.csv", tmp_path / "x.zarr", target="y", like=d / "train.zarr", levels={"colour": ["red"]})
    assert not (tmp_path / "nob.zarr").exists() and not (tmp_path / "x.zarr").exists()


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name in action._name_parser_map and sub.prog.endswith(name):
                    yield from _commands(sub, prefix + (name,))


def test_every_help_shows_defaults_without_none_noise():
    parser = cli.build_parser()
    seen = {}
    for path, p in _commands(parser):
        text = p.format_help()
        seen[path] = text
        assert "default: None" not in text and "default: False" not in text, path
    assert "rows per chunk (default: 50000)" in " ".join(seen[("ingest",)].split())
    assert "(default: error)" in seen[("ingest",)]
    assert "(default: ridge)" in seen[("fit",)] and "(default: 0)" in seen[("fit",)]
    assert any("--quiet" in t for t in seen.values())
    assert len(seen) > 8  # the commands, and the workflows under reproduce and bench


# -- split ---------------------------------------------------------------------------


@pytest.fixture
def groups(tmp_path):
    """One regression data set written with two chunkings, and a classification one."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1000, 3)) * [1.0, 5.0, 0.1] + [0.0, 10.0, -1.0]
    y = X[:, 0] * 3 + rng.normal(size=1000)
    labels = np.where(X[:, 0] > 0, "pos", "neg")
    for name, chunk_rows in (("a", 128), ("b", 300)):
        dxrf.io.write_zarr(X, tmp_path / f"{name}.zarr", y=y, chunk_rows=chunk_rows, columns=["u", "v", "w"],
                           attrs={"source": "made here", "levels": {}})
    dxrf.io.write_zarr(X, tmp_path / "clf.zarr", y=labels, chunk_rows=200)
    return tmp_path, X.astype(np.float32), y.astype(np.float32), labels


def test_split_zarr_is_a_hashed_chunking_free_partition(client, groups):
    from dxrf.engine.split import hashed_split

    d, X, y, _ = groups
    test_rows = hashed_split(0, len(X), 0.25, 7)
    for name in ("a", "b"):
        tr, te = dxrf.io.split_zarr(d / f"{name}.zarr", d / f"{name}-tr.zarr", d / f"{name}-te.zarr",
                                    fraction=0.25, seed=7)
        assert (tr.n_rows, te.n_rows) == (int((~test_rows).sum()), int(test_rows.sum()))
        train, test = dxrf.io.open_zarr(d / f"{name}-tr.zarr"), dxrf.io.open_zarr(d / f"{name}-te.zarr")
        np.testing.assert_array_equal(train.X.compute(), X[~test_rows])
        np.testing.assert_array_equal(test.y.compute(), y[test_rows])
        # statistics of each group's own rows
        np.testing.assert_allclose(train.x_mean, X[~test_rows].astype(np.float64).mean(0), rtol=1e-10)
        np.testing.assert_allclose(test.x_std, X[test_rows].astype(np.float64).std(0), rtol=1e-10)
        assert test.attrs["y_max"] == float(y[test_rows].max())
        assert train.attrs["source"] == "made here" and train.columns == ["u", "v", "w"]
        assert test.attrs["split_from"] == {"path": str(d / f"{name}.zarr"), "part": "test", "fraction": 0.25,
                                            "seed": 7}
        assert train.X.chunks[0][0] == (128 if name == "a" else 300)


def test_split_keeps_classes_and_counts_them(client, groups):
    d, _, _, labels = groups
    dxrf.io.split_zarr(d / "clf.zarr", d / "c-tr.zarr", d / "c-te.zarr", fraction=0.5, seed=3)
    train, test = dxrf.io.open_zarr(d / "c-tr.zarr"), dxrf.io.open_zarr(d / "c-te.zarr")
    assert train.classes == test.classes == ["neg", "pos"]
    total = np.array(train.attrs["class_counts"]) + np.array(test.attrs["class_counts"])
    assert total.tolist() == [int((labels == "neg").sum()), int((labels == "pos").sum())]


@pytest.mark.parametrize("kwargs,error,message", [
    ({"fraction": 0.0}, ValueError, "fraction must be a fraction in"),
    ({"fraction": 1.5}, ValueError, "fraction must be a fraction in"),
    ({"fraction": 0.2, "seed": -1}, ValueError, "seed must be"),
    ({"fraction": 0.2, "train": "a.zarr"}, ValueError, "three different paths"),
    ({"fraction": 1e-9}, ValueError, "the test part of the split has no rows"),
    ({"fraction": 0.2, "src": "nowhere.zarr"}, ValueError, "does not exist"),
])
def test_split_zarr_refuses_bad_input_and_leaves_nothing(client, groups, kwargs, error, message):
    d, _, _, _ = groups
    paths = {"src": "a.zarr", "train": "tr.zarr", "test": "te.zarr"}
    args = {k: d / kwargs.pop(k, v) for k, v in paths.items()}
    with pytest.raises(error, match=message):
        dxrf.io.split_zarr(args["src"], args["train"], args["test"], **kwargs)
    assert not (d / "tr.zarr").exists() and not (d / "te.zarr").exists()
    assert not list(d.glob("*.tmp-*"))


def test_split_command(cluster2, groups):
    d, X, _, _ = groups
    sched = ["--scheduler", cluster2.scheduler_address]
    args = ["split", str(d / "a.zarr"), str(d / "tr.zarr"), str(d / "te.zarr"), "--fraction", "0.3", "--seed", "2"]
    proc = run_dxrf(*args, *sched)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("train: ") and "fraction 0.3, seed 2" in proc.stdout and proc.stderr == ""
    n_train = dxrf.io.open_zarr(d / "tr.zarr").n_rows
    assert n_train + dxrf.io.open_zarr(d / "te.zarr").n_rows == len(X)
    proc = run_dxrf(*args, *sched)
    assert proc.returncode == 2 and proc.stderr == f"dxrf: error: {d / 'tr.zarr'} exists; pass --overwrite to replace it\n"
    proc = run_dxrf(*args[:-4], "--fraction", "0.5", "--overwrite", *sched)
    assert proc.returncode == 0, proc.stderr
    assert dxrf.io.open_zarr(d / "tr.zarr").n_rows != n_train


# -- predictions, progress and target scaling ----------------------------------------


@pytest.fixture(scope="module")
def fitted(cluster2, tmp_path_factory):
    """Train/test groups and a model fitted by `dxrf fit --scale-y` and a classifier."""
    d = tmp_path_factory.mktemp("fitted")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 3))
    y = 50.0 + 20.0 * np.sin(X[:, 0]) + 5.0 * X[:, 1] + rng.normal(size=2000)
    labels = np.where(X[:, 0] + X[:, 1] > 0, "up", "down")
    for part, rows in (("train", slice(0, 1500)), ("test", slice(1500, None))):
        dxrf.io.write_zarr(X[rows], d / f"{part}.zarr", y=y[rows], chunk_rows=300)
        dxrf.io.write_zarr(X[rows], d / f"clf-{part}.zarr", y=labels[rows], chunk_rows=300)
    sched = ["--scheduler", cluster2.scheduler_address]
    for data, out in (("train.zarr", "reg.model"), ("clf-train.zarr", "clf.model")):
        proc = run_dxrf("fit", str(d / data), "--n-components", "100", "--bandwidth", "median", "--alpha", "1e-4",
                        "--scale-y", "--out", str(d / out), *sched)
        assert proc.returncode == 0, proc.stderr
    return d, sched, y[1500:], labels[1500:]


def test_predict_writes_zarr_csv_and_parquet_alike(fitted):
    d, sched, y_test, labels = fitted
    for suffix in (".zarr", ".csv", ".parquet"):
        proc = run_dxrf("predict", str(d / "reg.model"), str(d / "test.zarr"), "--out", str(d / f"p{suffix}"), *sched)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"wrote 500 predictions to {d / f'p{suffix}'}\n"
    z = dxrf.io.open_predictions(d / "p.zarr")[0].compute()
    c = pd.read_csv(d / "p.csv")
    q = pd.read_parquet(d / "p.parquet")
    assert list(c.columns) == list(q.columns) == ["prediction"]
    np.testing.assert_allclose(c["prediction"], z, rtol=1e-12)
    np.testing.assert_array_equal(q["prediction"], z)
    # in y's units (the model kept --scale-y's map), and close to y
    assert np.mean((z - y_test) ** 2) < 0.2 * np.var(y_test)
    for suffix in (".csv", ".parquet"):
        proc = run_dxrf("predict", str(d / "clf.model"), str(d / "clf-test.zarr"), "--out", str(d / f"c{suffix}"),
                        *sched)
        assert proc.returncode == 0, proc.stderr
    c = pd.read_csv(d / "c.csv")
    assert set(c["prediction"]) <= {"up", "down"} and (c["prediction"] == labels).mean() > 0.8
    assert pd.read_parquet(d / "c.parquet")["prediction"].tolist() == c["prediction"].tolist()


def test_info_describes_a_prediction_group(fitted):
    d, sched, _, _ = fitted
    proc = run_dxrf("predict", str(d / "clf.model"), str(d / "clf-test.zarr"), "--out", str(d / "cp.zarr"), *sched)
    assert proc.returncode == 0, proc.stderr
    proc = run_dxrf("info", str(d / "cp.zarr"))
    assert proc.returncode == 0, proc.stderr
    assert "content:  predictions (array y_pred)" in proc.stdout and "rows:     500" in proc.stdout
    assert "classes:  ['down', 'up']" in proc.stdout and str(d / "clf.model") in proc.stdout


@pytest.mark.parametrize("out,message", [
    ("p.txt", "cannot tell the format of 'p.txt' from its suffix"),
    ("exists.csv", "exists.csv' (a file) exists; pass --overwrite to replace it"),
    ("nodir/p.csv", "parent directory of the destination does not exist"),
])
def test_predict_output_errors(fitted, tmp_path, out, message):
    d, sched, _, _ = fitted
    (tmp_path / "exists.csv").write_text("mine\n")
    proc = run_dxrf("predict", str(d / "reg.model"), str(d / "test.zarr"), "--out", out, *sched, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("dxrf: error: ") and message in proc.stderr, proc.stderr
    assert (tmp_path / "exists.csv").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exists.csv"]


def test_evaluate_reports_in_the_units_of_y(fitted):
    d, sched, y_test, _ = fitted
    proc = run_dxrf("evaluate", str(d / "reg.model"), str(d / "test.zarr"), *sched)
    assert proc.returncode == 0, proc.stderr
    meta = dxrf.load(d / "reg.model", with_metadata=True)[1]
    Xt = dxrf.io.open_zarr(d / "test.zarr").X.compute()
    pred = dxrf.load(d / "reg.model").predict((Xt - meta["x_mean"]) / meta["x_std"])
    mse = float(proc.stdout.split("MSE:")[1].split()[0])
    assert mse == pytest.approx(np.mean((y_test.astype(np.float32) - pred) ** 2), rel=1e-3)
    assert float(proc.stdout.split("R2:")[1].split()[0]) > 0.8


def _run_with_pty(args: list[str], stdout_path, env: dict | None = None) -> tuple[int, str]:
    """Run dxrf with stdout to a file and stderr to a pseudo-terminal; (status, what the terminal got)."""
    import pty
    import threading

    master, slave = pty.openpty()
    chunks: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the other end closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with open(stdout_path, "wb") as out:
        proc = subprocess.run([sys.executable, "-m", "dxrf.cli", *args], stdout=out, stderr=slave, timeout=300,
                              env={**os.environ, **(env or {})})
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return proc.returncode, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("command", ["evaluate", pytest.param("predict", marks=pytest.mark.slow),
                                     pytest.param("fit", marks=pytest.mark.slow)])
def test_results_on_stdout_stay_clean_and_bars_go_to_a_terminal_only(fitted, tmp_path, command):
    d, sched, _, _ = fitted
    args = {
        "evaluate": ["evaluate", str(d / "reg.model"), str(d / "test.zarr")],
        "predict": ["predict", str(d / "reg.model"), str(d / "test.zarr"), "--out", str(tmp_path / "p.zarr")],
        "fit": ["fit", str(d / "train.zarr"), "--n-components", "30", "--bandwidth", "1", "--alpha", "1e-3",
                "--out", str(tmp_path / "m.model")],
    }[command]
    show_all = {"DXRF_PROGRESS_AFTER": "0"}  # draw even the sub-second passes' bars
    # stderr a terminal: the bar is drawn there, stdout gets the results only
    rc, terminal = _run_with_pty([*args, *sched, "--overwrite"] if command == "predict" else [*args, *sched],
                                 tmp_path / "out.txt", show_all)
    assert rc == 0, terminal
    out = (tmp_path / "out.txt").read_text()
    assert out.strip() and "\r" not in out and "\x1b" not in out, out
    assert "% |" in terminal and "[#" in terminal, terminal
    # --quiet: nothing on the terminal
    # the later runs write to the same destination: predict and fit replace it
    again = ["--overwrite"] if command in ("predict", "fit") else []
    rc, terminal = _run_with_pty([*args, *sched, "--quiet", *again], tmp_path / "out2.txt", show_all)
    assert rc == 0 and terminal == "", terminal
    assert (tmp_path / "out2.txt").read_text().splitlines()[-1] == out.splitlines()[-1]
    # stderr not a terminal (a pipe or a log file): no bar, stdout clean
    proc = run_dxrf(*args, *sched, *again, env_extra=show_all)
    assert proc.returncode == 0 and proc.stderr == "" and "\r" not in proc.stdout and "\x1b" not in proc.stdout


# -- target scaling kept by the model (Python) ---------------------------------------


def test_a_model_fitted_on_scale_y_predicts_and_scores_in_the_data_units(client, fitted, tmp_path):
    d, _, y_test, _ = fitted

    def model():
        return dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(100, bandwidth=1.0, random_state=0), alpha=1e-4)

    train_s = dxrf.io.open_zarr(d / "train.zarr", standardize=True, scale_y=True)
    train = dxrf.io.open_zarr(d / "train.zarr", standardize=True)
    test = dxrf.io.open_zarr(d / "test.zarr")
    X_test = train.standardize(test.X)
    scaled = model().fit(train_s.X, train_s.y)
    plain = model().fit(train.X, train.y)
    np.testing.assert_allclose(scaled.y_scale_, [train.attrs["y_min"], train.attrs["y_max"]])
    assert plain.y_scale_ is None
    r2_scaled, r2_plain = scaled.score(X_test, test.y), plain.score(X_test, test.y)
    assert r2_plain > 0.8 and r2_scaled == pytest.approx(r2_plain, abs=0.02)
    # a test target scaled the same way scores the same (compared in the data's units)
    test_s = dxrf.io.open_zarr(d / "test.zarr", scale_y=True)
    assert scaled.score(X_test, test_s.y) == pytest.approx(r2_scaled, rel=1e-6)
    np.testing.assert_allclose(scaled.predict(X_test).compute(), plain.predict(X_test).compute(),
                               atol=0.05 * float(np.std(y_test)))
    # kept by save and load
    scaled.save(tmp_path / "s.model")
    again = dxrf.load(tmp_path / "s.model")
    np.testing.assert_array_equal(again.y_scale_, scaled.y_scale_)
    np.testing.assert_allclose(again.predict(X_test).compute(), scaled.predict(X_test).compute())
