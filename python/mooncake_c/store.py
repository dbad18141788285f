"""MooncakeDistributedStore: upstream Mooncake Store's Python class, method for method.

A connector written against `mooncake.store.MooncakeDistributedStore` runs unchanged:

    from mooncake_c import MooncakeDistributedStore
    store = MooncakeDistributedStore()
    store.setup("127.0.0.1", "P2PHANDSHAKE", 512 << 20, 16 << 20, "tcp", "", "127.0.0.1:50051")
    store.put("k", b"v")          # 0 or a negative error code
    store.get("k")                # b"v"; b"" when the key is missing
    store.close()

Conventions (upstream's): calls return int 0 on success or a negative error code (the values of
mooncake_c.errors / include/mooncake/errors.h); sizes and counts are returned as non-negative
ints; `get` and `get_batch` return b"" for a missing key or an error; zero-copy calls take integer
addresses (`ctypes.addressof`, `tensor.data_ptr()`, `numpy.ndarray.ctypes.data`).

Arguments upstream needs for its transfer engine and that have no meaning here are accepted and
ignored: metadata_server (there is no metadata service: peers are found through the master),
local_buffer_size (there is no staging buffer to size: put sends from the caller's memory, get
reads into a reused per-thread buffer and returns a copy, get_into reads into the caller's),
engine; rdma_devices (or a setup dict's device_name) names the RDMA devices with protocol
"rdma" (default: the one that owns local_hostname), and the keywords (or setup dict keys)
rdma_ack_timeout, rdma_tos and rdma_qp_pool set the library's options of those names (ranges
-1..31, 0..255, 0..1024; an out-of-range value makes setup return INVALID_PARAMS).
"""

import ctypes
import logging
import os
import re

from . import _core, _http
from ._core import ReplicateConfig  # noqa: F401  (re-exported with upstream's name)

