"""SGLang HiCache's Mooncake backend (python/sglang/srt/mem_cache/storage/mooncake_store/),
replayed by hand: setup with 8 positional arguments (transfer_engine None) and the keyword
extras it adds (enable_ssd_offload, ssd_offload_path, tenant_id, client http server), retried
without any keyword the store refuses; the warmup put / is_exist / get; register_buffer over
its host KV pool; the page backup (batch_is_exist, then batch_put_from of the K and V halves of
each page under "<hash>_<rank>_k" / "_v") and prefetch (batch_get_into); its standalone mode's
setup_dummy / MooncakeHostMemAllocator, which are refused with a reason. Only `mooncake.store`
is imported."""

import ctypes
import hashlib
import os
import shutil
import tempfile
import time
import urllib.request
import uuid

import pytest

PAGE = 8192  # bytes of K (and of V) per page


def _check_server(master_server_address, master_metrics_port, timeout):
    """SGLang's check_server: GET /get_all_segments on the master's host at its metrics port
    (3 s per request) until the body is not empty; its timeout is 600 s, shorter here. Returns
    the body, or None when the timeout passes."""
    master_server_ip = master_server_address.split(":")[0]
    url = "http://%s:%s/get_all_segments" % (master_server_ip, master_metrics_port)
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        try:
            with urllib.request.urlopen(url, timeout=3) as resp:
                text = resp.read().decode()
        except Exception:
            time.sleep(0.2)
            continue
        if text == "":
            time.sleep(0.2)
            continue
        return text
    return None


def test_sglang_check_server_waits_for_a_store_service():
    """With check_server SGLang waits until the master lists a segment: a master alone answers
    an empty list, and once a client started by upstream's launch line has mounted its
    segment the poll ends with that client's segment listed."""
    from conftest import start_upstream_client, start_upstream_master
    m = start_upstream_master()
    try:
        port = m.ready["metrics"].rsplit(":", 1)[1]
        assert _check_server(m.ready["rpc"], port, timeout=1.0) is None
        c = start_upstream_client(m.ready["rpc"])
        try:
            text = _check_server(m.ready["rpc"], port, timeout=20.0)
            assert text is not None, "the master never listed the client's segment"
            assert c.ready["endpoint"] in text.splitlines(), text
        finally:
            assert c.stop() == 0
    finally:
        m.stop()


def _setup_like_sglang(store, master, setup_kwargs):
    while True:
        try:
            return store.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp", "",
                               master, None, **setup_kwargs)
        except TypeError as e:
            unsupported = [k for k in list(setup_kwargs) if k in str(e)]
            if not unsupported:
                raise
            for k in unsupported:
                setup_kwargs.pop(k)


@pytest.fixture(scope="module")
def master(upstream_cluster):
    """The processes come from the launch lines of upstream's docs (conftest.py)."""
    return upstream_cluster.master


@pytest.fixture(scope="module")
def daemon(upstream_cluster):
    return upstream_cluster.endpoint


