"""LMCache's Mooncake connector (lmcache/v1/storage_backend/connector/mooncakestore_connector.py),
replayed by hand: setup with 7 positional arguments, a ReplicateConfig with replica_num and
preferred_segment = get_hostname(), register_buffer over its CPU pool, and both of its modes:
save_chunk_meta (put_parts(key, 28-byte metadata, payload) / batch_get_buffer, the buffer read
through memoryview) and the zero-copy mode (put_from / batch_get_into), with is_exist and
remove. Only `mooncake.store` is imported."""

import ctypes
import hashlib
import struct

import pytest

META_LEN = 28  # METADATA_BYTES_LEN upstream


@pytest.fixture(scope="module")
def master(upstream_cluster):
    """The processes come from the launch lines of upstream's docs (conftest.py)."""
    return upstream_cluster.master


@pytest.fixture(scope="module")
def daemon(upstream_cluster):
    return upstream_cluster.endpoint


@pytest.fixture
def connector(upstream_import, master, daemon):
    from mooncake.store import MooncakeDistributedStore, ReplicateConfig
    store = MooncakeDistributedStore()
    store.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp", "", master)
    cfg = ReplicateConfig()
    cfg.replica_num = 1
    cfg.preferred_segment = store.get_hostname()
    pool = ctypes.create_string_buffer(1 << 20)
    assert store.register_buffer(ctypes.addressof(pool), len(pool)) == 0
    yield store, cfg, pool
    assert store.unregister_buffer(ctypes.addressof(pool)) == 0
    store.remove_all(True)
    store.close()


def _payload(i, n):
    return (hashlib.sha256(b"chunk%d" % i).digest() * (n // 32 + 1))[:n]


def _metadata(length):
    # LMCache's RemoteMetadata: length, shape, dtype, format (28 bytes in all)
    return struct.pack("<iiiiiii", length, 2, 16, 64, 0, 3, 1)


def test_lmcache_chunk_meta_mode(connector):
    store, cfg, _pool = connector
    keys = ["lmcache@chunk%d" % i for i in range(5)]
    payloads = [_payload(i, 8192 + i * 100) for i in range(5)]
    for k, p in zip(keys, payloads):
        meta = _metadata(len(p))
        assert len(meta) == META_LEN
        assert store.put_parts(k, meta, p) == 0
        assert store.is_exist(k) == 1
    bufs = store.batch_get_buffer(keys + ["lmcache@absent"])
    assert len(bufs) == 6 and bufs[5] is None
    for b, p in zip(bufs, payloads):
        view = memoryview(b)  # what the connector does: no copy
        assert struct.unpack("<i", view[:4])[0] == len(p)
        assert len(view) == META_LEN + len(p) == b.size() == b.len()
        assert bytes(view[META_LEN:]) == p
        # ptr() is the buffer the view reads
        assert ctypes.string_at(b.ptr(), META_LEN) == bytes(view[:META_LEN])
    single = store.get_buffer(keys[2])
    assert bytes(single) == _metadata(len(payloads[2])) + payloads[2]
    assert store.get_buffer("lmcache@absent") is None
    # a view outlives the handle: the library buffer stays until the view goes
    view = memoryview(store.get_buffer(keys[1]))
    assert bytes(view[META_LEN:]) == payloads[1]
    del view
    # just read: under a read lease, so kept unless forced (upstream's OBJECT_HAS_LEASE)
    assert store.remove(keys[0]) == -706
    assert store.remove(keys[0], True) == 0
    assert store.is_exist(keys[0]) == 0


def test_lmcache_zero_copy_mode(connector):
    store, cfg, pool = connector
    base = ctypes.addressof(pool)
    keys = ["lmcache@zc%d" % i for i in range(4)]
    size = 16384
    for i, k in enumerate(keys):
        ctypes.memmove(base + i * size, _payload(100 + i, size), size)
        assert store.put_from(k, base + i * size, size, cfg) == 0
    dst = base + 8 * size
    got = store.batch_get_into(keys, [dst + i * size for i in range(4)], [size] * 4)
    assert got == [size] * 4
    for i in range(4):
        assert ctypes.string_at(dst + i * size, size) == _payload(100 + i, size)
    # the ReplicateConfig placed the values in this client's segment, as the connector asked
    for k in keys:
        reps = store.get_replica_desc(k)
        assert reps[0].get_memory_descriptor().buffer_descriptor.transport_endpoint_ == \
            store.get_hostname()
    assert store.batch_remove(keys[:2]) == [-706, -706]  # read just now: leased
    assert store.batch_remove(keys + ["lmcache@absent"], force=True) == [0, 0, 0, 0, -704]
    assert store.batch_is_exist(keys) == [0] * 4
