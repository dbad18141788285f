"""The master's HTTP admin API (upstream's paths and formats) against a running master and
client daemon: SGLang's check_server poll, segments, key queries, bounded key listing, access."""

import json
import os
import re
import time

import pytest

from mcproc import Proc, binpath, cli_put, http, master_default_ports


@pytest.fixture(scope="module")
def m():
    p = master_default_ports("--log_level=warn")
    yield p
    p.stop()


@pytest.fixture(scope="module")
def cluster(m):
    c = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
              "--segment_size=64MiB", "--log_level=warn"])
    yield m, c
    c.stop()


def check_server(metrics, timeout=15.0):
    """SGLang's MooncakeStore.check_server: poll /get_all_segments until the body is non-empty."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        try:
            st, body, _ = http(metrics, "/get_all_segments")
        except OSError:
            time.sleep(0.1)
            continue
        if body == "":
            time.sleep(0.1)
            continue
        return body
    raise AssertionError("check_server timed out")


def test_segments_empty_before_any_client():
    p = master_default_ports("--log_level=warn")
    try:
        st, body, hdr = http(p.ready["metrics"], "/get_all_segments")
        assert (st, body) == (200, "")
        d = json.loads(http(p.ready["metrics"], "/get_segments_detail")[1])
        assert d == {"total_segments": 0, "segments": []}
    finally:
        p.stop()


def test_check_server_sees_the_client(cluster):
    m, c = cluster
    body = check_server(m.ready["metrics"])
    assert body.splitlines() == [c.ready["endpoint"]]
    d = json.loads(http(m.ready["metrics"], "/get_segments_detail")[1])
    seg = d["segments"][0]
    assert d["total_segments"] == 1
    assert seg["segment_name"] == c.ready["endpoint"]
    assert seg["size_bytes"] == 64 << 20 and seg["allocator_capacity_bytes"] == 64 << 20
    assert seg["protocol"] == "tcp" and seg["base_address"].startswith("0x")
    st, body, _ = http(m.ready["metrics"], "/query_segment?segment=" + c.ready["endpoint"])
    assert st == 200
    lines = body.splitlines()
    assert lines[0] == c.ready["endpoint"] and lines[2] == "Capacity(bytes) : %d" % (64 << 20)
    assert re.match(r"^Used\(bytes\): \d+$", lines[1])
    assert http(m.ready["metrics"], "/query_segment?segment=nope:1")[0] == 404
    assert http(m.ready["metrics"], "/query_segment")[0] == 400


def test_role_leader_health(m):
    st, body, hdr = http(m.ready["metrics"], "/role")
    assert (st, body) == (200, "leader")
    st, body, hdr = http(m.ready["metrics"], "/leader")
    d = json.loads(body)
    assert d["present"] is True and d["leader_address"] == m.ready["rpc"]
    st, body, hdr = http(m.ready["metrics"], "/health")
    d = json.loads(body)
    assert st == 200 and d["status"] == "ok" and d["role"] == "leader" and d["service_ready"]


def test_query_keys(cluster):
    m, c = cluster
    cli_put(m.ready["rpc"], "qk-1", b"x" * 1000)
    st, body, hdr = http(m.ready["metrics"], "/query_key?key=qk-1")
    d = json.loads(body)
    assert st == 200 and d["success"] is True and len(d["data"]) == 1
    assert d["data"][0]["size_"] == 1000
    assert d["data"][0]["transport_endpoint_"] == c.ready["endpoint"]
    st, body, hdr = http(m.ready["metrics"], "/query_key?key=absent-key")
    d = json.loads(body)
    assert st == 404 and d["error_code"] == -704 and d["error_message"] == "OBJECT_NOT_FOUND"
    st, body, hdr = http(m.ready["metrics"], "/batch_query_keys?keys=qk-1,absent-key")
    d = json.loads(body)
    assert st == 200 and d["success"] is True
    assert d["data"]["qk-1"]["ok"] is True and d["data"]["qk-1"]["values"][0]["size_"] == 1000
    assert d["data"]["absent-key"] == {"ok": False, "error": "OBJECT_NOT_FOUND"}
    st, body, hdr = http(m.ready["metrics"], "/batch_query_keys?keys=" + ",".join(["a"] * 1001))
    assert st == 400 and "at most 1000" in body
    st, body, hdr = http(m.ready["metrics"], "/query_key")
    assert st == 400


def test_get_all_keys_pages(cluster):
    m, c = cluster
    want = {"page-%02d" % i for i in range(9)}
    for k in sorted(want):
        cli_put(m.ready["rpc"], k, k.encode())
    # the whole listing in one page (default limit) contains every key once
    st, body, hdr = http(m.ready["metrics"], "/get_all_keys")
    assert st == 200 and hdr.get("X-Mooncake-Next-Cursor") is None
    lines = body.splitlines()
    assert want <= set(lines) and len(lines) == len(set(lines))
    total = set(lines)
    # pages of 2 with the cursor: the same keys, each once
    seen, cursor, pages = [], None, 0
    while True:
        path = "/get_all_keys?limit=2" + ("&cursor=" + cursor if cursor else "")
        st, body, hdr = http(m.ready["metrics"], path)
        assert st == 200
        page = body.splitlines()
        assert len(page) <= 2
        seen += page
        pages += 1
        cursor = hdr.get("X-Mooncake-Next-Cursor")
        if not cursor:
            break
        assert pages < 100
    assert sorted(seen) == sorted(total) and pages >= len(total) // 2


def test_get_all_keys_bad_arguments(m):
    for q in ("limit=0", "limit=100001", "limit=abc", "cursor=zz", "cursor=5:abc",
              "cursor=99999:61"):
        st, body, hdr = http(m.ready["metrics"], "/get_all_keys?" + q)
        assert st == 400, q


def test_admin_routes_need_the_token(tmp_path):
    tok = tmp_path / "token"
    tok.write_text("s3cret-token-of-the-cluster-0123456789\n")
    os.chmod(tok, 0o600)
    p = master_default_ports("--log_level=warn", "--auth_token_file=%s" % tok)
    try:
        h = p.ready["metrics"]
        for path in ("/get_all_keys", "/query_key?key=a", "/batch_query_keys?keys=a"):
            st, body, _ = http(h, path)
            assert st == 401 and "Bearer" in body, path
            st, _, _ = http(h, path, {"Authorization": "Bearer wrong-token-wrong-token"})
            assert st == 401, path
        st, _, _ = http(h, "/get_all_keys",
                        {"Authorization": "Bearer s3cret-token-of-the-cluster-0123456789"})
        assert st == 200
        for path in ("/get_all_segments", "/role", "/leader", "/health", "/metrics"):
            assert http(h, path)[0] == 200, path
    finally:
        p.stop()
