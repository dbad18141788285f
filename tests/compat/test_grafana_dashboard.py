"""packaging/grafana/mooncake-c-dashboard.json names only metrics that exist: every metric in
every panel query is a family on a running master's or client daemon's /metrics (a histogram's
_bucket/_sum/_count against its histogram family)."""

import json
import os
import re

from mcproc import HERE, Proc, binpath, free_port, http, master_default_ports

DASHBOARD = os.path.join(HERE, "..", "..", "packaging", "grafana", "mooncake-c-dashboard.json")
PROMQL_WORDS = {"rate", "irate", "increase", "sum", "avg", "max", "min", "by", "without",
                "histogram_quantile", "clamp_min", "clamp_max", "le", "op", "tier", "instance",
                "code", "job"}


def families(text):
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))


def metric_names(expr):
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\{[^}]*\}", "", expr)   # label matchers
    names = set()
    for tok in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        if tok not in PROMQL_WORDS:
            names.add(tok)
    return names


def test_every_dashboard_metric_exists():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 10
    m = master_default_ports("--log_level=warn")
    port = free_port()
    try:
        d = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
                  "--segment_size=32MiB", "--enable_client_http_server",
                  "--client_http_port=%d" % port, "--log_level=warn"])
        try:
            fams = families(http(m.ready["metrics"], "/metrics")[1])
            fams.update(families(http("127.0.0.1:%d" % port, "/metrics")[1]))
        finally:
            d.stop()
    finally:
        m.stop()
    missing = []
    for e in exprs:
        for name in metric_names(e):
            if name in fams:
                continue
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if fams.get(base) == "histogram":
                continue
            missing.append((name, e))
    assert not missing, missing
