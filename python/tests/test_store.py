"""MooncakeDistributedStore against a real master and client daemon: upstream's method names,
arguments and return conventions."""

import ctypes
import os
import subprocess

import pytest

import mooncake_c
from mooncake_c import MooncakeDistributedStore, ReplicateConfig

NOT_FOUND = -704
BUFFER_OVERFLOW = -10


def pattern(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(n)) if n < 4096 else \
        (bytes(range(256)) * (n // 256 + 1))[seed % 256:seed % 256 + n]


def test_put_get_roundtrip_and_miss(store):
    assert store.put("k1", b"hello") == 0
    assert store.get("k1") == b"hello"
    assert store.get_size("k1") == 5
    assert store.is_exist("k1") == 1
    # a miss: b"", 0, a negative code -- never an exception
    assert store.get("absent") == b""
    assert store.is_exist("absent") == 0
    assert store.get_size("absent") == NOT_FOUND
    assert store.remove("absent") == NOT_FOUND
    assert store.remove("k1") == -706  # OBJECT_HAS_LEASE: the get above holds a read lease
    assert store.remove("k1", force=True) == 0
    assert store.get("k1") == b""


def test_put_existing_key_keeps_first_value(store):
    assert store.put("dup", b"first") == 0
    assert store.put("dup", b"second") == 0  # upstream: OBJECT_ALREADY_EXISTS counts as success
    assert store.get("dup") == b"first"


def test_values_grow_past_the_reused_buffer(store):
    small, big = pattern(100, 1), pattern(3 << 20, 2)
    assert store.put("small", small) == 0
    assert store.put("big", big) == 0
    assert store.get("small") == small
    assert store.get("big") == big  # larger than any buffer so far: size learnt, then read
    assert store.get("small") == small
    assert store.put("empty", b"") == -600  # INVALID_PARAMS: an object has at least one byte


def test_get_without_get_ex(store, monkeypatch):
    """With a library older than mc_get_ex, get learns a larger size through get_size."""
    from mooncake_c import _native
    monkeypatch.setattr(_native, "get_ex", None)
    big = pattern(5 << 20, 3)
    assert store.put("big-old", big) == 0
    assert store.get("big-old") == big
    assert store.get("absent") == b""


def test_buffer_protocol_values(store):
    assert store.put("ba", bytearray(b"abc")) == 0
    assert store.put("mv", memoryview(b"xyz123")[1:4]) == 0
    import array
    a = array.array("i", [1, 2, 3])
    assert store.put("arr", a) == 0
    assert store.get("ba") == b"abc"
    assert store.get("mv") == b"yz1"
    assert store.get("arr") == a.tobytes()


def test_batches(store):
    keys = ["b%d" % i for i in range(20)]
    values = [pattern(1000 + 7919 * i, i) for i in range(20)]
    assert store.put_batch(keys, values) == 0
    assert store.get_batch(keys) == values
    assert store.get_batch(keys + ["nope"])[-1] == b""
    assert store.batch_is_exist(["b0", "nope", "b19"]) == [1, 0, 1]
    assert store.get_batch([]) == []
    assert store.put_batch(["x"], [b"1", b"2"]) < 0  # mismatched lengths


def test_zero_copy(store):
    n = 1 << 20
    src = ctypes.create_string_buffer(pattern(n, 5), n)
    dst = ctypes.create_string_buffer(n)
    assert store.register_buffer(ctypes.addressof(src), n) == 0
    assert store.register_buffer(ctypes.addressof(dst), n) == 0
    assert store.put_from("zc", ctypes.addressof(src), n) == 0
    assert store.get_into("zc", ctypes.addressof(dst), n) == n
    assert dst.raw == src.raw
    assert store.get_into("zc", ctypes.addressof(dst), n - 1) == BUFFER_OVERFLOW
    assert store.get_into("absent", ctypes.addressof(dst), n) == NOT_FOUND
    # batch forms: per-key lists
    k = 4
    blk = n // k
    keys = ["zb%d" % i for i in range(k)]
    base_s, base_d = ctypes.addressof(src), ctypes.addressof(dst)
    ctypes.memset(dst, 0, n)
    assert store.batch_put_from(keys, [base_s + i * blk for i in range(k)], [blk] * k) == [0] * k
    got = store.batch_get_into(keys + ["absent"], [base_d + i * blk for i in range(k)] + [base_d],
                               [blk] * k + [blk])
    assert got == [blk] * k + [NOT_FOUND]
    assert dst.raw == src.raw
    assert store.unregister_buffer(ctypes.addressof(src)) == 0
    assert store.unregister_buffer(ctypes.addressof(dst)) == 0


def test_threads_share_one_store(store):
    """The C calls release the GIL and the library is thread-safe: threads put and get through
    one store at once, each reading back exactly its own values."""
    import threading
    errors = []

    def worker(t):
        try:
            for i in range(50):
                k, v = "t%d-%d" % (t, i), pattern(100 + 997 * i, t)
                assert store.put(k, v) == 0
                assert store.get(k) == v
        except AssertionError as e:  # pragma: no cover - reported below
            errors.append((t, e))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not errors
    assert store.batch_is_exist(["t0-49", "t3-49"]) == [1, 1]


def test_remove_all_counts(store):
    assert store.remove_all(True) >= 0
    for i in range(5):
        assert store.put("ra%d" % i, b"v") == 0
    assert store.remove_all(True) == 5
    assert store.is_exist("ra0") == 0


def test_replicate_config_preferred_segment(master, daemon, store):
    own = MooncakeDistributedStore()
    assert own.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 0, "tcp", "", master) == 0
    try:
        me = own.get_hostname()
        assert me and me != daemon
        for seg in (me, daemon):
            cfg = ReplicateConfig()
            cfg.preferred_segment = seg
            assert own.put("pref-" + seg, b"v" * 64, cfg) == 0
            out = subprocess.run([os.path.join(os.environ.get("MC_BIN_DIR", ""), "mooncake_cli"),
                                  "--master", master, "stat", "pref-" + seg, "--json"],
                                 capture_output=True, text=True, timeout=10)
            assert out.returncode == 0, out.stderr
            assert seg in out.stdout
        both = ReplicateConfig(replica_num=2)
        assert own.put("two", b"2" * 64, both) == 0
        assert own.get("two") == b"2" * 64
    finally:
        own.remove_all(True)
        assert own.close() == 0


def test_setup_forms_and_errors(master, daemon):
    s = MooncakeDistributedStore()
    assert s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                    "global_segment_size": "16 MB", "master_server_addr": master}) == 0
    assert s.get_hostname().startswith("127.0.0.1:")
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master) < 0  # already set up
    assert s.close() == 0
    assert s.close() == 0  # idempotent
    # after close: negative codes and b"", no crash
    assert s.put("k", b"v") < 0
    assert s.get("k") == b""
    assert s.is_exist("k") < 0
    assert s.batch_is_exist(["k"])[0] < 0
    bad = MooncakeDistributedStore()
    assert bad.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", "127.0.0.1:1") < 0
    assert bad.setup("127.0.0.1", "P2PHANDSHAKE", "lots", 0, "tcp", "", master) == -600



