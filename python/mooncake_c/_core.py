"""The connection both Python layers share: one mc_client handle and the conversions between
Python objects (str keys, buffers, configs) and the C API's arguments."""

import ctypes
import threading

from . import _native
from ._batch import BatchCalls
from ._native import lib

OK = 0
INVALID_PARAMS = -600
INVALID_KEY = -400
BUFFER_OVERFLOW = -10
OBJECT_NOT_FOUND = -704
NOT_SUPPORTED = -1012

# get/get_batch read into a per-thread buffer that grows to the largest value seen and is then
# reused; beyond this size a buffer is not kept between calls.
_KEEP_BUFFER_MAX = 256 << 20
# get_batch reads the whole batch in one call when n * (largest value seen) stays below this.
_BATCH_AREA_MAX = 256 << 20


def encode_key(key):
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, (bytes, bytearray)):
        return bytes(key)
    raise TypeError("key must be str or bytes, not %s" % type(key).__name__)


def buffer_arg(obj, writable):
    """(c argument, length, keepalive) for an object with the buffer protocol. bytes are passed
    without a copy; other read-only buffers are copied (ctypes cannot borrow them)."""
    if isinstance(obj, bytes) and not writable:
        return obj, len(obj), obj
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise ValueError("buffer must be C-contiguous")
    if mv.format != "B" or mv.ndim != 1:
        mv = mv.cast("B")
    n = mv.nbytes
    if mv.readonly:
        if writable:
            raise TypeError("buffer is read-only")
        data = mv.tobytes()
        return data, n, data
    if n == 0:
        return None, 0, None
    arr = (ctypes.c_char * n).from_buffer(mv)
    return ctypes.addressof(arr), n, arr


class ReplicateConfig:
    """Placement of a put, with upstream's attribute names (mooncake.store.ReplicateConfig).
    Like upstream's (a pybind class) it refuses attributes it does not have, so a misspelt
    option fails instead of being ignored.

    Upstream's fields and what they do here: replica_num, with_soft_pin, preferred_segment(s)
    as upstream; group_ids: the first id groups the key (keys of a group share a shard, a lease
    and eviction fate; only one group per key here); soft_pin_action and
    prefer_alloc_in_same_node are accepted and have no effect (placement already prefers this
    process's segment for reads). Ours: with_hard_pin, soft_pin_ttl_ms, group_id."""

    __slots__ = ("replica_num", "with_soft_pin", "with_hard_pin", "preferred_segment",
                 "preferred_segments", "soft_pin_ttl_ms", "group_id", "group_ids",
                 "soft_pin_action", "prefer_alloc_in_same_node")

    def __init__(self, replica_num=1, with_soft_pin=False, with_hard_pin=False,
                 preferred_segment="", preferred_segments=None, soft_pin_ttl_ms=0, group_id=None,
                 group_ids=None, soft_pin_action=None, prefer_alloc_in_same_node=False):
        self.replica_num = replica_num
        self.with_soft_pin = with_soft_pin
        self.with_hard_pin = with_hard_pin
        self.preferred_segment = preferred_segment
        self.preferred_segments = list(preferred_segments or [])
        self.soft_pin_ttl_ms = soft_pin_ttl_ms
        self.group_id = group_id
        self.group_ids = list(group_ids or [])
        self.soft_pin_action = soft_pin_action
        self.prefer_alloc_in_same_node = prefer_alloc_in_same_node

    def __repr__(self):
        return ("ReplicateConfig(replica_num=%r, with_soft_pin=%r, with_hard_pin=%r, "
                "preferred_segments=%r)" % (self.replica_num, self.with_soft_pin,
                                            self.with_hard_pin, self._segments()))

    def _segments(self):
        segs = list(self.preferred_segments)
        if self.preferred_segment and self.preferred_segment not in segs:
            segs.insert(0, self.preferred_segment)
        return segs

    def to_c(self):
        """(pointer to struct mc_replicate_config, keepalive)."""
        view, area = _native.new_config(_native.ReplicateConfigC, lib.mc_replicate_config_init,
                                         getattr(lib, "mc_replicate_config_init_sized", None))
        view.replica_num = int(self.replica_num)
        view.with_soft_pin = bool(self.with_soft_pin)
        view.soft_pin_ttl_ms = int(self.soft_pin_ttl_ms or 0)
        view.with_hard_pin = bool(self.with_hard_pin)
        segs = [encode_key(s) for s in self._segments()]
        keep = [area, segs]
        if segs:
            arr = (ctypes.c_char_p * len(segs))(*segs)
            keep.append(arr)
            view.preferred_segments = arr
            view.preferred_segments_count = len(segs)
        group = self.group_id or (self.group_ids[0] if self.group_ids else None)
        if group:
            gid = encode_key(group)
            keep.append(gid)
            view.group_id = gid
        return ctypes.byref(view), keep


def config_arg(config):
    if config is None:
        return None, None
    if not isinstance(config, ReplicateConfig):
        raise TypeError("config must be a ReplicateConfig")
    return config.to_c()


