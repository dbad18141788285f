#!/usr/bin/env python3
"""Writes the decode-amplification inputs (README "Security") for the fuzz replays.

    gen_amplification.py OUTDIR

OUTDIR/master/batch_exist_key_empty_keys: one BatchExistKey frame whose body is 40 MiB of
empty keys (20 Mi elements); OUTDIR/peer/peer_batch_read_empty_slices: one PeerBatchRead frame
whose control message is 62 MiB of empty slices; OUTDIR/peer/peer_batch_read_big_unknown: one
whose control message is a single 40 MiB unknown field. Before the decode limits each made the
server allocate gigabytes; now each is refused before decoding. They are generated (not checked
in) because of their size."""
import os
import struct
import sys

MAGIC = 0x5052434D
VERSION = 1
REQUEST = 1
BATCH_EXIST_KEY = 35
PEER_BATCH_READ = 0x103
MIB = 1 << 20


def frame(method, body):
    hdr = struct.pack("<IHBBHHiQII", MAGIC, VERSION, REQUEST, 0, method, 0, 0, 1, len(body), 0)
    return hdr + body


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def peer_body(ctl):
    return struct.pack("<I", len(ctl)) + ctl


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    for d in ("master", "peer"):
        os.makedirs(os.path.join(out, d), exist_ok=True)
    files = {
        "master/batch_exist_key_empty_keys": frame(BATCH_EXIST_KEY, b"\x0a\x00" * (20 * MIB)),
        "peer/peer_batch_read_empty_slices": frame(PEER_BATCH_READ,
                                                   peer_body(b"\x0a\x00" * (31 * MIB))),
        "peer/peer_batch_read_big_unknown": frame(
            PEER_BATCH_READ, peer_body(bytes([15 << 3 | 2]) + varint(40 * MIB) + b"k" * (40 * MIB))),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
