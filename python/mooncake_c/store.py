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
"rdma" (default: the one that owns local_hostname).
"""

import re

from . import _core
from ._core import ReplicateConfig  # noqa: F401  (re-exported with upstream's name)

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


class MooncakeDistributedStore:
    def __init__(self):
        self._core = _core.Core()

    # ---- lifecycle
    def setup(self, local_hostname, metadata_server=None, global_segment_size=16 << 20,
              local_buffer_size=16 << 20, protocol="tcp", rdma_devices="",
              master_server_addr="127.0.0.1:50051", engine=None):
        """Connects to the master and contributes global_segment_size bytes of DRAM (0 = none).
        Also accepts one dict with upstream's setup keys. Returns 0 or a negative error."""
        if isinstance(local_hostname, dict):
            d = local_hostname
            local_hostname = d.get("local_hostname", "127.0.0.1")
            global_segment_size = d.get("global_segment_size", global_segment_size)
            protocol = d.get("protocol", protocol)
            rdma_devices = d.get("rdma_devices", d.get("device_name", rdma_devices))
            master_server_addr = d.get("master_server_addr", master_server_addr)
        try:
            host, port = split_hostname(local_hostname)
            seg = parse_size(global_segment_size)
        except ValueError:
            return _core.INVALID_PARAMS
        return self._core.open(master_server_addr, host=host, data_port=port,
                               segment_size=seg, protocol=protocol or "tcp",
                               rdma_devices=rdma_devices if protocol == "rdma" else None)

    def close(self):
        self._core.close()
        return 0

    def health_check(self):
        """0 when set up (upstream: HC_HEALTHY), 1 when not."""
        return 0 if self._core.handle is not None else 1

    def get_hostname(self):
        """The endpoint ("host:port") peers reach this client's segment at."""
        return self._core.endpoint()

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

    def __del__(self):
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()
