"""Client: the Pythonic face of the same library. Errors raise MooncakeError (carrying the
error's name and code), values are any object with the buffer protocol, and the client is a
context manager.

    import mooncake_c
    with mooncake_c.Client("127.0.0.1:50051", segment_size=256 << 20) as c:
        c.put("k", b"value")           # bytes, bytearray, memoryview, numpy arrays...
        c.get("k")                     # b"value"; raises mooncake_c.ObjectNotFound if absent
        buf = bytearray(c.size("k"))
        c.get_into("k", buf)           # reads into any writable buffer, returns the size
log_level ("debug", "info", "warn", "error", "off"; the library's default is "warn") filters the
library's log lines on stderr; auth_token_file, protected_mode, tls_cert_file, tls_key_file and
tls_ca_file are the client options of the same names (README "Security").
"""

from . import _core
from .errors import check


class Client:
    def __init__(self, master="127.0.0.1:50051", *, host="127.0.0.1", data_port=0,
                 segment_size=0, protocol="tcp", bind_address=None, disk_path=None,
                 disk_capacity=0, checksums=None, huge_pages=False, connect_timeout_ms=None,
                 rpc_timeout_ms=None, log_level=None, auth_token_file=None,
                 protected_mode=None, tls_cert_file=None, tls_key_file=None, tls_ca_file=None):
        self._core = _core.Core()
        check(self._core.open(master, host=host, data_port=data_port,
                              segment_size=segment_size, protocol=protocol,
                              bind_address=bind_address, disk_path=disk_path,
                              disk_capacity=disk_capacity, checksums=checksums,
                              huge_pages=huge_pages, connect_timeout_ms=connect_timeout_ms,
                              rpc_timeout_ms=rpc_timeout_ms, log_level=log_level,
                              auth_token_file=auth_token_file,
                              protected_mode=protected_mode, tls_cert_file=tls_cert_file,
                              tls_key_file=tls_key_file, tls_ca_file=tls_ca_file), "open")

    @property
    def endpoint(self):
        return self._core.endpoint()

    def close(self):
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()

    def metrics(self):
        """This client's own counts, Prometheus text (as MooncakeDistributedStore.get_metrics)."""
        rc, text = self._core.metrics_text()
        check(rc, "metrics")
        return text

    def put(self, key, value, config=None):
        check(self._core.put(key, value, config), "put", key)

    def get(self, key):
        n, data = self._core.get_bytes(key)
        check(n, "get", key)
        return data

    def get_into(self, key, buffer):
        ptr, n, _keep = _core.buffer_arg(buffer, writable=True)
        return check(self._core.get_into_ptr(key, ptr, n), "get_into", key)

    def size(self, key):
        return check(self._core.get_size(key), "size", key)

    def exists(self, key):
        return check(self._core.exist(key), "exists", key) == 1

    def remove(self, key, force=False):
        check(self._core.remove(key, force), "remove", key)

    def remove_all(self, force=False):
        return check(self._core.remove_all(force), "remove_all")

    def put_many(self, items, config=None):
        """items: a dict or (key, value) pairs; raises on the first key that failed."""
        pairs = list(items.items() if hasattr(items, "items") else items)
        keys = [k for k, _ in pairs]
        rc, res = self._core.batch_put_values(keys, [v for _, v in pairs], config)
        check(rc, "put_many")
        for k, r in zip(keys, res):
            check(r, "put_many", k)

    def get_many(self, keys):
        """{key: bytes} for the keys found; missing keys are left out, other errors raise."""
        out = {}
        for k, (r, data) in zip(keys, self._core.batch_get_bytes(keys)):
            if r == _core.OBJECT_NOT_FOUND:
                continue
            check(r, "get_many", k)
            out[k] = data
        return out
