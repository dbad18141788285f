"""The Python accessors of the library's own metrics (mc_client_metrics_text):
MooncakeDistributedStore.get_metrics() and Client.metrics() return this client's Prometheus
text, whose counts follow the calls made through that client and no other."""

import re
import urllib.error
import urllib.request
import uuid

import pytest


def _value(text, series):
    """The value of one series ("name" or 'name{labels}') in Prometheus text; None if absent."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        if name == series:
            return float(value)
    return None


def test_store_get_metrics_counts_its_own_calls(store):
    from mooncake_c import MooncakeDistributedStore
    assert MooncakeDistributedStore().get_metrics() == ""  # not set up: nothing to report

    before = store.get_metrics()
    assert "# TYPE mooncake_client_puts_total counter" in before
    puts0 = _value(before, "mooncake_client_puts_total")
    bytes0 = _value(before, "mooncake_client_put_bytes_total")
    gets0 = _value(before, 'mooncake_client_gets_total{tier="memory"}')
    gbytes0 = _value(before, 'mooncake_client_get_bytes_total{tier="memory"}')
    miss0 = _value(before, 'mooncake_client_errors_total{op="get",code="OBJECT_NOT_FOUND"}')
    lat0 = _value(before, 'mooncake_client_op_latency_seconds_count{op="put"}')
    assert None not in (puts0, bytes0, gets0, gbytes0, miss0, lat0), before

    key = "metrics-" + uuid.uuid4().hex
    value = bytes(range(256)) * 12  # 3072 bytes
    assert store.put(key, value) == 0
    assert store.get(key) == value
    assert store.get(key + "-missing") == b""

    after = store.get_metrics()
    assert _value(after, "mooncake_client_puts_total") == puts0 + 1
    assert _value(after, "mooncake_client_put_bytes_total") == bytes0 + len(value)
    assert _value(after, 'mooncake_client_gets_total{tier="memory"}') == gets0 + 1
    assert _value(after, 'mooncake_client_get_bytes_total{tier="memory"}') == gbytes0 + len(value)
    assert _value(after,
                  'mooncake_client_errors_total{op="get",code="OBJECT_NOT_FOUND"}') == miss0 + 1
    assert _value(after, 'mooncake_client_op_latency_seconds_count{op="put"}') == lat0 + 1
    assert re.search(r'^mooncake_client_op_latency_seconds_bucket\{op="get",le="\+Inf"\} \d+$',
                     after, re.M), after

    store.close()
    assert store.get_metrics() == ""  # closed: nothing to report


def test_client_metrics_raises_when_closed(master, daemon):
    import mooncake_c
    c = mooncake_c.Client(master)
    key = "metrics-" + uuid.uuid4().hex
    c.put(key, b"x" * 100)
    assert _value(c.metrics(), "mooncake_client_put_bytes_total") == 100
    c.remove(key, force=True)
    c.close()
    with pytest.raises(mooncake_c.MooncakeError):
        c.metrics()


def _get(addr, path):
    with urllib.request.urlopen("http://%s%s" % (addr, path), timeout=5) as r:
        return r.status, r.headers.get("Content-Type"), r.read().decode()


def test_setup_enable_client_http_server_serves_metrics(master, daemon):
    """setup(enable_client_http_server=True, client_http_port=...) serves this client's counts
    on /metrics and answers /health, as upstream's client does; close() stops it."""
    from mooncake_c import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master,
                   enable_client_http_server=True, client_http_port=0) == 0
    addr = s._http.address  # port 0: the one the server picked
    assert addr.startswith("127.0.0.1:")
    # a second client asking for the same port: still set up, without a server
    s2 = MooncakeDistributedStore()
    assert s2.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master,
                    enable_client_http_server=True,
                    client_http_port=int(addr.rsplit(":", 1)[1])) == 0
    assert s2._http is None
    s2.close()
    try:
        key = "metrics-http-" + uuid.uuid4().hex
        assert s.put(key, b"y" * 777) == 0
        st, ctype, body = _get(addr, "/metrics")
        assert st == 200 and ctype.startswith("text/plain; version=0.0.4")
        assert _value(body, "mooncake_client_put_bytes_total") == 777
        assert _value(body, "mooncake_client_puts_total") == 1
        assert _get(addr, "/health")[0] == 200
        with pytest.raises(urllib.error.HTTPError):
            _get(addr, "/nope")
        assert s.remove(key, force=True) == 0
    finally:
        s.close()
    with pytest.raises(urllib.error.URLError):
        _get(addr, "/health")
