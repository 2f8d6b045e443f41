"""Object storage end to end against a real S3-compatible server (moto) on 127.0.0.1.

The server runs in a subprocess for the module; credentials and the endpoint
reach dxrf as storage options, ``--storage-option`` flags or fsspec's
``FSSPEC_S3_*`` variables. Runs are compared bitwise with the same run on
local disk.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("s3fs")
pytest.importorskip("flask")  # moto's server mode

import dxrf  # noqa: E402
import dxrf.io  # noqa: E402
from dxrf.io.integrity import IntegrityError  # noqa: E402
from dxrf.io.predictions import open_predictions, write_predictions  # noqa: E402
from workflows._common import moto_server  # noqa: E402

DATA = Path("/work/shared/data/uci_regression_yang2016/parkinsons.csv.gz")
NAMES = [f"x{j}" for j in range(20)] + ["target"]
BUCKET = "dxrf-test"
ROOT = str(Path(__file__).resolve().parents[2])


def _moto(env: dict[str, str] | None = None):
    """A moto S3 server process on a free port of 127.0.0.1 (the benchmarks' helper); yields its URL."""
    return moto_server(env)


@pytest.fixture(scope="module")
def s3() -> Iterator[dict]:
    """Storage options for a bucket on a fresh S3 server (moto accepts any credentials)."""
    import s3fs

    with _moto() as endpoint:
        options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}
        s3fs.S3FileSystem(**options, skip_instance_cache=True).mkdir(BUCKET)
        yield options


# moto checks signatures after this many requests: those that create the one IAM user and its key
_UNCHECKED_SETUP_REQUESTS = 3


@pytest.fixture(scope="module")
def s3_checking() -> Iterator[dict]:
    """Storage options of an IAM user on a server that checks every request's signature.

    Its bucket holds one object, ``probe``. Note: moto (issue 5948) also refuses correctly
    signed listings with a prefix and a delimiter, so no zarr group can be read there even
    with the right secret; single-object requests are checked correctly.
    """
    import boto3

    with _moto({"INITIAL_NO_AUTH_ACTION_COUNT": str(_UNCHECKED_SETUP_REQUESTS)}) as endpoint:
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="setup", aws_secret_access_key="setup")
        iam.create_user(UserName="dxrf")
        key = iam.create_access_key(UserName="dxrf")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        iam.put_user_policy(UserName="dxrf", PolicyName="s3", PolicyDocument=json.dumps(policy))
        options = {"endpoint_url": endpoint, "key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}
        fs = _fs(options)
        fs.mkdir(BUCKET)
        fs.pipe_file(f"{BUCKET}/probe", b"signed")
        yield options


def test_checking_server_tells_the_right_secret_from_a_wrong_one(s3_checking):
    """So that "access denied" below comes from the wrong secret, not from a server refusing all."""
    assert _fs(s3_checking).cat_file(f"{BUCKET}/probe") == b"signed"
    for wrong in ({"secret": "wrong"}, {"key": "AKIANOSUCHKEY0000000"}, {"key": "testing", "secret": "testing"}):
        with pytest.raises(PermissionError):
            _fs({**s3_checking, **wrong}).cat_file(f"{BUCKET}/probe")


def run_dxrf(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "dxrf.cli", *args], capture_output=True, text=True,
                          timeout=300, env=full)


def _ingest(dest: str, **kw) -> dxrf.io.IngestReport:
    return dxrf.io.ingest(str(DATA), dest, header=False, names=NAMES, target="target", chunk_rows=1000, **kw)


def _model() -> dxrf.RandomFeatureRidge:
    return dxrf.RandomFeatureRidge(dxrf.RandomFourierFeatures(64, bandwidth=3.0, random_state=0), alpha=1e-3)


