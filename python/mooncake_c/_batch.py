"""The connector batch calls of libmooncake_client (client.h, "calls for engine connectors"),
as methods Core inherits: multi-part puts and gets, library-owned buffers, byte ranges,
replica descriptors and batch removal. Each is one C call, so one master round trip per batch."""

import ctypes

from . import _native
from ._native import lib

OK = 0
INVALID_PARAMS = -600
NOT_SUPPORTED = -1012


def _keys(keys):
    from ._core import encode_key
    return (ctypes.c_char_p * len(keys))(*[encode_key(k) for k in keys])


def _available(name):
    return hasattr(lib, name)


class _Freer:
    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr

    def __del__(self):
        if self.ptr:
            lib.mc_value_free(self.ptr)
            self.ptr = 0


class BufferHandle:
    """A value read into a buffer the library allocated (get_buffer / batch_get_buffer), as
    upstream's BufferHandle: ptr() its address, size() and len() its length in bytes, and the
    buffer protocol (memoryview(h), bytes(h)) without a copy. Each handle is a ctypes byte array
    over the library's buffer (a subclass per size, made by _handle), which is what exports the
    buffer; the buffer is released (mc_value_free) once the handle and every view of it are
    gone."""

    __slots__ = ()

    def ptr(self):
        return ctypes.addressof(self) if len(self) else 0

    def size(self):
        return len(self)

    def len(self):
        return len(self)

    def __repr__(self):
        return "BufferHandle(ptr=0x%x, size=%d)" % (self.ptr(), len(self))


_handle_types = {}


def _handle(ptr, size):
    size = int(size)
    t = _handle_types.get(size)
    if t is None:
        t = type("BufferHandle", (BufferHandle, ctypes.c_ubyte * size), {})
        if len(_handle_types) < 1024:
            _handle_types[size] = t
    if not ptr or not size:
        if ptr:
            lib.mc_value_free(ptr)
        return t()
    h = t.from_address(ptr)
    h._mc_free = _Freer(ptr)  # lives exactly as long as the handle does
    return h


class ReplicaInfo:
    """One replica of an object, with the accessors upstream's Replica::Descriptor binding
    exposes (is_memory_replica / get_memory_descriptor, is_disk_replica / get_disk_descriptor,
    status)."""

    def __init__(self, ri, size):
        self.id = int(ri.id)
        self.type = "MEMORY" if ri.type == 0 else "LOCAL_DISK"
        self.status = "COMPLETE" if ri.status == 3 else "PROCESSING"
        self.segment_name = ri.segment.decode(errors="replace")
        self.offset = int(ri.offset)
        self.endpoint = ri.endpoint.decode(errors="replace")
        self.holder = ri.holder.decode(errors="replace")
        self.size = int(size)

    def is_memory_replica(self):
        return self.type == "MEMORY"

    def is_disk_replica(self):
        return self.type == "LOCAL_DISK"

    def get_memory_descriptor(self):
        if not self.is_memory_replica():
            raise RuntimeError("not a memory replica")
        return MemoryDescriptor(self)

    def get_disk_descriptor(self):
        if not self.is_disk_replica():
            raise RuntimeError("not a disk replica")
        return DiskDescriptor(self)

    def __repr__(self):
        return "ReplicaDescriptor(%s, %s, endpoint=%r)" % (self.type, self.status, self.endpoint)


class _Buffer:
    def __init__(self, r):
        self.transport_endpoint_ = r.endpoint
        self.buffer_address_ = r.offset  # offset inside the segment (no global addresses here)
        self.size_ = r.size
        self.segment_name = r.segment_name


class MemoryDescriptor:
    def __init__(self, r):
        self.buffer_descriptor = _Buffer(r)


class DiskDescriptor:
    def __init__(self, r):
        self.file_path = ""  # a record in the holder's store, not a file of its own
        self.object_size = r.size
        self.endpoint = r.endpoint
        self.holder = r.holder


def _object_replicas(info):
    return [ReplicaInfo(info.replicas[j], info.size) for j in range(info.replica_count)]