def test_setup_rdma_takes_host_and_devices(master):
    """protocol rdma: a loopback local_hostname is refused (rdma_cm cannot bind one) before any
    device is looked at; a real-looking host and rdma_devices reach the library, which then
    refuses for a missing device (no RDMA device here, or no device by that name)."""
    s = MooncakeDistributedStore()
    with open("/proc/self/maps") as maps:  # the library is loaded by now
        if "libibverbs" not in maps.read():
            pytest.skip("libmooncake_client built without RDMA (-DMC_WITH_RDMA=OFF)")
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "rdma", "", master) == -600
    assert s.setup({"local_hostname": "localhost", "protocol": "rdma",
                    "master_server_addr": master}) == -600
    rc = s.setup("192.0.2.1", "P2PHANDSHAKE", 0, 0, "rdma", "no_such_dev0", master)
    assert rc in (-600, -1012)  # INVALID_PARAMS (no such device) or NOT_SUPPORTED (no device)
    assert s.health_check() == 1


def test_setup_rdma_fabric_options_reach_the_library(master):
    """rdma_ack_timeout, rdma_tos and rdma_qp_pool (keywords or setup dict keys) reach the C
    config: the library refuses an out-of-range one with INVALID_PARAMS before it looks for a
    device, and accepts in-range ones (then fails for the device, or opens)."""
    with open("/proc/self/maps") as maps:
        if "libibverbs" not in maps.read():
            pytest.skip("libmooncake_client built without RDMA (-DMC_WITH_RDMA=OFF)")
    for bad in ({"rdma_ack_timeout": 32}, {"rdma_ack_timeout": -2}, {"rdma_tos": 256},
                {"rdma_qp_pool": 1025}, {"rdma_tos": "x"}):
        s = MooncakeDistributedStore()
        assert s.setup("192.0.2.1", "P2PHANDSHAKE", 0, 0, "rdma", "", master, **bad) == -600, bad
        s = MooncakeDistributedStore()
        d = {"local_hostname": "192.0.2.1", "protocol": "rdma", "master_server_addr": master}
        d.update(bad)
        assert s.setup(d) == -600, bad
    s = MooncakeDistributedStore()
    rc = s.setup("192.0.2.1", "P2PHANDSHAKE", 0, 0, "rdma", "", master, rdma_ack_timeout=31,
                 rdma_tos=106, rdma_qp_pool=1024)
    assert rc != -600  # in range: past the check (no device here: NOT_SUPPORTED)
    if rc == 0:
        s.close()


