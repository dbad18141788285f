"""Upsert is atomic for readers, across processes: while one client replaces a key's value over
and over, readers in other threads (ctypes drops the GIL in every call, so they run alongside)
read it continuously. Each value carries the SHA-256 of its payload, so a value mixed from two
versions fails its own check; a reader must also never miss the key."""

import hashlib
import threading

SIZE = 256 * 1024


def _value(i):
    payload = (b"%08d" % i) * (SIZE // 8 - 4)
    return payload + hashlib.sha256(payload).digest()


def _check(v):
    return len(v) == len(_value(0)) and hashlib.sha256(v[:-32]).digest() == v[-32:]


def test_concurrent_readers_see_old_or_new(master, daemon):
    from mooncake_c import MooncakeDistributedStore
    writer, reader = MooncakeDistributedStore(), MooncakeDistributedStore()
    assert writer.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master) == 0
    assert reader.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master) == 0
    try:
        assert writer.put("atomic", _value(0)) == 0
        stop = threading.Event()
        seen, bad = set(), []

        def read():
            while not stop.is_set():
                v = reader.get("atomic")
                if not _check(v):
                    bad.append(len(v))
                else:
                    seen.add(int(v[:8]))

        threads = [threading.Thread(target=read) for _ in range(3)]
        for t in threads:
            t.start()
        for i in range(1, 31):
            assert writer.upsert("atomic", _value(i)) == 0
        stop.set()
        for t in threads:
            t.join()
        assert not bad, "torn or missing reads: %r" % bad[:5]
        assert reader.get("atomic") == _value(30)
        assert len(seen) > 1  # the readers did see the value change under them
    finally:
        writer.remove_all(True)
        writer.close()
        reader.close()