class BatchCalls:
    """Mixed into Core: self.handle is the mc_client (None when closed)."""

    def _closed(self, n):
        return [INVALID_PARAMS] * n

    # ---- multi-part values
    def batch_put_parts(self, keys, all_ptrs, all_sizes, config=None):
        """(rc, per-key results): value i is the concatenation of all_ptrs[i] / all_sizes[i]."""
        from ._core import config_arg
        n = len(keys)
        if self.handle is None or len(all_ptrs) != n or len(all_sizes) != n:
            return INVALID_PARAMS, self._closed(n)
        if any(len(p) != len(s) for p, s in zip(all_ptrs, all_sizes)):
            return INVALID_PARAMS, self._closed(n)
        if n == 0:
            return OK, []
        if not _available("mc_batch_put_parts"):
            return NOT_SUPPORTED, [NOT_SUPPORTED] * n
        parts = [(ctypes.c_void_p * max(len(p), 1))(*p) for p in all_ptrs]
        lens = [(ctypes.c_size_t * max(len(s), 1))(*s) for s in all_sizes]
        parr = (ctypes.POINTER(ctypes.c_void_p) * n)(*[ctypes.cast(a, ctypes.POINTER(
            ctypes.c_void_p)) for a in parts])
        larr = (ctypes.POINTER(ctypes.c_size_t) * n)(*[ctypes.cast(a, ctypes.POINTER(
            ctypes.c_size_t)) for a in lens])
        narr = (ctypes.c_size_t * n)(*[len(p) for p in all_ptrs])
        res = (ctypes.c_int * n)()
        rc_p, _keep = config_arg(config)
        rc = lib.mc_batch_put_parts(self.handle, n, _keys(keys), parr, larr, narr, rc_p, res)
        return rc, ([rc] * n if rc < 0 else list(res))

    def batch_get_parts(self, keys, all_ptrs, all_sizes):
        n = len(keys)
        if self.handle is None or len(all_ptrs) != n or len(all_sizes) != n:
            return INVALID_PARAMS, self._closed(n)
        if any(len(p) != len(s) for p, s in zip(all_ptrs, all_sizes)):
            return INVALID_PARAMS, self._closed(n)
        if n == 0:
            return OK, []
        if not _available("mc_batch_get_parts"):
            return NOT_SUPPORTED, [NOT_SUPPORTED] * n
        parts = [(ctypes.c_void_p * max(len(p), 1))(*p) for p in all_ptrs]
        caps = [(ctypes.c_size_t * max(len(s), 1))(*s) for s in all_sizes]
        parr = (ctypes.POINTER(ctypes.c_void_p) * n)(*[ctypes.cast(a, ctypes.POINTER(
            ctypes.c_void_p)) for a in parts])
        carr = (ctypes.POINTER(ctypes.c_size_t) * n)(*[ctypes.cast(a, ctypes.POINTER(
            ctypes.c_size_t)) for a in caps])
        narr = (ctypes.c_size_t * n)(*[len(p) for p in all_ptrs])
        res = (ctypes.c_int64 * n)()
        rc = lib.mc_batch_get_parts(self.handle, n, _keys(keys), parr, carr, narr, res)
        return rc, ([rc] * n if rc < 0 else list(res))

    # ---- library-owned buffers
    def batch_get_alloc(self, keys):
        """(rc, [(size or error, BufferHandle or None)])."""
        n = len(keys)
        if self.handle is None:
            return INVALID_PARAMS, [(INVALID_PARAMS, None)] * n
        if n == 0:
            return OK, []
        if not _available("mc_batch_get_alloc"):
            return NOT_SUPPORTED, [(NOT_SUPPORTED, None)] * n
        outs = (ctypes.c_void_p * n)()
        res = (ctypes.c_int64 * n)()
        rc = lib.mc_batch_get_alloc(self.handle, n, _keys(keys), 0, outs, res)
        if rc < 0:
            return rc, [(rc, None)] * n
        return OK, [(res[i], _handle(outs[i], res[i]) if res[i] >= 0 else None)
                    for i in range(n)]

    def get_alloc(self, key):
        from ._core import encode_key
        if self.handle is None:
            return INVALID_PARAMS, None
        out = ctypes.c_void_p()
        n = lib.mc_get_alloc(self.handle, encode_key(key), 0, ctypes.byref(out))
        if n < 0:
            return n, None
        return n, _handle(out.value, n)

    # ---- ranges
    def get_ranges(self, keys, key_index, src_offsets, dsts, lens):
        """Flat ranges over unique keys: (rc, per-range results)."""
        nr = len(key_index)
        if self.handle is None:
            return INVALID_PARAMS, [INVALID_PARAMS] * nr
        if nr == 0:
            return OK, []
        if not _available("mc_batch_get_ranges"):
            return NOT_SUPPORTED, [NOT_SUPPORTED] * nr
        nk = len(keys)
        res = (ctypes.c_int64 * nr)()
        rc = lib.mc_batch_get_ranges(self.handle, nk, _keys(keys), nr,
                                     (ctypes.c_size_t * nr)(*key_index),
                                     (ctypes.c_uint64 * nr)(*src_offsets),
                                     (ctypes.c_void_p * nr)(*dsts),
                                     (ctypes.c_size_t * nr)(*lens), res)
        return rc, ([rc] * nr if rc < 0 else list(res))

    # ---- descriptors
    def query_replicas(self, key):
        """(rc, [ReplicaInfo]) from the master's lease-free admin query."""
        from ._core import encode_key
        if self.handle is None:
            return INVALID_PARAMS, []
        info = _native.ObjectInfo()
        rc = lib.mc_query(self.handle, encode_key(key), ctypes.byref(info))
        if rc < 0:
            return rc, []
        try:
            return OK, _object_replicas(info)
        finally:
            lib.mc_object_info_free(ctypes.byref(info))

    def batch_query_replicas(self, keys):
        """(rc, per key (status, [ReplicaInfo])) from one BatchGetReplicaList."""
        n = len(keys)
        if self.handle is None:
            return INVALID_PARAMS, [(INVALID_PARAMS, [])] * n
        if n == 0:
            return OK, []
        if not _available("mc_batch_query"):
            return NOT_SUPPORTED, [(NOT_SUPPORTED, [])] * n
        infos = (_native.ObjectInfo * n)()
        res = (ctypes.c_int * n)()
        rc = lib.mc_batch_query(self.handle, n, _keys(keys), infos, res)
        if rc < 0:
            return rc, [(rc, [])] * n
        out = []
        for i in range(n):
            out.append((res[i], _object_replicas(infos[i]) if res[i] == 0 else []))
            lib.mc_object_info_free(ctypes.byref(infos[i]))
        return OK, out

    # ---- removal
    def batch_remove(self, keys, force=False):
        n = len(keys)
        if self.handle is None:
            return INVALID_PARAMS, self._closed(n)
        if n == 0:
            return OK, []
        if not _available("mc_batch_remove"):
            return NOT_SUPPORTED, [NOT_SUPPORTED] * n
        res = (ctypes.c_int * n)()
        rc = lib.mc_batch_remove(self.handle, n, _keys(keys), bool(force), res)
        return rc, ([rc] * n if rc < 0 else list(res))

    def remove_by_regex(self, pattern, force=False):
        from ._core import encode_key
        if self.handle is None:
            return INVALID_PARAMS
        if not _available("mc_remove_by_regex"):
            return NOT_SUPPORTED
        return lib.mc_remove_by_regex(self.handle, encode_key(pattern), bool(force))

    # ---- upsert (replace atomically)
    def upsert_ptr(self, key, ptr, size, config=None):
        from ._core import config_arg, encode_key
        if self.handle is None:
            return INVALID_PARAMS
        if not _available("mc_upsert"):
            return NOT_SUPPORTED
        rc_p, _keep = config_arg(config)
        return lib.mc_upsert(self.handle, encode_key(key), ptr, size, rc_p)

    def batch_upsert_ptrs(self, keys, ptrs, sizes, config=None):
        from ._core import config_arg
        n = len(keys)
        if self.handle is None or len(ptrs) != n or len(sizes) != n:
            return INVALID_PARAMS, self._closed(n)
        if n == 0:
            return OK, []
        if not _available("mc_batch_upsert"):
            return NOT_SUPPORTED, [NOT_SUPPORTED] * n
        res = (ctypes.c_int * n)()
        rc_p, _keep = config_arg(config)
        rc = lib.mc_batch_upsert(self.handle, n, _keys(keys), (ctypes.c_void_p * n)(*ptrs),
                                 (ctypes.c_size_t * n)(*sizes), rc_p, res)
        return rc, ([rc] * n if rc < 0 else list(res))
