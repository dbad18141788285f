"""vLLM's Mooncake store connector, replayed by hand (its worker's call sequence, read from
vllm/distributed/kv_transfer/kv_connector/v1/mooncake/: setup with 7 positional arguments,
register_buffer over the KV cache, batch_is_exist to skip stored blocks,
batch_put_from_multi_buffers with one buffer per layer for each block, batch_get_into_multi_buffers
into other blocks, batch_get_replica_desc for lookups, close), against a running cluster. Only
`mooncake.store` is imported; the KV cache is a ctypes area."""

import ctypes
import hashlib

import pytest

LAYERS = 4
BLOCKS = 8
BLOCK_BYTES = 4096  # one block of one layer


@pytest.fixture(scope="module")
def master(upstream_cluster):
    """The processes come from the launch lines of upstream's docs (conftest.py)."""
    return upstream_cluster.master


@pytest.fixture(scope="module")
def daemon(upstream_cluster):
    return upstream_cluster.endpoint


@pytest.fixture
def mooncake_store(upstream_import, master, daemon):
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    # MooncakeStoreConfig fields in vLLM's order: local_hostname, metadata_server,
    # global_segment_size, local_buffer_size, protocol, device_name, master_server_address
    assert store.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 16 << 20, "tcp", "", master) == 0
    yield store
    store.remove_all(True)
    store.close()


def _kv_cache():
    """LAYERS layer tensors of BLOCKS blocks each, in one registered-able area per layer."""
    return [ctypes.create_string_buffer(BLOCKS * BLOCK_BYTES) for _ in range(LAYERS)]


