"""TLS: a pass on a scheduler that requires certificates; clients without them are refused.

A self-signed CA and certificates for the scheduler, the worker and the
client are generated in ``tmp_path``; a TLS scheduler and one worker listen
on loopback (``require_encryption=True``). dxrf connects with
``get_client("tls://...", security=...)`` or, without ``security=``, through
Dask's own configuration (``distributed.comm.tls.*``, also from environment
variables for the command line).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import dask
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from distributed import Client, Security

import dxrf
import dxrf.io
from dxrf.cluster import get_client, local_cluster

REFUSED = (OSError, TimeoutError, ssl.SSLError)  # CommClosedError is an OSError


# -- certificates ------------------------------------------------------------------------


def _name(cn: str):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(directory: Path, stem: str, key, cert) -> tuple[str, str]:
    key_path, cert_path = directory / f"{stem}.key", directory / f"{stem}.pem"
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(cert_path), str(key_path)


def _builder(subject: str, issuer, public_key):
    now = datetime.datetime.now(datetime.timezone.utc)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def make_ca(directory: Path, name: str):
    """A self-signed certificate authority: (key, certificate, path of its PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, encipher_only=False, decipher_only=False,
    )
    cert = (
        _builder(name, _name(name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert, _write(directory, name, key, cert)[0]


def make_leaf(directory: Path, name: str, ca_key, ca_cert) -> tuple[str, str]:
    """A certificate for loopback signed by the CA: (cert path, key path)."""
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    eku = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH])
    cert = (
        _builder(name, ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(san, critical=False)
        .add_extension(eku, critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return _write(directory, name, key, cert)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca_key, ca_cert, ca = make_ca(d, "dxrf-test-ca")
    out = {"ca": ca}
    for role in ("scheduler", "worker", "client"):
        out[role] = make_leaf(d, role, ca_key, ca_cert)
    rogue_key, rogue_cert, out["rogue_ca"] = make_ca(d, "rogue-ca")
    out["rogue"] = make_leaf(d, "rogue", rogue_key, rogue_cert)
    return out


def client_security(pki) -> Security:
    cert, key = pki["client"]
    return Security(tls_ca_file=pki["ca"], tls_client_cert=cert, tls_client_key=key, require_encryption=True)


@pytest.fixture(scope="module")
def tls_scheduler(pki):
    """A TLS scheduler and one worker on loopback; only certificates signed by the CA get in."""
    (s_cert, s_key), (w_cert, w_key), (c_cert, c_key) = pki["scheduler"], pki["worker"], pki["client"]
    security = Security(
        tls_ca_file=pki["ca"],
        tls_scheduler_cert=s_cert,
        tls_scheduler_key=s_key,
        tls_worker_cert=w_cert,
        tls_worker_key=w_key,
        tls_client_cert=c_cert,  # the cluster object talks to its scheduler as a client
        tls_client_key=c_key,
        require_encryption=True,
    )
    with local_cluster(1, protocol="tls://", host="127.0.0.1", security=security, dashboard_address=":0") as cluster:
        assert cluster.scheduler_address.startswith("tls://127.0.0.1:")
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("tls-data") / "data.zarr"
    rng = np.random.default_rng(0)
    X = rng.normal(size=(4000, 5))
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    dxrf.io.write_zarr(X, path, y=y, chunk_rows=500)
    return str(path)


def _pass(data_path: str):
    ds = dxrf.io.open_zarr(data_path)
    fmap = dxrf.RandomFourierFeatures(40, bandwidth=1.5, dtype="float64", random_state=0).fit(ds.X)
    stats = dxrf.accumulate(ds.X, ds.y, features=fmap, progress=False)
    X, y = ds.compute()
    ref = dxrf.accumulate(X, y, features=fmap)  # NumPy: in this process, no cluster
    return stats, ref


def _same_stats(a, b) -> None:
    assert a.n == b.n
    for name in ("gram", "sum", "cross"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=1e-10, atol=1e-12)


# -- tests -------------------------------------------------------------------------------


def test_pass_over_tls_with_security(tls_scheduler, pki, data):
    with get_client(tls_scheduler, security=client_security(pki)) as client:
        info = client.scheduler_info()
        assert all(addr.startswith("tls://") for addr in info["workers"])
        assert len(info["workers"]) == 1
        stats, ref = _pass(data)
    _same_stats(stats, ref)


def test_tls_through_dask_configuration(tls_scheduler, pki, data):
    cert, key = pki["client"]
    config = {
        "distributed.comm.tls.ca-file": pki["ca"],
        "distributed.comm.tls.client.cert": cert,
        "distributed.comm.tls.client.key": key,
        "distributed.comm.require-encryption": True,
    }
    with dask.config.set(config):
        with get_client(tls_scheduler) as client:  # no security=: Dask's configuration has the certificates
            assert client.submit(lambda v: v + 1, 41).result() == 42
            stats, ref = _pass(data)
    _same_stats(stats, ref)


def test_command_line_over_tls_from_environment(tls_scheduler, pki, data, tmp_path):
    cert, key = pki["client"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    base = [sys.executable, "-m", "dxrf.cli", "fit", data, "--bandwidth", "1.0", "--n-components", "20",
            "--scheduler", tls_scheduler]
    # without certificates: one clear line, exit status 2, no model written
    out = tmp_path / "refused.model"
    proc = subprocess.run(base + ["--out", str(out)], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dxrf: error:") and "TLS" in lines[0], proc.stderr
    assert not out.exists()
    # with Dask's configuration in the environment
    env.update(
        DASK_DISTRIBUTED__COMM__TLS__CA_FILE=pki["ca"],
        DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT=cert,
        DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY=key,
        DASK_DISTRIBUTED__COMM__REQUIRE_ENCRYPTION="True",
    )
    out = tmp_path / "tls.model"
    proc = subprocess.run(base + ["--out", str(out)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    model = dxrf.load(out)
    assert isinstance(model, dxrf.RandomFeatureRidge) and model.kernel_.n_components == 20


def _refused_quickly(fn) -> BaseException:
    t0 = time.monotonic()
    with pytest.raises(REFUSED) as info:
        client = fn()
        client.close()  # pragma: no cover - only reached when the connection was accepted
    assert time.monotonic() - t0 < 20.0
    return info.value


def test_clients_without_certificates_are_refused(tls_scheduler, pki):
    host, port = tls_scheduler.removeprefix("tls://").rsplit(":", 1)
    # no certificates anywhere: dxrf says what is missing before trying
    with pytest.raises(ValueError, match="no client certificate is configured"):
        get_client(tls_scheduler)
    # certificates from another CA: the scheduler rejects the handshake
    rogue_cert, rogue_key = pki["rogue"]
    rogue = Security(tls_ca_file=pki["rogue_ca"], tls_client_cert=rogue_cert, tls_client_key=rogue_key)
    _refused_quickly(lambda: Client(tls_scheduler, security=rogue, timeout=5))
    # a certificate the scheduler's CA did not sign, even when trusting that CA
    impostor = Security(tls_ca_file=pki["ca"], tls_client_cert=rogue_cert, tls_client_key=rogue_key)
    _refused_quickly(lambda: Client(tls_scheduler, security=impostor, timeout=5))
    # plain TCP to the TLS port
    _refused_quickly(lambda: Client(f"tcp://{host}:{port}", timeout=5))
    # TLS trusting the right CA but presenting no client certificate: the
    # server demands one (with TLS 1.3 the refusal arrives on the first read)
    ctx = ssl.create_default_context(cafile=pki["ca"])
    ctx.check_hostname = False
    t0 = time.monotonic()
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with socket.create_connection((host, int(port)), timeout=5) as raw, ctx.wrap_socket(raw) as conn:
            conn.sendall(b"\x00" * 8)
            if not conn.recv(1):
                raise ConnectionError("closed by the scheduler")
    assert time.monotonic() - t0 < 10.0
    # the right certificates still work afterwards
    with get_client(tls_scheduler, security=client_security(pki)) as client:
        assert client.submit(lambda v: 2 * v, 21).result() == 42
