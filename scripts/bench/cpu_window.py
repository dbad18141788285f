#!/usr/bin/env python3
"""cpu_window.py - run one load generator and measure CPU over its steady window.

    cpu_window.py --out FILE --err FILE --window SECONDS [--marker REGEX | --delay SECONDS]
                  [--pin CPU] [--watch PID] [--cores LIST] [--timeout SECONDS] -- CMD [ARGS...]

Starts CMD (stdout to --out, stderr to --err, in a session of its own so a timeout stops it
and whatever it started), waits until its steady state begins (the first stderr line matching
--marker, or --delay seconds after the start), and then samples for --window seconds (less if
CMD exits first):
  - CMD's CPU time (all its threads, /proc/PID/stat utime+stime) over the window, as a fraction
    of one core: 1.0 means the load generator used its whole core;
  - the same for --watch PID (the server under test);
  - how busy each core in --cores was over the window (/proc/stat, everything running there,
    other users' processes included);
  - the CPU affinity of every thread of CMD and of --watch PID, read in the window.
--pin CPU moves every thread of CMD onto CPU when the window starts (for a program that resets
its threads' affinity at start, which taskset alone cannot hold).
Waits for CMD to exit and prints one JSON line on stdout; exits with CMD's status (124 when it
ran past --timeout and was killed).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    """utime + stime of a whole process in seconds, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None
    fields = s[s.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def core_times(cores):
    """{cpu: (busy, total)} jiffies for the listed cores."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            m = re.match(r"cpu(\d+) (.*)", line)
            if not m or int(m.group(1)) not in cores:
                continue
            v = [int(x) for x in m.group(2).split()]
            idle = v[3] + (v[4] if len(v) > 4 else 0)
            total = sum(v[:8])
            out[int(m.group(1))] = (total - idle, total)
    return out


def affinity(pid):
    """Sorted distinct Cpus_allowed_list values of a process's threads ("" when gone)."""
    seen = set()
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    for line in f:
                        if line.startswith("Cpus_allowed_list:"):
                            seen.add(line.split()[1])
            except OSError:
                pass
    except OSError:
        return ""
    return " ".join(sorted(seen))


def pin_all(pid, cpu):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for tid in tids:
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except OSError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--err", required=True)
    ap.add_argument("--window", type=float, required=True)
    ap.add_argument("--marker")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--pin", type=int)
    ap.add_argument("--watch", type=int)
    ap.add_argument("--cores", default="")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no command")
    cores = {int(c) for c in a.cores.split(",") if c.strip()}
    with open(a.out, "w") as fo, open(a.err, "w") as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, start_new_session=True)

    def kill_group(*_):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass

    signal.signal(signal.SIGTERM, lambda *_: (kill_group(), sys.exit(143)))
    start = time.monotonic()
    deadline = start + a.timeout
    marker = re.compile(a.marker) if a.marker else None
    res = {"window_s": 0.0}
    # 1. wait for the steady state
    began = False
    while p.poll() is None and time.monotonic() < deadline:
        if marker:
            with open(a.err, errors="replace") as f:
                if marker.search(f.read()):
                    began = True
                    break
        elif time.monotonic() - start >= a.delay:
            began = True
            break
        time.sleep(0.02)
    # 2. the window
    if began and p.poll() is None:
        if a.pin is not None:
            pin_all(p.pid, a.pin)
        c0, w0, k0, t0 = proc_cpu(p.pid), a.watch and proc_cpu(a.watch), core_times(cores), \
            time.monotonic()
        res["load_affinity"] = affinity(p.pid)
        if a.watch:
            res["server_affinity"] = affinity(a.watch)
        c1 = w1 = k1 = t1 = None
        while p.poll() is None and time.monotonic() - t0 < a.window:
            c, w, k = proc_cpu(p.pid), a.watch and proc_cpu(a.watch), core_times(cores)
            if c is None:
                break
            c1, w1, k1, t1 = c, w, k, time.monotonic()
            time.sleep(min(0.1, max(0.0, a.window - (time.monotonic() - t0))))
        if c0 is not None and c1 is not None and t1 > t0:
            dt = t1 - t0
            res["window_s"] = round(dt, 3)
            res["load_cpu"] = round((c1 - c0) / dt, 3)
            if a.watch and w0 is not None and w1 is not None:
                res["server_cpu"] = round((w1 - w0) / dt, 3)
            res["core_busy"] = {
                str(c): round((k1[c][0] - k0[c][0]) / max(1, k1[c][1] - k0[c][1]), 3)
                for c in sorted(k0) if c in k1}
    # 3. the end
    try:
        rc = p.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        kill_group()
        p.wait()
        rc = 124
    res["rc"] = rc
    print(json.dumps(res, sort_keys=True))
    return rc


if __name__ == "__main__":
    sys.exit(main())
