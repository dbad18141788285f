"""A connector written against upstream Mooncake Store's Python API only, in the style of the
inference engines' KV-cache connectors: imports `mooncake.store`, sets the store up with the
positional arguments upstream documents, stores and loads KV blocks through the copying and the
zero-copy calls, and checks upstream's return conventions. Nothing here knows about mooncake_c.
"""

import ctypes

from mooncake.store import MooncakeDistributedStore, ReplicateConfig


class KVConnector:
    def __init__(self, master_server_address, local_hostname="127.0.0.1",
                 global_segment_size=32 * 1024 * 1024, local_buffer_size=16 * 1024 * 1024,
                 protocol="tcp", device_name="", metadata_server="P2PHANDSHAKE"):
        self.store = MooncakeDistributedStore()
        retcode = self.store.setup(local_hostname, metadata_server, global_segment_size,
                                   local_buffer_size, protocol, device_name,
                                   master_server_address)
        if retcode:
            raise RuntimeError("setup failed: %d" % retcode)
        self.block = 64 * 1024
        self.buf = ctypes.create_string_buffer(self.block * 4)
        self.ptr = ctypes.addressof(self.buf)
        if self.store.register_buffer(self.ptr, self.block * 4) != 0:
            raise RuntimeError("register_buffer failed")

    def save(self, keys, blocks):
        for i, b in enumerate(blocks):
            ctypes.memmove(self.ptr + i * self.block, b, len(b))
        rcs = self.store.batch_put_from(keys, [self.ptr + i * self.block for i in range(len(keys))],
                                        [len(b) for b in blocks], ReplicateConfig())
        return all(rc == 0 for rc in rcs)

    def lookup(self, keys):
        return [r == 1 for r in self.store.batch_is_exist(keys)]

    def load(self, keys):
        sizes = [self.store.get_size(k) for k in keys]
        if any(s < 0 for s in sizes):
            return None
        got = self.store.batch_get_into(keys, [self.ptr + i * self.block for i in range(len(keys))],
                                        sizes)
        if any(g < 0 for g in got):
            return None
        return [ctypes.string_at(self.ptr + i * self.block, g) for i, g in enumerate(got)]

    def close(self):
        self.store.unregister_buffer(self.ptr)
        self.store.close()