def test_end_to_end_on_s3_equals_local_disk(s3, client, tmp_path):
    url = f"s3://{BUCKET}/e2e"
    local = tmp_path / "local"
    local.mkdir()
    r_s3 = _ingest(f"{url}/data.zarr", storage_options=s3)
    r_local = _ingest(str(local / "data.zarr"))
    assert r_s3.path == f"{url}/data.zarr" and r_s3.n_rows == r_local.n_rows == 5875

    ds_s3 = dxrf.io.open_zarr(f"{url}/data.zarr", storage_options=s3)
    ds_local = dxrf.io.open_zarr(local / "data.zarr")
    # the graph holds the zarr array (store path and options), no data: workers read the chunks from S3
    assert len(pickle.dumps(dict(ds_s3.X.__dask_graph__()))) < 100_000
    np.testing.assert_array_equal(ds_s3.X.compute(), ds_local.X.compute())
    np.testing.assert_array_equal(ds_s3.x_std, ds_local.x_std)

    m_s3 = _model().fit(ds_s3.X, ds_s3.y)  # on the cluster's worker processes, reading from S3
    m_local = _model().fit(ds_local.X, ds_local.y)
    assert m_s3.save(f"{url}/model.zarr", storage_options=s3) == f"{url}/model.zarr"
    m_local.save(local / "model.zarr")
    loaded = dxrf.load(f"{url}/model.zarr", storage_options=s3)
    for name in ("coef_", "intercept_"):
        np.testing.assert_array_equal(np.asarray(getattr(loaded, name)), np.asarray(getattr(m_local, name)))

    for suffix in ("zarr", "csv"):
        write_predictions(loaded.predict(ds_s3.X), f"{url}/pred.{suffix}", storage_options=s3)
        write_predictions(m_local.predict(ds_local.X), local / f"pred.{suffix}")
    got, attrs = open_predictions(f"{url}/pred.zarr", storage_options=s3)
    want, _ = open_predictions(local / "pred.zarr")
    np.testing.assert_array_equal(got.compute(), want.compute())
    assert attrs["dxrf_kind"] == "predictions"
    fs = _fs(s3)
    assert fs.cat_file(f"{BUCKET}/e2e/pred.csv") == (local / "pred.csv").read_bytes()
    # nothing but the published groups and the file: every temporary prefix was deleted
    assert sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/e2e", refresh=True)) == [
        "data.zarr", "model.zarr", "pred.csv", "pred.zarr"]


def _fs(options: dict):
    import s3fs

    return s3fs.S3FileSystem(**options, skip_instance_cache=True)


def test_integrity_checks_run_on_s3(s3):
    """A missing chunk and a changed record are found through the store's listing, as on disk."""
    url = f"s3://{BUCKET}/integrity/data.zarr"
    dxrf.io.write_zarr(np.arange(40.0).reshape(20, 2), url, y=np.arange(20.0), chunk_rows=5, storage_options=s3)
    fs = _fs(s3)
    fs.rm_file(f"{BUCKET}/integrity/data.zarr/X/c/2/0")
    with pytest.raises(IntegrityError, match=r"chunk 'c/2/0' .* is missing from the store"):
        dxrf.io.open_zarr(url, storage_options=s3)


def test_publication_refuses_and_cleans(s3):
    url = f"s3://{BUCKET}/publish/data.zarr"
    X = np.arange(40.0).reshape(20, 2)
    dxrf.io.write_zarr(X, url, chunk_rows=5, storage_options=s3)
    with pytest.raises(dxrf.io.DestinationExistsError, match="exists; pass overwrite=True"):
        dxrf.io.write_zarr(X, url, chunk_rows=5, storage_options=s3)
    # a model never replaces a data group, even with overwrite
    with pytest.raises(ValueError, match=r"refusing to overwrite .* a dxrf data group, and this writes a model"):
        _model().save(url, overwrite=True, storage_options=s3)
    # a bad row: nothing published, the old group intact, no temporary prefix left
    with pytest.raises(ValueError, match="non-finite value"):
        dxrf.io.write_zarr(np.full((4, 2), np.nan), url, overwrite=True, storage_options=s3)
    assert dxrf.io.open_zarr(url, storage_options=s3).n_rows == 20
    fs = _fs(s3)
    assert [p.rsplit("/", 1)[-1] for p in fs.ls(f"{BUCKET}/publish", refresh=True)] == ["data.zarr"]
    # an interrupted publication (no root metadata, the marker left) is refused by readers ...
    fs.rm_file(f"{BUCKET}/publish/data.zarr/zarr.json")
    fs.pipe_file(f"{BUCKET}/publish/data.zarr/.dxrf-publishing", b"{}")
    with pytest.raises(ValueError, match="interrupted publication"):
        dxrf.io.open_zarr(url, storage_options=s3)
    # ... and cleaned by the next write, without overwrite (there is no group there)
    dxrf.io.write_zarr(X[:10], url, chunk_rows=5, storage_options=s3)
    assert dxrf.io.open_zarr(url, storage_options=s3).n_rows == 10
    assert not fs.exists(f"{BUCKET}/publish/data.zarr/.dxrf-publishing")
    assert not fs.exists(f"{BUCKET}/publish/data.zarr/X/c/3/0")  # the old group's chunks are gone