@pytest.fixture
def ssd_dir():
    d = tempfile.mkdtemp(prefix="mc-sglang-ssd-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sglang_store(upstream_import, master, daemon, ssd_dir):
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    kwargs = {"enable_client_http_server": True, "client_http_port": 0,
              "enable_ssd_offload": True, "ssd_offload_path": ssd_dir,
              "ssd_offload_capacity": 64 << 20, "tenant_id": "tenant-a"}
    assert _setup_like_sglang(store, master, kwargs) == 0
    # every keyword was accepted (none retried away)
    assert set(kwargs) == {"enable_client_http_server", "client_http_port",
                           "enable_ssd_offload", "ssd_offload_path", "ssd_offload_capacity",
                           "tenant_id"}
    yield store
    store.remove_all(True)
    store.close()


def test_sglang_setup_warmup_backup_prefetch(sglang_store, ssd_dir):
    store = sglang_store
    # enable_ssd_offload + ssd_offload_path gave this client a LOCAL_DISK tier there
    assert os.listdir(ssd_dir), "the disk tier did not open its directory"
    assert store.health_check() == 0

    warm = "sglang_mooncake_store_warmup_key" + uuid.uuid4().hex
    assert store.put(warm, bytes(4096)) == 0
    assert store.is_exist(warm) == 1
    assert store.get(warm) == bytes(4096)

    pool = ctypes.create_string_buffer(16 * 2 * PAGE)  # host KV pool: 16 pages of K and V
    assert store.register_buffer(ctypes.addressof(pool), len(pool)) == 0
    base = ctypes.addressof(pool)
    hashes = [hashlib.sha1(b"page%d" % i).hexdigest() for i in range(6)]
    for i in range(6):
        for half in range(2):
            data = (hashlib.sha256(b"%d/%d" % (i, half)).digest()) * (PAGE // 32)
            ctypes.memmove(base + (2 * i + half) * PAGE, data, PAGE)
    keys, ptrs, sizes = [], [], []
    for i, h in enumerate(hashes):
        for half, suffix in enumerate(("k", "v")):
            keys.append("%s_0_%s" % (h, suffix))
            ptrs.append(base + (2 * i + half) * PAGE)
            sizes.append(PAGE)
    exist = store.batch_is_exist(keys)
    assert exist == [0] * len(keys)
    assert store.batch_put_from(keys, ptrs, sizes) == [0] * len(keys)
    assert store.batch_is_exist(keys) == [1] * len(keys)

    dst = base + 12 * 2 * PAGE // 2  # pages 6.. of the pool
    n = 4  # prefetch the first two pages' K and V
    got = store.batch_get_into(keys[:n], [dst + j * PAGE for j in range(n)], [PAGE] * n)
    assert got == [PAGE] * n
    for j in range(n):
        assert ctypes.string_at(dst + j * PAGE, PAGE) == ctypes.string_at(ptrs[j], PAGE)
    # MLA ranks ask for the descriptors of a page
    reps = store.get_replica_desc(keys[0])
    assert reps and reps[0].is_memory_replica()
    assert store.unregister_buffer(base) == 0


def test_sglang_standalone_mode_is_refused_with_a_reason(upstream_import, master):
    from mooncake.store import MooncakeDistributedStore, MooncakeHostMemAllocator
    store = MooncakeDistributedStore()
    assert store.setup_dummy(64 << 20, 16 << 20, "127.0.0.1:50052") == -1012  # NOT_SUPPORTED
    with pytest.raises(NotImplementedError, match="not supported"):
        MooncakeHostMemAllocator()


def test_health_check_codes(upstream_import, master):
    """0 healthy, 1 not set up / closed, 2 master unreachable (upstream's codes)."""
    from conftest import Proc, BIN
    from mooncake.store import MooncakeDistributedStore
    m = Proc([os.path.join(BIN, "mooncake_master"), "--rpc_port=0", "--rpc_address=127.0.0.1",
              "--metrics_port=0", "--metrics_host=127.0.0.1", "--log_level=warn"])
    store = MooncakeDistributedStore()
    try:
        assert store.health_check() == 1
        assert store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", m.ready["rpc"]) == 0
        assert store.health_check() == 0
        m.stop()
        assert store.health_check() == 2
    finally:
        m.stop()
        store.close()
    assert store.health_check() == 1


def test_setup_dict_form_and_extras(upstream_import, master, ssd_dir):
    from mooncake.store import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    cfg = {"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
           "global_segment_size": "8MB", "local_buffer_size": 0, "protocol": "tcp",
           "device_name": "", "master_server_address": master, "enable_ssd_offload": True,
           "ssd_offload_path": ssd_dir, "ssd_offload_capacity": 32 << 20,
           "transfer_timeout": 1}
    assert store.setup(cfg) == 0
    try:
        assert os.listdir(ssd_dir)
        assert store.put("dict-form", b"abc") == 0
        assert store.get("dict-form") == b"abc"
    finally:
        store.remove_all(True)
        store.close()
