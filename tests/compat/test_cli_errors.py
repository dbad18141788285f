"""mooncake_cli's errors say the limit or the remedy; `get` keeps binary off a terminal unless
asked with `-o -`; `metrics` finds the master's HTTP port by asking the master."""

import os
import pty
import re
import select
import subprocess

import pytest

from mcproc import Proc, binpath, master_default_ports

CLI = binpath("mooncake_cli")


@pytest.fixture(scope="module")
def cluster():
    m = master_default_ports("--log_level=warn")
    d = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
              "--segment_size=16MiB", "--log_level=warn"])
    yield m
    d.stop()
    m.stop()


def cli(m, *args, data=None, stdout=subprocess.PIPE):
    r = subprocess.run([CLI, "--master=" + m.ready["rpc"]] + list(args), input=data,
                       stdout=stdout, stderr=subprocess.PIPE, timeout=30)
    return r.returncode, r.stdout, r.stderr.decode()


def on_terminal(m, *args):
    """Runs the CLI with stdout on a pseudo-terminal: (exit status, bytes shown, stderr)."""
    master_fd, slave_fd = pty.openpty()
    try:
        p = subprocess.Popen([CLI, "--master=" + m.ready["rpc"]] + list(args), stdout=slave_fd,
                             stderr=subprocess.PIPE)
        os.close(slave_fd)
        slave_fd = -1
        err = p.stderr.read().decode()
        rc = p.wait(30)
        shown = b""
        while select.select([master_fd], [], [], 0.2)[0]:
            try:
                chunk = os.read(master_fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        return rc, shown, err
    finally:
        if slave_fd >= 0:
            os.close(slave_fd)
        os.close(master_fd)


BINARY = bytes(range(256)) * 4


def test_get_binary_not_to_a_terminal(cluster):
    m = cluster
    assert cli(m, "put", "bin-1", "-", data=BINARY)[0] == 0
    rc, shown, err = on_terminal(m, "get", "bin-1")
    assert rc == 2 and "binary value of 1024 bytes" in err and "-o -" in err
    assert b"\x00" not in shown and len(shown) < 16
    # asked for: written to the terminal
    rc, shown, err = on_terminal(m, "get", "bin-1", "-o", "-")
    assert rc == 0 and len(shown) >= 1024
    # a pipe gets the exact bytes, as before
    rc, out, err = cli(m, "get", "bin-1")
    assert rc == 0 and out == BINARY
    # text still goes to a terminal
    assert cli(m, "put", "txt-1", "--value", "hello world")[0] == 0
    rc, shown, err = on_terminal(m, "get", "txt-1")
    assert rc == 0 and b"hello world" in shown


def test_key_too_long_says_the_limit(cluster):
    m = cluster
    for cmd in (["put", "k" * 4097, "--value", "x"], ["get", "k" * 5000], ["rm", "k" * 4097],
                ["exist", "k" * 4097]):
        rc, _, err = cli(m, *cmd)
        assert rc == 3 and "at most 4096 bytes" in err and "INVALID_KEY" in err, cmd
    # 4096 is fine
    rc, _, err = cli(m, "put", "k" * 4096, "--value", "x")
    assert rc == 0, err


def test_value_larger_than_any_segment(cluster):
    m = cluster
    rc, _, err = cli(m, "put", "huge", "-", data=b"\x01" * (20 << 20))
    assert rc == 3
    assert "largest segment is %d bytes" % (16 << 20) in err and "--segment_size" in err
    assert err.rstrip().endswith("NO_AVAILABLE_HANDLE")


def test_rm_of_a_leased_key_says_how_long(cluster):
    m = cluster
    assert cli(m, "put", "leased-1", "--value", "v")[0] == 0
    assert cli(m, "get", "leased-1")[0] == 0  # a read lease of --default_kv_lease_ttl (10 s)
    rc, _, err = cli(m, "rm", "leased-1")
    assert rc == 3 and "OBJECT_HAS_LEASE" in err
    mm = re.search(r"held by a reader for (\d+) ms more; --force to remove anyway", err)
    assert mm and 0 < int(mm.group(1)) <= 10000, err
    assert cli(m, "rm", "leased-1", "--force")[0] == 0


def test_metrics_asks_the_master_for_its_port(cluster):
    m = cluster  # --metrics_port=0: a random port, not 9003
    assert not m.ready["metrics"].endswith(":9003")
    rc, out, err = cli(m, "metrics")
    assert rc == 0, err
    assert re.search(rb"^master_segment_count 1$", out, re.M)