def _bad(case: str, s3: dict, s3_checking: dict) -> tuple[str, dict]:
    if case == "bad credentials":  # the IAM user's key with a wrong secret
        return f"s3://{BUCKET}/e2e/data.zarr", {**s3_checking, "secret": "wrong"}
    if case == "missing bucket":
        return "s3://no-such-bucket/data.zarr", s3
    return f"s3://{BUCKET}/no/such/data.zarr", s3


@pytest.mark.parametrize("case, message", [
    ("bad credentials", "access denied by the object store"),
    ("missing bucket", "the bucket 'no-such-bucket' does not exist"),
    ("missing key", "does not exist"),
])
def test_errors_name_the_url(s3, s3_checking, case, message):
    url, options = _bad(case, s3, s3_checking)
    with pytest.raises(ValueError, match=message) as info:
        dxrf.io.open_zarr(url, storage_options=options)
    assert url in str(info.value)
    with pytest.raises(ValueError, match=message):
        dxrf.load(url, storage_options=options)
    flags = [f"--storage-option={k}={v}" for k, v in options.items()]
    out = run_dxrf("info", url, *flags)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dxrf: error: ") and message in lines[0] and url in lines[0], out.stderr


def test_cli_end_to_end_with_flags_and_fsspec_variables(s3, scheduler, tmp_path):
    url = f"s3://{BUCKET}/cli"
    flags = [f"--storage-option=endpoint_url={s3['endpoint_url']}", "--storage-option=key=testing",
             "--storage-option=secret=testing"]
    out = run_dxrf("ingest", str(DATA), f"{url}/data.zarr", "--no-header", "--names", ",".join(NAMES),
                   "--target", "target", "--chunk-rows", "2000", *flags)
    assert out.returncode == 0, out.stderr
    # fsspec's own configuration: FSSPEC_S3_<OPTION> variables
    env = {"FSSPEC_S3_ENDPOINT_URL": s3["endpoint_url"], "FSSPEC_S3_KEY": "testing", "FSSPEC_S3_SECRET": "testing"}
    out = run_dxrf("fit", f"{url}/data.zarr", "--n-components", "32", "--alpha", "0.001", "--bandwidth", "3",
                   "--out", f"{url}/model.zarr", "--scheduler", scheduler, env=env)
    assert out.returncode == 0, out.stderr
    out = run_dxrf("predict", f"{url}/model.zarr", f"{url}/data.zarr", "--out", f"{url}/pred.csv",
                   "--scheduler", scheduler, env=env)
    assert out.returncode == 0, out.stderr
    again = run_dxrf("predict", f"{url}/model.zarr", f"{url}/data.zarr", "--out", f"{url}/pred.csv",
                     "--scheduler", scheduler, env=env)
    assert again.returncode == 2 and "exists; pass --overwrite" in again.stderr
    text = _fs(s3).cat_file(f"{BUCKET}/cli/pred.csv").decode().splitlines()
    assert text[0] == "prediction" and len(text) == 5876
    out = run_dxrf("info", f"{url}/data.zarr", env=env)
    assert out.returncode == 0 and "rows:     5875" in out.stdout, out.stderr


@pytest.fixture(scope="module")
def scheduler(cluster2):
    return cluster2.scheduler_address


def test_storage_option_values_parse_as_json():
    from dxrf.cli.commands import build_parser, storage_options

    args = build_parser().parse_args(["info", "x.zarr", "--storage-option", "anon=true", "--storage-option",
                                      'client_kwargs={"region_name": "eu-west-1"}', "--storage-option", "key=abc"])
    assert storage_options(args) == {"anon": True, "client_kwargs": {"region_name": "eu-west-1"}, "key": "abc"}
