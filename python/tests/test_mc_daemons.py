"""The Python tests' READY / metrics helper (mc_daemons.py) holds to the contract the C parser
(src/tools/ready_line.h) and the shell one (scripts/bench/lib.sh) hold to, with the same cases."""

import sys

import pytest

from mc_daemons import Proc, metric, parse_ready


def test_parse_ready_forms():
    assert parse_ready("READY rpc=0.0.0.0:50051 metrics=127.0.0.1:9003\n") == {
        "kind": "master", "rpc": "0.0.0.0:50051", "metrics": "127.0.0.1:9003"}
    assert parse_ready("READY rpc=[::1]:1 metrics=[::1]:65535")["metrics"] == "[::1]:65535"
    assert parse_ready("READY endpoint=127.0.0.1:40123") == {
        "kind": "daemon", "endpoint": "127.0.0.1:40123"}


@pytest.mark.parametrize("bad", [
    "", "READY", "READY ", "READYendpoint=127.0.0.1:1", "READY  endpoint=127.0.0.1:1",
    "READY endpoint=", "READY endpoint=127.0.0.1", "READY endpoint=127.0.0.1:",
    "READY endpoint=:80", "READY endpoint=127.0.0.1:0", "READY endpoint=127.0.0.1:65536",
    "READY endpoint=127.0.0.1:123456", "READY endpoint=127.0.0.1:8x",
    "READY endpoint=127.0.0.1:-1", "READY endpoint=127.0.0.1:80 extra",
    "READY rpc=127.0.0.1:80", "READY rpc=127.0.0.1:80 ", "READY rpc=127.0.0.1:80 metrics=",
    "READY rpc=127.0.0.1:80 metrics=127.0.0.1:0", "READY rpc=127.0.0.1 metrics=127.0.0.1:81",
    "READY rpc=127.0.0.1:80 metrics=127.0.0.1:81 extra",
    "READY metrics=127.0.0.1:81 rpc=127.0.0.1:80",
    "READY rpc=127.0.0.1:80  metrics=127.0.0.1:81"])
def test_parse_ready_refuses(bad):
    with pytest.raises(ValueError):
        parse_ready(bad)


def test_metric():
    text = ("# HELP a_total things\n# TYPE a_total counter\na_total 12\na_total_x 99\n"
            "b{le=\"1\"} 3\nb 4.5\nc 7")
    assert metric(text, "a_total") == 12
    assert metric(text, "a_total_x") == 99
    assert metric(text, "b") == 4.5  # the labelled series is not it
    assert metric(text, "c") == 7
    assert metric(text, "a") is None  # a prefix of a name is not the name
    assert metric(text, "HELP") is None


def sh(script):
    return [sys.executable, "-c", script]


def test_proc_ready_and_stop():
    p = Proc(sh("import sys,time; print('READY endpoint=127.0.0.1:4242', flush=True); "
                "time.sleep(30)"))
    assert p.ready["endpoint"] == "127.0.0.1:4242"
    assert p.stop() == -15  # ended by the SIGTERM


def test_proc_refusals():
    with pytest.raises(ValueError):  # something else first: refused, and the child is stopped
        Proc(sh("print('hello', flush=True); import time; time.sleep(30)"))
    with pytest.raises(RuntimeError, match="exited before READY"):
        Proc(sh("raise SystemExit(2)"))
    with pytest.raises(RuntimeError, match="no READY line within"):
        Proc(sh("import time; time.sleep(30)"), timeout=0.3)
