"""The Pythonic Client: exceptions that carry the error name, buffer protocol, context manager."""

import array

import pytest

import mooncake_c
from mooncake_c import Client, MooncakeError, ObjectNotFound


def test_client_roundtrip_and_exceptions(master, daemon):
    with Client(master) as c:
        c.put("p1", b"value")
        assert c.get("p1") == b"value"
        assert c.exists("p1") and not c.exists("p-absent")
        assert c.size("p1") == 5
        with pytest.raises(ObjectNotFound) as ei:
            c.get("p-absent")
        assert ei.value.name == "OBJECT_NOT_FOUND" and ei.value.code == -704
        assert "OBJECT_NOT_FOUND" in str(ei.value) and "p-absent" in str(ei.value)
        with pytest.raises(KeyError):  # ObjectNotFound is a KeyError too
            c.size("p-absent")
        with pytest.raises(MooncakeError) as ei:
            c.put("", b"v")
        assert ei.value.name == "INVALID_KEY"
        with pytest.raises(MooncakeError) as ei:
            c.remove("p1")  # the get above holds a read lease
        assert ei.value.name == "OBJECT_HAS_LEASE"
        c.remove("p1", force=True)
        with pytest.raises(ObjectNotFound):
            c.remove("p1")
        c.remove_all(force=True)


def test_client_get_into_any_writable_buffer(master, daemon):
    with Client(master) as c:
        src = array.array("d", [1.5, 2.5, 3.5])
        c.put("arr", src)
        dst = array.array("d", [0.0, 0.0, 0.0])
        assert c.get_into("arr", dst) == 24
        assert dst == src
        small = bytearray(8)
        with pytest.raises(MooncakeError) as ei:
            c.get_into("arr", small)
        assert ei.value.name == "BUFFER_OVERFLOW"
        with pytest.raises(TypeError):
            c.get_into("arr", b"read-only bytes")
        c.put_many({"m1": b"1", "m2": bytearray(b"22")})
        assert c.get_many(["m1", "m2", "m-absent"]) == {"m1": b"1", "m2": b"22"}
        c.remove_all(force=True)


def test_client_open_failure_raises():
    with pytest.raises(MooncakeError) as ei:
        Client("127.0.0.1:1", connect_timeout_ms=500)
    assert ei.value.code < 0 and ei.value.name != "UNKNOWN_ERROR"


def test_error_for_names_every_code():
    assert mooncake_c.error_for(-704).name == "OBJECT_NOT_FOUND"
    assert isinstance(mooncake_c.error_for(-704), KeyError)
    assert mooncake_c.error_for(-10).name == "BUFFER_OVERFLOW"


def test_client_auth_token(tmp_path):
    """Against a master that wants the cluster's secret: the client with auth_token_file works,
    one without it is refused."""
    import os
    from conftest import BIN, Proc
    token = tmp_path / "token"
    token.write_text("python-binding-test-secret-0123456789\n")
    token.chmod(0o600)  # a token file others may read is refused
    m = Proc([os.path.join(BIN, "mooncake_master"), "--rpc_port=0", "--rpc_address=127.0.0.1",
              "--metrics_port=0", "--metrics_host=127.0.0.1", "--log_level=off",
              "--auth_token_file=" + str(token)])
    try:
        addr = m.ready["rpc"]
        with Client(addr, segment_size=16 << 20, auth_token_file=str(token)) as c:
            c.put("secret-key", b"v")
            assert c.get("secret-key") == b"v"
        with pytest.raises(MooncakeError):
            Client(addr, connect_timeout_ms=1000, rpc_timeout_ms=1000, log_level="off")
    finally:
        m.stop()


def _make_tls(d):
    """A throwaway CA and two certificates (master, client) made with the openssl tool."""
    import shutil
    import subprocess
    if not shutil.which("openssl"):
        pytest.skip("no openssl tool")
    ext = d / "san.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run = lambda *a: subprocess.run(a, check=True, capture_output=True)  # noqa: E731
    run("openssl", "req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.pem"),
        "-days", "2", "-subj", "/CN=ca")
    for n in ("master", "client"):
        run("openssl", "req", *ec, "-keyout", str(d / (n + ".key")), "-out",
            str(d / (n + ".csr")), "-subj", "/CN=" + n)
        run("openssl", "x509", "-req", "-in", str(d / (n + ".csr")), "-CA", str(d / "ca.pem"),
            "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-extfile", str(ext), "-out",
            str(d / (n + ".pem")), "-days", "2")


def test_client_tls(tmp_path):
    """Against a TLS master that requires client certificates: Client and the store's setup
    with the TLS files work; a client without them is refused with TLS_REQUIRED."""
    import os
    from conftest import BIN, Proc
    from mooncake_c.store import MooncakeDistributedStore
    _make_tls(tmp_path)
    p = lambda n: str(tmp_path / n)  # noqa: E731
    m = Proc([os.path.join(BIN, "mooncake_master"), "--rpc_port=0", "--rpc_address=127.0.0.1",
              "--metrics_port=0", "--metrics_host=127.0.0.1", "--log_level=off",
              "--tls_cert_file=" + p("master.pem"), "--tls_key_file=" + p("master.key"),
              "--tls_ca_file=" + p("ca.pem")])
    try:
        addr = m.ready["rpc"]
        tls = dict(tls_cert_file=p("client.pem"), tls_key_file=p("client.key"),
                   tls_ca_file=p("ca.pem"))
        with Client(addr, segment_size=16 << 20, **tls) as c:
            v = os.urandom(1 << 20)
            c.put("tls-key", v)
            assert c.get("tls-key") == v
        s = MooncakeDistributedStore()
        assert s.setup("127.0.0.1", global_segment_size=16 << 20, master_server_addr=addr,
                       **tls) == 0
        assert s.get("tls-key") is not None
        s.close()
        with pytest.raises(MooncakeError) as ei:
            Client(addr, connect_timeout_ms=1000, rpc_timeout_ms=1000, log_level="off")
        assert ei.value.name == "TLS_REQUIRED"
    finally:
        m.stop()
