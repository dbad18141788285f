#!/usr/bin/env python3
"""A Python Get loop (the mooncake_c binding) beside the C one (`mooncake_bench transfer`), the
same duration on both sides, in one run, A/B alternating.

Both readers are clients without DRAM of their own, reading one object that lives on a
mooncake_client daemon's segment over loopback TCP (the bench's "between" case). Python runs
`MooncakeDistributedStore.get` (returns a new bytes object: one copy more than C) and
`get_into` (zero-copy into a registered buffer, what C does) for --seconds each; the C side runs
`mooncake_bench transfer --mode between --master ...` with --runs calibrated so its Get series
also lasts --seconds. Reported: ops/s of each and ratio = Python / C (median over rounds).
It also times one ctypes call and one CFFI call (if CFFI is importable) of the same C function
returning at once, the per-call cost of each FFI.

usage: scripts/bench/python_vs_c_get.py [--bin build/bin] [--seconds 3] [--rounds 3]
                                        [--sizes 4096,1048576]
PYTHONPATH must reach the package (build/python), or it is found next to --bin.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
import mc_daemons  # noqa: E402 (the READY parser and process handling of the Python tests)


def start(argv):
    """Starts a daemon and waits for its READY line (python/tests/mc_daemons.py)."""
    try:
        d = mc_daemons.Proc(argv)
    except (RuntimeError, ValueError) as e:
        raise SystemExit("%s did not start: %s" % (argv[0], e))
    return d, d.ready


def stop(d):
    d.stop()


def py_loop(fn, seconds):
    n = 0
    t0 = time.perf_counter()
    end = t0 + seconds
    while True:
        for _ in range(64):
            fn()
        n += 64
        t = time.perf_counter()
        if t >= end:
            return n / (t - t0)


def c_get(bench, master, size, runs):
    out = subprocess.run([bench, "transfer", "--master", master, "--mode", "between",
                          "--sizes", str(size), "--runs", str(runs)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit("mooncake_bench failed: " + out.stderr[-2000:])
    for line in out.stdout.splitlines():
        j = json.loads(line)
        if j.get("op") == "get":
            return j["ops_per_s"]
    raise SystemExit("no get line from mooncake_bench")


def ffi_costs(libpath, n=300000):
    lib = ctypes.CDLL(libpath)
    f = lib.mc_get
    f.restype = ctypes.c_int64
    f.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(64)
    key = b"key"
    t = time.perf_counter()
    for _ in range(n):
        f(None, key, buf, 64)
    out = {"ctypes_ns": (time.perf_counter() - t) / n * 1e9}
    try:
        import cffi
    except ImportError:
        return out
    ffi = cffi.FFI()
    ffi.cdef("int64_t mc_get(void *, const char *, void *, size_t);")
    C = ffi.dlopen(libpath)
    g, cb, null = C.mc_get, ffi.new("char[]", 64), ffi.NULL
    t = time.perf_counter()
    for _ in range(n):
        g(null, key, cb, 64)
    out["cffi_ns"] = (time.perf_counter() - t) / n * 1e9
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"),
                                                  "bin"))
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="4096,1048576")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.bin, "..", "python"))
    from mooncake_c import MooncakeDistributedStore

    master_p, m = start([os.path.join(a.bin, "mooncake_master"), "--rpc_port=0",
                         "--rpc_address=127.0.0.1", "--metrics_port=0",
                         "--metrics_host=127.0.0.1", "--log_level=warn"])
    master = m["rpc"]
    daemon_p = None
    store = MooncakeDistributedStore()
    rows = []
    try:
        daemon_p, _ = start([os.path.join(a.bin, "mooncake_client"), "--master=" + master,
                             "--segment_size=1GiB", "--log_level=warn"])
        if store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 0, "tcp", "", master) != 0:
            raise SystemExit("setup failed")
        bench = os.path.join(a.bin, "mooncake_bench")
        for size in [int(s) for s in a.sizes.split(",")]:
            key = "pybench-%d" % size
            data = bytes(range(256)) * (size // 256) + bytes(size % 256)
            assert store.put(key, data) == 0 and store.get(key) == data
            dst = ctypes.create_string_buffer(size)
            addr = ctypes.addressof(dst)
            store.register_buffer(addr, size)
            calib = c_get(bench, master, size, 200)
            runs = max(200, int(calib * a.seconds))
            res = {"get": [], "get_into": [], "c": []}
            for _ in range(a.rounds):
                res["c"].append(c_get(bench, master, size, runs))
                res["get"].append(py_loop(lambda: store.get(key), a.seconds))
                res["get_into"].append(py_loop(lambda: store.get_into(key, addr, size),
                                               a.seconds))
            c = statistics.median(res["c"])
            for op in ("get", "get_into"):
                py = statistics.median(res[op])
                rows.append((op, size, py, c, py / c))
                print(json.dumps({"bench": "python_get", "case": "%s/%d" % (op, size),
                                  "runs": a.rounds, "seconds": a.seconds, "ops_per_s": py,
                                  "bytes_per_s": py * size, "ref": c, "ratio": py / c}))
        ffi = ffi_costs(os.path.join(a.bin, "..", "lib", "libmooncake_client.so"))
        print(json.dumps(dict({"bench": "python_ffi_call"}, **ffi)))
    finally:
        store.close()
        if daemon_p:
            stop(daemon_p)
        stop(master_p)
    print("\n| Python call | size | Python ops/s | C ops/s | Python / C |", file=sys.stderr)
    print("|---|---|---|---|---|", file=sys.stderr)
    for op, size, py, c, r in rows:
        print("| %s | %d | %.0f | %.0f | %.2fx |" % (op, size, py, c, r), file=sys.stderr)
    print("\nper-call FFI cost (mc_get returning at once): " +
          ", ".join("%s %.0f ns" % kv for kv in ffi.items()), file=sys.stderr)


if __name__ == "__main__":
    main()