def test_invalid_keys_are_codes(store):
    assert store.put("", b"v") == -400
    assert store.get("") == b""
    assert store.is_exist("x" * 5000) == -400
    with pytest.raises(TypeError):
        store.put(123, b"v")


def test_version():
    assert mooncake_c.__version__.count(".") == 2


def test_remove_by_regex_is_server_side_and_anchored(store):
    for k in ("rx/a1", "rx/a2", "rx/b1", "xrx/a"):
        assert store.put(k, k.encode() * 10) == 0
    assert store.remove_by_regex("rx/a") == 0  # the whole key must match
    assert store.remove_by_regex("rx/a.*") == 2
    assert store.batch_is_exist(["rx/a1", "rx/a2", "rx/b1", "xrx/a"]) == [0, 0, 1, 1]
    assert store.remove_by_regex("rx/(") == -600  # refused by regcomp: INVALID_PARAMS
    assert store.get("rx/b1") == b"rx/b1" * 10


def test_upsert_family_replaces_values(store):
    import ctypes
    assert store.put("up/k", b"old" * 100) == 0
    assert store.put("up/k", b"new") == 0  # a Put keeps the existing value (upstream)
    assert store.get("up/k") == b"old" * 100
    assert store.upsert("up/k", b"new value") == 0
    assert store.get("up/k") == b"new value"
    buf = ctypes.create_string_buffer(b"from a buffer", 13)
    assert store.upsert_from("up/k", ctypes.addressof(buf), 13) == 0
    assert store.get("up/k") == b"from a buffer"
    assert store.upsert_parts("up/k", b"head|", memoryview(b"tail")) == 0
    assert store.get("up/k") == b"head|tail"
    assert store.upsert_batch(["up/a", "up/k"], [b"A" * 10, b"K" * 5000]) == 0
    assert store.get_batch(["up/a", "up/k"]) == [b"A" * 10, b"K" * 5000]
    bufs = [ctypes.create_string_buffer(bytes([65 + i]) * 64, 64) for i in range(3)]
    assert store.batch_upsert_from(["up/a", "up/b", "up/c"],
                                   [ctypes.addressof(b) for b in bufs], [64] * 3) == [0, 0, 0]
    assert store.get_batch(["up/a", "up/b", "up/c"]) == [b"A" * 64, b"B" * 64, b"C" * 64]
    assert store.upsert("up/k", b"") == -600  # an empty value: INVALID_PARAMS, as put