_log = logging.getLogger("mooncake_c")
# upstream's DEFAULT_CLIENT_HTTP_PORT: setup(enable_client_http_server=True) without a port
DEFAULT_CLIENT_HTTP_PORT = 9300
# health_check asks the master whether this key exists: one cheap round trip
_HEALTH_KEY = "__mooncake_c_health_check__"

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(I?B?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(v):
    """An int, or a string such as "4 GB", "512MiB", "1024" (units are powers of 1024)."""
    if isinstance(v, int):
        return v
    m = _SIZE_RE.match(str(v))
    if not m:
        raise ValueError("not a size: %r" % (v,))
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def split_hostname(local_hostname):
    """"host", "host:port" or "[v6]:port" -> (host, port)."""
    h = str(local_hostname)
    if h.startswith("["):
        end = h.find("]")
        if end < 0:
            raise ValueError("bad local_hostname %r" % h)
        rest = h[end + 1:]
        return h[1:end], int(rest[1:]) if rest.startswith(":") else 0
    if h.count(":") == 1:
        host, port = h.split(":")
        return host, int(port)
    return h, 0


def _address(arg):
    """An integer address for a buffer_arg result (bytes are passed by their own pointer)."""
    if isinstance(arg, bytes):
        return ctypes.cast(ctypes.c_char_p(arg), ctypes.c_void_p).value
    return arg or 0


class MooncakeHostMemAllocator:
    """Upstream's allocator for its standalone mode (SGLang's "dummy" client sharing memory
    with a separate client process). Not supported: constructing one raises with the reason."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(
            "MooncakeHostMemAllocator: standalone mode (shared memory with a separate client "
            "process) is not supported by mooncake_c; use MooncakeDistributedStore.setup()")


class MooncakeDistributedStore:
    def __init__(self):
        self._core = _core.Core()
        self._http = None  # _http.MetricsServer of enable_client_http_server

    # ---- lifecycle
    def setup(self, local_hostname, metadata_server=None, global_segment_size=16 << 20,
              local_buffer_size=16 << 20, protocol="tcp", rdma_devices="",
              master_server_addr="127.0.0.1:50051", engine=None, enable_ssd_offload=False,
              ssd_offload_path="", tenant_id="default", enable_client_http_server=False,
              client_http_port=None, **extra):
        """Connects to the master and contributes global_segment_size bytes of DRAM (0 = none).
        Also accepts one dict with upstream's setup keys. enable_ssd_offload with
        ssd_offload_path gives this client a LOCAL_DISK tier in that directory (capacity:
        ssd_offload_capacity, default half the free space there); enable_client_http_server
        serves this client's /metrics and /health on the host of local_hostname, port
        client_http_port (default 9300, 0 = a free one; one that cannot be bound is logged and
        skipped); upstream's other extras are accepted with a log line saying they have no
        effect here. Returns 0 or a negative error."""
        if isinstance(local_hostname, dict):
            d = dict(local_hostname)
            local_hostname = d.pop("local_hostname", "127.0.0.1")
            metadata_server = d.pop("metadata_server", metadata_server)
            global_segment_size = d.pop("global_segment_size", global_segment_size)
            local_buffer_size = d.pop("local_buffer_size", local_buffer_size)
            protocol = d.pop("protocol", protocol)
            rdma_devices = d.pop("rdma_devices", d.pop("device_name", rdma_devices))
            master_server_addr = d.pop("master_server_addr",
                                       d.pop("master_server_address", master_server_addr))
            enable_ssd_offload = d.pop("enable_ssd_offload", enable_ssd_offload)
            ssd_offload_path = d.pop("ssd_offload_path", ssd_offload_path)
            tenant_id = d.pop("tenant_id", tenant_id)
            enable_client_http_server = d.pop("enable_client_http_server",
                                              enable_client_http_server)
            client_http_port = d.pop("client_http_port", client_http_port)
            d.update(extra)
            extra = d
        rdma_opts = {k: extra.pop(k) for k in ("rdma_ack_timeout", "rdma_tos", "rdma_qp_pool")
                     if k in extra}
        # TLS (README "Security"): this client's certificate, key and the cluster's CA (PEM)
        tls_opts = {k: extra.pop(k) for k in ("tls_cert_file", "tls_key_file", "tls_ca_file")
                    if k in extra}
        try:
            host, port = split_hostname(local_hostname)
            seg = parse_size(global_segment_size)
            disk_cap = parse_size(extra.pop("ssd_offload_capacity", 0))
        except ValueError:
            return _core.INVALID_PARAMS
        disk_path = None
        if enable_ssd_offload:
            if not ssd_offload_path:
                _log.warning("setup: enable_ssd_offload needs ssd_offload_path; "
                             "no LOCAL_DISK tier")
            else:
                disk_path = ssd_offload_path
                try:
                    os.makedirs(ssd_offload_path, exist_ok=True)
                    st = os.statvfs(ssd_offload_path)
                except OSError as e:
                    _log.error("setup: ssd_offload_path %r: %s", ssd_offload_path, e)
                    return _core.INVALID_PARAMS
                if not disk_cap:
                    disk_cap = st.f_bavail * st.f_frsize // 2
        for name, v, default in (("tenant_id", tenant_id, "default"), ("engine", engine, None)):
            if v != default:
                _log.info("setup: %s=%r has no effect here (accepted for upstream "
                          "compatibility)", name, v)
        for name, v in extra.items():
            _log.info("setup: %s=%r has no effect here (accepted for upstream compatibility)",
                      name, v)
        rc = self._core.open(master_server_addr, host=host, data_port=port,
                             segment_size=seg, protocol=protocol or "tcp",
                             disk_path=disk_path, disk_capacity=disk_cap,
                             rdma_devices=rdma_devices if protocol == "rdma" else None,
                             **(rdma_opts if protocol == "rdma" else {}), **tls_opts)
        if rc == 0 and enable_client_http_server:
            self._start_http(host, client_http_port)
        return rc

    def _start_http(self, host, port):
        """/metrics and /health on host:port; a port that cannot be bound (another rank of the
        same host has it, say) is logged and leaves the client without one, as metrics are
        optional."""
        port = DEFAULT_CLIENT_HTTP_PORT if port is None else int(port)
        if self._http is not None:  # set up again: the new client's server replaces it
            self._http.close()
            self._http = None
        try:
            self._http = _http.MetricsServer(host, port, self._core.metrics_text)
        except (OSError, OverflowError) as e:
            _log.warning("setup: client_http_port %s:%d cannot be served (%s); this client "
                         "has no HTTP metrics server", host, port, e)
            return
        _log.info("setup: client metrics on http://%s/metrics", self._http.address)

    def setup_dummy(self, mem_pool_size=0, local_buffer_size=0, server_address=""):
        """Upstream's standalone mode (the engine talks to a separate client process through
        shared memory) is not supported: returns NOT_SUPPORTED and logs why."""
        _log.error("setup_dummy: standalone mode (a client process shared through shared "
                   "memory) is not supported by mooncake_c; call setup() instead")
        return _core.NOT_SUPPORTED

    def close(self):
        srv, self._http = getattr(self, "_http", None), None
        if srv is not None:
            srv.close()
        self._core.close()
        return 0

    def health_check(self):
        """0 healthy, 1 not set up or closed, 2 master unreachable (upstream's codes)."""
        if self._core.handle is None:
            return 1
        rc = self._core.exist(_HEALTH_KEY)
        return 0 if rc >= 0 else 2

    def get_hostname(self):
        """The endpoint ("host:port") peers reach this client's segment at."""
        return self._core.endpoint()

    def get_metrics(self):
        """This client's own counts as Prometheus text (mc_client_metrics_text: puts, gets by
        tier, bytes, errors by code, latency histograms in seconds); "" when not set up.
        Upstream's Python class has no such call; its clients serve these on their HTTP port."""
        return self._core.metrics_text()[1]

    # ---- copying API
    def put(self, key, value, config=None):
        return self._core.put(key, value, config)

    def get(self, key):
        return self._core.get_bytes(key)[1]

    def put_batch(self, keys, values, config=None):
        rc, res = self._core.batch_put_values(keys, values, config)
        if rc < 0:
            return rc
        return next((r for r in res if r < 0), 0)

    def get_batch(self, keys):
        return [b for _, b in self._core.batch_get_bytes(keys)]

    # ---- existence and removal
    def is_exist(self, key):
        return self._core.exist(key)

    def batch_is_exist(self, keys):
        return self._core.batch_exist(keys)[1]

    def get_size(self, key):
        return self._core.get_size(key)

    def remove(self, key, force=False):
        return self._core.remove(key, force)

    def remove_all(self, force=False):
        return self._core.remove_all(force)

    # ---- zero-copy API: integer addresses
    def register_buffer(self, buffer_ptr, size):
        return self._core.register_buffer(buffer_ptr, size)

    def unregister_buffer(self, buffer_ptr):
        return self._core.unregister_buffer(buffer_ptr)

    def put_from(self, key, buffer_ptr, size, config=None):
        return self._core.put_ptr(key, buffer_ptr, size, config)

    def get_into(self, key, buffer_ptr, size):
        return self._core.get_into_ptr(key, buffer_ptr, size)

    def batch_put_from(self, keys, buffer_ptrs, sizes, config=None):
        return self._core.batch_put_ptrs(keys, buffer_ptrs, sizes, config)[1]

    def batch_get_into(self, keys, buffer_ptrs, sizes):
        return self._core.batch_get_ptrs(keys, buffer_ptrs, sizes)[1]

    # ---- calls of the engine connectors (one master round trip per batch)
    def batch_put_from_multi_buffers(self, keys, all_buffer_ptrs, all_sizes, config=None):
        """Value i is the concatenation of the buffers all_buffer_ptrs[i] (sizes all_sizes[i]).
        Returns per key 0 or a negative error."""
        return self._core.batch_put_parts(keys, all_buffer_ptrs, all_sizes, config)[1]

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node=False):
        """Reads value i scattered over the buffers all_buffer_ptrs[i]; per key its total size
        or a negative error. prefer_alloc_in_same_node has no effect (reads already prefer a
        replica in this process)."""
        return self._core.batch_get_parts(keys, all_buffer_ptrs, all_sizes)[1]

    def put_parts(self, key, *parts, config=None):
        """Stores the concatenation of parts (objects with the buffer protocol) under key."""
        keep = [_core.buffer_arg(p, writable=False) for p in parts]
        ptrs = [_address(a[0]) for a in keep]
        rc, res = self._core.batch_put_parts([key], [ptrs], [[a[1] for a in keep]], config)
        return rc if rc < 0 else res[0]

    def get_buffer(self, key):
        """The value in a buffer the library owns (BufferHandle), or None when missing."""
        n, h = self._core.get_alloc(key)
        return h if n >= 0 else None

    def batch_get_buffer(self, keys):
        """Per key a BufferHandle, or None when missing."""
        return [h for _, h in self._core.batch_get_alloc(keys)[1]]

    def get_replica_desc(self, key):
        """The key's replicas (objects with upstream's is_memory_replica /
        get_memory_descriptor / is_disk_replica / get_disk_descriptor); [] when missing."""
        return self._core.query_replicas(key)[1]

    def batch_get_replica_desc(self, keys):
        """{key: [replica descriptors]} for the keys that exist (one BatchGetReplicaList; like
        upstream's this is a read: it takes a read lease)."""
        rc, res = self._core.batch_query_replicas(keys)
        return {k: reps for k, (st, reps) in zip(keys, res) if st == 0 and reps}

    def batch_remove(self, keys, force=False):
        """Per key 0 or a negative error (OBJECT_HAS_LEASE unless force)."""
        return self._core.batch_remove(keys, force)[1]

    # ---- upsert: replace a key's value atomically (readers get the old or the new, whole)
    def upsert(self, key, value, config=None):
        """Stores value under key, replacing an existing value; 0 or a negative error."""
        ptr, n, _keep = _core.buffer_arg(value, writable=False)
        return self._core.upsert_ptr(key, _address(ptr), n, config)

    def upsert_from(self, key, buffer_ptr, size, config=None):
        return self._core.upsert_ptr(key, buffer_ptr, size, config)

    def batch_upsert_from(self, keys, buffer_ptrs, sizes, config=None):
        """Per key 0 or a negative error (each key is its own swap)."""
        return self._core.batch_upsert_ptrs(keys, buffer_ptrs, sizes, config)[1]

    def upsert_parts(self, key, *parts, config=None):
        """upsert of the concatenation of parts (gathered into one buffer first)."""
        try:
            data = b"".join(bytes(memoryview(p).cast("B")) for p in parts)
        except (TypeError, ValueError):
            return _core.INVALID_PARAMS
        return self.upsert(key, data, config)

    def upsert_batch(self, keys, values, config=None):
        """0, or the first key's negative error (as put_batch)."""
        if len(keys) != len(values):
            return _core.INVALID_PARAMS
        keep = [_core.buffer_arg(v, writable=False) for v in values]
        rc, res = self._core.batch_upsert_ptrs(keys, [_address(a[0]) for a in keep],
                                               [a[1] for a in keep], config)
        if rc < 0:
            return rc
        return next((r for r in res if r < 0), 0)

    def remove_by_regex(self, regex_pattern, force=False):
        """Removes the keys the pattern matches, on the master; returns how many or a negative
        error. The pattern is a POSIX extended regex matched against the whole key (anchored as
        ^(pattern)$), so a pattern meant as a prefix needs ".*" after it."""
        return self._core.remove_by_regex(regex_pattern, force)

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                        all_sizes):
        """Byte ranges of values into buffers: for buffer b, key all_keys[b][k] and range r,
        all_sizes[b][k][r] bytes from offset all_src_offsets[b][k][r] of the value go to
        buffer_ptrs[b] + all_dst_offsets[b][k][r]. Returns the same nesting of per-range
        results (bytes copied or a negative error). Each key is read once."""
        uniq, index = [], {}
        flat_key, flat_src, flat_dst, flat_len, shape = [], [], [], [], []
        try:
            for b, base in enumerate(buffer_ptrs):
                row = []
                for k, key in enumerate(all_keys[b]):
                    dsts, srcs, lens = all_dst_offsets[b][k], all_src_offsets[b][k], \
                        all_sizes[b][k]
                    if not len(dsts) == len(srcs) == len(lens):
                        raise ValueError
                    if key not in index:
                        index[key] = len(uniq)
                        uniq.append(key)
                    for d, s_, n in zip(dsts, srcs, lens):
                        flat_key.append(index[key])
                        flat_dst.append(int(base) + int(d))
                        flat_src.append(int(s_))
                        flat_len.append(int(n))
                    row.append(len(lens))
                shape.append(row)
        except (IndexError, ValueError, TypeError):
            return [[[_core.INVALID_PARAMS] * len(all_sizes[b][k]) for k in range(len(ks))]
                    for b, ks in enumerate(all_keys)]
        rc, res = self._core.get_ranges(uniq, flat_key, flat_src, flat_dst, flat_len)
        out, i = [], 0
        for row in shape:
            rrow = []
            for n in row:
                rrow.append(res[i:i + n])
                i += n
            out.append(rrow)
        return out

    def __del__(self):
        srv = getattr(self, "_http", None)
        if srv is not None:
            srv.close()
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()