def _fill(layer, block, seed):
    data = hashlib.sha256(b"%d/%d/%d" % (seed, layer, block)).digest() * (BLOCK_BYTES // 32)
    return data


def _addrs(kv, block):
    return [ctypes.addressof(t) + block * BLOCK_BYTES for t in kv]


def test_vllm_store_and_load(mooncake_store):
    store = mooncake_store
    src, dst = _kv_cache(), _kv_cache()
    for t in src + dst:
        assert store.register_buffer(ctypes.addressof(t), len(t)) == 0
    for layer in range(LAYERS):
        for b in range(BLOCKS):
            ctypes.memmove(ctypes.addressof(src[layer]) + b * BLOCK_BYTES, _fill(layer, b, 1),
                           BLOCK_BYTES)
    keys = ["vllm@model@tp0@blockhash%04d" % b for b in range(BLOCKS)]

    # sending thread: skip what exists, then one multi-buffer put of the missing blocks
    assert store.batch_is_exist(keys) == [0] * BLOCKS
    first = keys[:3]
    res = store.batch_put_from_multi_buffers(first, [_addrs(src, b) for b in range(3)],
                                             [[BLOCK_BYTES] * LAYERS] * 3)
    assert res == [0, 0, 0]
    exists = store.batch_is_exist(keys)
    assert exists == [1, 1, 1] + [0] * (BLOCKS - 3)
    missing = [i for i, e in enumerate(exists) if e != 1]
    res = store.batch_put_from_multi_buffers([keys[i] for i in missing],
                                             [_addrs(src, i) for i in missing],
                                             [[BLOCK_BYTES] * LAYERS] * len(missing))
    assert res == [0] * len(missing)
    # the value of a block is its layers' bytes end to end
    assert store.get(keys[5]) == b"".join(_fill(layer, 5, 1) for layer in range(LAYERS))

    # lookup: replica descriptors for the blocks (one BatchGetReplicaList)
    desc = store.batch_get_replica_desc(keys + ["vllm@absent"])
    assert sorted(desc) == sorted(keys)
    for k in keys:
        reps = desc[k]
        assert reps and reps[0].is_memory_replica()
        assert reps[0].get_memory_descriptor().buffer_descriptor.size_ == LAYERS * BLOCK_BYTES
        assert reps[0].get_memory_descriptor().buffer_descriptor.transport_endpoint_
    assert store.get_replica_desc("vllm@absent") == []
    assert store.get_replica_desc(keys[0])[0].is_memory_replica()

    # receiving thread: rotated by tp rank, loaded into other blocks of another cache
    rot = 3
    kl = keys[rot:] + keys[:rot]
    targets = list(range(BLOCKS))
    res = store.batch_get_into_multi_buffers(kl, [_addrs(dst, t) for t in targets],
                                             [[BLOCK_BYTES] * LAYERS] * BLOCKS)
    assert res == [LAYERS * BLOCK_BYTES] * BLOCKS
    for t, k in zip(targets, kl):
        b = keys.index(k)
        for layer in range(LAYERS):
            got = ctypes.string_at(ctypes.addressof(dst[layer]) + t * BLOCK_BYTES, BLOCK_BYTES)
            assert got == _fill(layer, b, 1), (k, layer)

    # a missing block fails on its own; buffers too small are BUFFER_OVERFLOW
    res = store.batch_get_into_multi_buffers([keys[0], "vllm@absent"],
                                             [_addrs(dst, 0), _addrs(dst, 1)],
                                             [[BLOCK_BYTES] * LAYERS] * 2)
    assert res[0] == LAYERS * BLOCK_BYTES and res[1] == -704
    res = store.batch_get_into_multi_buffers([keys[0]], [_addrs(dst, 0)[:2]],
                                             [[BLOCK_BYTES] * 2])
    assert res == [-10]
    for t in src + dst:
        assert store.unregister_buffer(ctypes.addressof(t)) == 0


def test_vllm_single_buffer_values_go_zero_copy(mooncake_store):
    """A block stored as one buffer per key (vLLM with one KV tensor) round-trips the same."""
    store = mooncake_store
    a = ctypes.create_string_buffer(b"x" * 1000 + b"y" * 24, 1024)
    b = ctypes.create_string_buffer(1024)
    assert store.batch_put_from_multi_buffers(["one"], [[ctypes.addressof(a)]], [[1024]]) == [0]
    assert store.batch_get_into_multi_buffers(["one"], [[ctypes.addressof(b)]], [[1024]]) == [1024]
    assert b.raw == a.raw
    # mismatched argument lists are per-key errors, not crashes
    assert store.batch_put_from_multi_buffers(["k"], [[1, 2]], [[1]]) == [-600]


def test_get_into_ranges_layerwise(mooncake_store):
    """Layer-wise loads read byte ranges of stored blocks (get_into_ranges): per buffer, per
    key, per range the bytes copied, or a negative error for that range alone."""
    store = mooncake_store
    a = b"".join(_fill(layer, 0, 7) for layer in range(LAYERS))
    b = b"".join(_fill(layer, 1, 7) for layer in range(LAYERS))
    assert store.put("rng/a", a) == 0 and store.put("rng/b", b) == 0
    dst0 = ctypes.create_string_buffer(3 * BLOCK_BYTES)
    dst1 = ctypes.create_string_buffer(BLOCK_BYTES)
    res = store.get_into_ranges(
        [ctypes.addressof(dst0), ctypes.addressof(dst1)],
        [["rng/a", "rng/b"], ["rng/b", "rng/absent"]],
        [[[0, BLOCK_BYTES], [2 * BLOCK_BYTES]], [[0], [0]]],
        [[[BLOCK_BYTES, 3 * BLOCK_BYTES], [2 * BLOCK_BYTES + 100]], [[LAYERS * BLOCK_BYTES - 8],
                                                                      [0]]],
        [[[BLOCK_BYTES, BLOCK_BYTES], [BLOCK_BYTES - 100]], [[16], [4]]])
    assert res == [[[BLOCK_BYTES, BLOCK_BYTES], [BLOCK_BYTES - 100]], [[-600], [-704]]]
    assert dst0.raw[:BLOCK_BYTES] == a[BLOCK_BYTES:2 * BLOCK_BYTES]
    assert dst0.raw[BLOCK_BYTES:2 * BLOCK_BYTES] == a[3 * BLOCK_BYTES:]
    assert dst0.raw[2 * BLOCK_BYTES:3 * BLOCK_BYTES - 100] == \
        b[2 * BLOCK_BYTES + 100:3 * BLOCK_BYTES]
