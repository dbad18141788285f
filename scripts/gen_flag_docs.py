#!/usr/bin/env python3
"""Writes the flag reference of a daemon as Markdown, from its own `--helpxml`.

usage: gen_flag_docs.py PROGRAM OUT.md      (PROGRAM: path to mooncake_master / mooncake_client)
       gen_flag_docs.py --check PROGRAM OUT.md   exit 1 when OUT.md differs from what PROGRAM says

The build target `flag_docs` runs it for both daemons into docs/flags/; the CTest test
test_flag_docs runs it with --check, so the committed reference cannot drift from the flags.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET


def fmt_default(typ, v):
    if typ == "double":
        try:
            return repr(float(v))
        except ValueError:
            return v
    return v


def cell(s):
    return s.replace("|", "\\|").replace("\n", " ")


def render(program):
    xml = subprocess.run([program, "--helpxml"], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    root = ET.fromstring(xml)
    name = root.findtext("program") or os.path.basename(program)
    usage = root.findtext("usage") or ""
    own, builtin = [], []
    for f in root.findall("flag"):
        rec = {k: f.findtext(k) or "" for k in ("file", "name", "meaning", "default", "type")}
        (builtin if "gflags" in rec["file"] else own).append(rec)
    own.sort(key=lambda r: r["name"])
    out = ["# `%s` flags" % name, "",
           "<!-- Generated from `%s --helpxml` by scripts/gen_flag_docs.py (build target "
           "`flag_docs`); do not edit by hand. -->" % name, "",
           "Usage: `%s`" % usage.split(":")[0], "",
           "Sizes and durations take units (`256MiB`, `500ms`; README \"Flags\"). Flags can also "
           "come from `--flagfile=FILE`, one per line.", "",
           "| flag | type | default | meaning |", "|---|---|---|---|"]
    for r in own:
        d = fmt_default(r["type"], r["default"])
        out.append("| `--%s` | %s | %s | %s |" % (r["name"], r["type"],
                                                  "`%s`" % cell(d) if d else "(empty)",
                                                  cell(r["meaning"])))
    out += ["", "gflags' own flags also apply: " +
            ", ".join("`--%s`" % r["name"] for r in sorted(builtin, key=lambda r: r["name"])) +
            ".", ""]
    return "\n".join(out)


def main():
    args = sys.argv[1:]
    check = args[:1] == ["--check"]
    if check:
        args = args[1:]
    if len(args) != 2:
        sys.exit(__doc__)
    program, path = args
    text = render(program)
    if check:
        try:
            with open(path) as f:
                old = f.read()
        except OSError:
            old = None
        if old != text:
            print("%s is out of date with `%s --helpxml`: run "
                  "`cmake --build <build> --target flag_docs` and commit it" % (path, program),
                  file=sys.stderr)
            sys.exit(1)
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
