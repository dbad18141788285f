#!/usr/bin/env python3
"""Checks the floors of the master core (docs/design.md, "Floors of the master core").

Every file of src/master sits on one floor of the table below. A file may include the headers
of its own floor and of the floors below it, never a header of a floor above: the object layer
announces object events (object_events.h) instead of calling a tier policy, a policy calls down
only, and the RPC adapters sit above everything.

  check_floors.py [--src DIR] [--lib libmc_master_core.a]

--src: the repository root (default: this script's parent directory).
--lib: also check the calls: every symbol a member of the core library references and another
       member defines must be defined on the same floor or below (nm). This catches a call up
       through master.h, which declares entry points of every floor.

Exit status: 0 clean, 1 a violation (each printed on one line), 2 usage or environment error.
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

# The floor table, bottom up: (floor, name, file patterns). The first matching pattern wins.
FLOORS = [
    (0, "state and contract", [
        "master_state.h",      # struct mc_master: config, clock, epoch, the modules' state
        "master.h",            # the library's contract: config and every entry point
        "master_types.h", "master_counters.h",
        "mailbox.h",           # the task types master.h names (a leaf: names nothing above)
        "lock_order.[ch]",
    ]),
    (1, "structures", [
        "object_record.h", "shard.[ch]", "objslab.[ch]", "segments.[ch]", "offset_alloc.[ch]",
        "sketch.[ch]", "mailbox.c", "task_index.[ch]", "freelist.[ch]", "discard.[ch]",
        "delwait.[ch]", "fence.[ch]", "tombstone.[ch]",
    ]),
    (2, "object operations", [
        "objects.[ch]", "objects_batch.c", "objects_rereg.c", "object_events.[ch]",
        "upsert.[ch]", "remove_regex.[ch]",  # Upsert and RemoveByRegex: object operations
        "remove_all.c",                      # RemoveAll's walk
    ]),
    (3, "clients, eviction census", [
        "clients.[ch]", "eviction.h", "eviction_internal.h", "eviction_census.c",
        "eviction_sample.[ch]", "eviction_unlink.[ch]", "eviction_moves.[ch]",
        "eviction_release.[ch]",
    ]),
    (4, "eviction cycle", ["eviction.c", "eviction_state.h", "eviction_life.c"]),
    (5, "offload", ["offload*.[ch]"]),
    (6, "promotion", ["promotion*.[ch]"]),
    (7, "lifecycle and ticks", [
        "master.c", "master_ticks.c",
        "master_internal.h",   # the old name of master_state.h (kept for older code)
        "ha*.[ch]",            # HA: election, fencing, standby
    ]),
    (8, "RPC adapters", ["service*.[ch]", "http*.[ch]", "admin*.[ch]"]),
    (9, "daemon", ["main*.[ch]"]),
]
# A file the table does not name (new work) sits just above the core, below the RPC adapters:
# it may use the whole core, and nothing of the core may include it.
DEFAULT_FLOOR = 7

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"master/([^"]+)"')


def floor_of(name):
    for floor, _, pats in FLOORS:
        for p in pats:
            if fnmatch.fnmatchcase(name, p):
                return floor, True
    return DEFAULT_FLOOR, False


def floor_name(floor):
    for f, name, _ in FLOORS:
        if f == floor:
            return name
    return "?"


def check_includes(master_dir):
    bad = []
    for name in sorted(os.listdir(master_dir)):
        if not name.endswith((".c", ".h")):
            continue
        f, known = floor_of(name)
        if not known:
            print(f"note: {name} is not in the floor table: floor {f} ({floor_name(f)})")
        with open(os.path.join(master_dir, name), encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                g, _ = floor_of(inc)
                if g > f:
                    bad.append(f"src/master/{name}:{lineno}: includes master/{inc} "
                               f"(floor {g}, {floor_name(g)}) from floor {f} ({floor_name(f)})")
    return bad


def nm_members(lib):
    """{member source name: (defined symbols, undefined symbols)} of a static library."""
    try:
        out = subprocess.run(["nm", "-A", lib], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"check_floors: cannot run nm on {lib}: {e}", file=sys.stderr)
        sys.exit(2)
    members = {}
    for line in out.splitlines():
        # "lib.a:objects.c.o:0000000000000000 T mc_master_put_start" or "lib.a:x.c.o:   U sym"
        parts = line.split(":")
        if len(parts) < 3:
            continue
        member = parts[-2]
        fields = parts[-1].split()
        if len(fields) < 2:
            continue
        kind, sym = fields[-2], fields[-1]
        src = member[:-2] if member.endswith(".o") else member  # objects.c.o -> objects.c
        d, u = members.setdefault(src, (set(), set()))
        if kind in ("U", "w", "v"):
            u.add(sym)
        elif kind.isupper():
            d.add(sym)
    return members


def check_calls(lib):
    members = nm_members(lib)
    owner = {}
    for src, (defs, _) in members.items():
        for s in defs:
            owner[s] = src
    bad = []
    for src, (_, undefs) in sorted(members.items()):
        f, _ = floor_of(src)
        for s in sorted(undefs):
            o = owner.get(s)
            if o is None or o == src:
                continue
            g, _ = floor_of(o)
            if g > f:
                bad.append(f"src/master/{src}: calls {s} of {o} (floor {g}, {floor_name(g)}) "
                           f"from floor {f} ({floor_name(f)})")
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    ap.add_argument("--lib", help="libmc_master_core.a: also check the calls")
    a = ap.parse_args()
    master_dir = os.path.join(a.src, "src", "master")
    if not os.path.isdir(master_dir):
        print(f"check_floors: no src/master under {a.src}", file=sys.stderr)
        return 2
    bad = check_includes(master_dir)
    if a.lib:
        bad += check_calls(a.lib)
    for b in bad:
        print(b)
    if bad:
        print(f"check_floors: {len(bad)} violation(s) of the floors (docs/design.md)")
        return 1
    print("check_floors: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
