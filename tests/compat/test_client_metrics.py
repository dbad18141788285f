"""Client-side metrics: the library counts its own puts, gets (by tier), bytes, errors by code
and call latencies, readable through the public C call mc_client_metrics_text; the daemon
serves the same families on --enable_client_http_server / --client_http_port."""

import ctypes
import re

import pytest

from mcproc import Proc, binpath, free_port, http, master_default_ports

import mooncake_c  # noqa: E402  (PYTHONPATH=<build>/python: a missing package fails)
from mooncake_c import _native  # noqa: E402


def metric(text, name, labels=None):
    """The value of one series, or None when absent."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in (labels or {}).items()):
            return float(m.group(3))
    return None


def metrics_text(client):
    fn = _native.lib.mc_client_metrics_text
    fn.restype = ctypes.c_int64
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    need = fn(client._core.handle, None, 0)
    assert need > 0
    buf = ctypes.create_string_buffer(need + 1)
    assert fn(client._core.handle, buf, need + 1) == need
    # a short buffer: truncated, NUL-terminated, the full length still returned
    small = ctypes.create_string_buffer(8)
    assert fn(client._core.handle, small, 8) == need and len(small.value) == 7
    return buf.value.decode()


@pytest.fixture(scope="module")
def cluster():
    m = master_default_ports("--log_level=warn")
    d = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
              "--segment_size=64MiB", "--log_level=warn"])
    yield m, d
    d.stop()
    m.stop()


def test_library_counts_its_calls(cluster):
    m, _ = cluster
    with mooncake_c.Client(m.ready["rpc"], segment_size=0) as c:
        t0 = metrics_text(c)
        assert metric(t0, "mooncake_client_puts_total") == 0
        c.put("cm-a", b"a" * 1000)
        c.put("cm-b", b"b" * 3000)
        assert c.get("cm-a") == b"a" * 1000
        assert c.get("cm-b") == b"b" * 3000
        assert c.get("cm-b") == b"b" * 3000
        with pytest.raises(KeyError):
            c.get("cm-absent")
        t = metrics_text(c)
        assert metric(t, "mooncake_client_puts_total") == 2
        assert metric(t, "mooncake_client_put_bytes_total") == 4000
        assert metric(t, "mooncake_client_gets_total", {"tier": "memory"}) == 3
        assert metric(t, "mooncake_client_get_bytes_total", {"tier": "memory"}) == 7000
        assert metric(t, "mooncake_client_gets_total", {"tier": "local_disk"}) == 0
        assert metric(t, "mooncake_client_errors_total",
                      {"op": "get", "code": "OBJECT_NOT_FOUND"}) == 1
        assert metric(t, "mooncake_client_op_latency_seconds_count", {"op": "put"}) == 2
        assert metric(t, "mooncake_client_op_latency_seconds_count", {"op": "get"}) == 4
        assert metric(t, "mooncake_client_op_latency_seconds_sum", {"op": "get"}) > 0
        assert "# TYPE mooncake_client_op_latency_seconds histogram" in t


def test_batch_calls_count_per_key(cluster):
    m, _ = cluster
    with mooncake_c.Client(m.ready["rpc"], segment_size=0) as c:
        c.put_many([("cb-%d" % i, b"z" * (100 + i)) for i in range(4)])
        t = metrics_text(c)
        assert metric(t, "mooncake_client_puts_total") == 4
        assert metric(t, "mooncake_client_put_bytes_total") == 100 + 101 + 102 + 103
        assert metric(t, "mooncake_client_op_latency_seconds_count", {"op": "batch_put"}) == 1


def test_daemon_serves_client_metrics():
    m = master_default_ports("--log_level=warn")
    port = free_port()
    try:
        d = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
                  "--segment_size=32MiB", "--enable_client_http_server",
                  "--client_http_port=%d" % port, "--log_level=warn"])
        try:
            st, body, _ = http("127.0.0.1:%d" % port, "/metrics")
            assert st == 200
            for fam in ("mooncake_client_puts_total", "mooncake_client_gets_total",
                        "mooncake_client_errors_total", "mooncake_client_op_latency_seconds",
                        "mooncake_client_segment_bytes"):
                assert "# TYPE %s " % fam in body, fam
            assert metric(body, "mooncake_client_segment_bytes") == 32 << 20
            assert http("127.0.0.1:%d" % port, "/health")[0] == 200
        finally:
            d.stop()
    finally:
        m.stop()


def test_daemon_http_flags_conflict():
    import subprocess
    r = subprocess.run([binpath("mooncake_client"), "--metrics_port=9", "--enable_client_http_server",
                        "--master_wait=0"], capture_output=True, text=True, timeout=20)
    assert r.returncode == 2 and "--enable_client_http_server" in r.stderr