class Core(BatchCalls):
    """One open mc_client. Every method returns the C API's int results (0 / size or a negative
    error code); the layers above turn them into upstream's conventions or exceptions."""

    def __init__(self):
        self.handle = None
        self._tls = threading.local()
        self._batch_hint = 0  # largest value get_batch has seen

    # ---- lifecycle
    def open(self, master, host="127.0.0.1", data_port=0, segment_size=0, protocol="tcp",
             bind_address=None, disk_path=None, disk_capacity=0, checksums=None,
             huge_pages=False, connect_timeout_ms=None, rpc_timeout_ms=None, log_level=None,
             auth_token_file=None, protected_mode=None, rdma_devices=None,
             rdma_ack_timeout=None, rdma_tos=None, rdma_qp_pool=None, tls_cert_file=None,
             tls_key_file=None, tls_ca_file=None):
        if self.handle is not None:
            return INVALID_PARAMS
        view, area = _native.new_config(_native.ClientConfig, lib.mc_client_config_init,
                                         getattr(lib, "mc_client_config_init_sized", None))
        keep = [area]

        def s(v):
            b = encode_key(v)
            keep.append(b)
            return b

        view.master_address = s(master)
        view.host = s(host)
        if bind_address:
            view.bind_address = s(bind_address)
        view.protocol = s(protocol)
        view.data_port = int(data_port)
        view.segment_size = int(segment_size)
        view.huge_pages = bool(huge_pages)
        if disk_path:
            view.disk_path = s(disk_path)
            view.disk_capacity = int(disk_capacity)
        if checksums is not None:
            view.checksums = bool(checksums)
        if connect_timeout_ms is not None:
            view.connect_timeout_ms = int(connect_timeout_ms)
        if rpc_timeout_ms is not None:
            view.rpc_timeout_ms = int(rpc_timeout_ms)
        if log_level is not None:
            if log_level not in _native.LOG_LEVELS:
                return INVALID_PARAMS
            if _native.field_covered(view, "log_level"):
                view.log_level = _native.LOG_LEVELS[log_level]
        for name, v in (("auth_token_file", auth_token_file), ("protected_mode", protected_mode),
                        ("rdma_devices", rdma_devices or None),
                        ("tls_cert_file", tls_cert_file or None),
                        ("tls_key_file", tls_key_file or None),
                        ("tls_ca_file", tls_ca_file or None)):
            if v is None:
                continue
            if not _native.field_covered(view, name):
                return INVALID_PARAMS  # a library too old for this option
            setattr(view, name, bool(v) if name == "protected_mode" else s(v))
        for name, v in (("rdma_ack_timeout", rdma_ack_timeout), ("rdma_tos", rdma_tos),
                        ("rdma_qp_pool", rdma_qp_pool)):
            if v is None:
                continue
            if not _native.field_covered(view, name):
                return INVALID_PARAMS  # a library too old for this option
            try:
                iv = int(v)
            except (TypeError, ValueError):
                return INVALID_PARAMS
            if not -(1 << 31) <= iv < (1 << 31) or (name == "rdma_qp_pool" and iv < 0):
                return INVALID_PARAMS  # would wrap in the C field
            setattr(view, name, iv)
        out = ctypes.c_void_p()
        rc = lib.mc_client_open(ctypes.byref(view), ctypes.byref(out))
        if rc == OK:
            self.handle = out.value
        return rc

    def close(self):
        h, self.handle = self.handle, None
        if h is not None:
            lib.mc_client_close(h)

    def endpoint(self):
        if self.handle is None:
            return ""
        return lib.mc_client_endpoint(self.handle).decode()

    def metrics_text(self):
        """(rc, str): this client's Prometheus text, or a negative error and ""."""
        if self.handle is None:
            return INVALID_PARAMS, ""
        f = getattr(lib, "mc_client_metrics_text", None)
        if f is None:
            return NOT_SUPPORTED, ""
        cap = 16384
        for _ in range(4):  # the text may grow between the calls (a new error code, say)
            buf = ctypes.create_string_buffer(cap)
            n = f(self.handle, buf, cap)
            if n < 0:
                return n, ""
            if n < cap:
                return 0, buf.value.decode()
            cap = n + 4096
        return BUFFER_OVERFLOW, ""

    # ---- single-key calls
    def put(self, key, value, config=None):
        ptr, n, _keep = buffer_arg(value, writable=False)
        return self.put_ptr(key, ptr, n, config)

    def put_ptr(self, key, ptr, size, config=None):
        if self.handle is None:
            return INVALID_PARAMS
        rc_p, _keep = config_arg(config)
        return lib.mc_put(self.handle, encode_key(key), ptr, size, rc_p)

    def get_into_ptr(self, key, ptr, size):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_get(self.handle, encode_key(key), ptr, size)

    def _scratch(self, need):
        buf = getattr(self._tls, "buf", None)
        if buf is None or len(buf) < need:
            buf = ctypes.create_string_buffer(max(need, 4096))
            if need <= _KEEP_BUFFER_MAX:
                self._tls.buf = buf
        return buf

    def get_bytes(self, key):
        """(rc, bytes): rc is the size or a negative error."""
        if self.handle is None:
            return INVALID_PARAMS, b""
        k = encode_key(key)
        buf = self._scratch(0)
        get_ex = _native.get_ex
        needed = ctypes.c_size_t(0)
        for _ in range(4):  # the value may be replaced by a larger one between the calls
            if get_ex is not None:
                n = get_ex(self.handle, k, buf, len(buf), ctypes.byref(needed))
                size = needed.value
            else:  # an older library: ask for the size separately
                n = lib.mc_get(self.handle, k, buf, len(buf))
                size = lib.mc_get_size(self.handle, k) if n == BUFFER_OVERFLOW else 0
                if size < 0:
                    return size, b""
            if n >= 0:
                return n, ctypes.string_at(buf, n)
            if n != BUFFER_OVERFLOW:
                return n, b""
            buf = self._scratch(size)
        return BUFFER_OVERFLOW, b""

    def get_size(self, key):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_get_size(self.handle, encode_key(key))

    def exist(self, key):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_exist(self.handle, encode_key(key))

    def remove(self, key, force=False):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_remove(self.handle, encode_key(key), bool(force))

    def remove_all(self, force=False):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_remove_all(self.handle, bool(force))

    def register_buffer(self, ptr, size):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_register_buffer(self.handle, ptr, size)

    def unregister_buffer(self, ptr):
        if self.handle is None:
            return INVALID_PARAMS
        return lib.mc_unregister_buffer(self.handle, ptr)

    # ---- batches: (whole-batch rc, per-key results)
    def batch_put_ptrs(self, keys, ptrs, sizes, config=None):
        n = len(keys)
        if len(ptrs) != n or len(sizes) != n:
            return INVALID_PARAMS, [INVALID_PARAMS] * n
        if self.handle is None:
            return INVALID_PARAMS, [INVALID_PARAMS] * n
        if n == 0:
            return OK, []
        karr = (ctypes.c_char_p * n)(*[encode_key(k) for k in keys])
        parr = (ctypes.c_void_p * n)(*ptrs)
        sarr = (ctypes.c_size_t * n)(*sizes)
        res = (ctypes.c_int * n)()
        rc_p, _keep = config_arg(config)
        rc = lib.mc_batch_put(self.handle, n, karr, parr, sarr, rc_p, res)
        return rc, ([rc] * n if rc < 0 else list(res))

    def batch_put_values(self, keys, values, config=None):
        if len(keys) != len(values):
            return INVALID_PARAMS, [INVALID_PARAMS] * len(keys)
        args = [buffer_arg(v, writable=False) for v in values]
        ptrs = [a[0] if not isinstance(a[0], bytes) else ctypes.cast(ctypes.c_char_p(a[0]),
                                                                     ctypes.c_void_p).value
                for a in args]
        return self.batch_put_ptrs(keys, ptrs, [a[1] for a in args], config)

    def batch_get_ptrs(self, keys, ptrs, sizes):
        n = len(keys)
        if len(ptrs) != n or len(sizes) != n or self.handle is None:
            return INVALID_PARAMS, [INVALID_PARAMS] * n
        if n == 0:
            return OK, []
        karr = (ctypes.c_char_p * n)(*[encode_key(k) for k in keys])
        parr = (ctypes.c_void_p * n)(*ptrs)
        sarr = (ctypes.c_size_t * n)(*sizes)
        res = (ctypes.c_int64 * n)()
        rc = lib.mc_batch_get(self.handle, n, karr, parr, sarr, res)
        return rc, ([rc] * n if rc < 0 else list(res))

    def batch_get_bytes(self, keys):
        """Per-key (rc, bytes). One batch call when the values fit the size seen so far; keys
        that do not fit are read one by one (which learns their size)."""
        n = len(keys)
        out = [None] * n
        hint = max(self._batch_hint, 4096)
        if n and hint * n <= _BATCH_AREA_MAX:
            area = ctypes.create_string_buffer(hint * n)
            base = ctypes.addressof(area)
            rc, res = self.batch_get_ptrs(keys, [base + i * hint for i in range(n)], [hint] * n)
            if rc < 0:
                return [(rc, b"")] * n
            for i, r in enumerate(res):
                if r >= 0:
                    out[i] = (r, ctypes.string_at(base + i * hint, r))
                elif r != BUFFER_OVERFLOW:
                    out[i] = (r, b"")
        for i in range(n):
            if out[i] is None:
                out[i] = self.get_bytes(keys[i])
                if out[i][0] > self._batch_hint:
                    self._batch_hint = out[i][0]
        return out

    def batch_exist(self, keys):
        n = len(keys)
        if self.handle is None:
            return INVALID_PARAMS, [INVALID_PARAMS] * n
        if n == 0:
            return OK, []
        karr = (ctypes.c_char_p * n)(*[encode_key(k) for k in keys])
        res = (ctypes.c_int * n)()
        rc = lib.mc_batch_exist(self.handle, n, karr, res)
        return rc, ([rc] * n if rc < 0 else list(res))
