"""Start the real daemons on loopback with free ports and stop them; shared by the compat tests.

Every process is started through Proc, which waits for its READY line (or its exit) and is
stopped (SIGTERM, then SIGKILL) by the fixture or the test that made it."""

import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MC_BIN_DIR", os.path.join(HERE, "..", "..", "build", "bin"))


def binpath(name):
    return os.path.join(BIN, name)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A daemon; .ready is the READY line's key=value dict, .err the stderr text so far."""

    def __init__(self, argv, timeout=20.0):
        self.errf = tempfile.NamedTemporaryFile(prefix="mc_compat_", suffix=".err", delete=False)
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.errf, text=True)
        self.ready = self._wait_ready(timeout)

    def _wait_ready(self, timeout):
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                break
            line = self.p.stdout.readline()
            if not line:
                break
            if line.startswith("READY "):
                return dict(kv.split("=", 1) for kv in line.split()[1:])
        err = self.err()
        self.stop()
        raise RuntimeError("%s did not print READY; stderr:\n%s" % (self.p.args[0], err))

    def err(self):
        with open(self.errf.name, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        if self.p.stdout:
            self.p.stdout.close()
        self.errf.close()
        try:
            os.unlink(self.errf.name)
        except FileNotFoundError:
            pass
        return self.p.returncode


def run(argv, timeout=20):
    """A short-lived run: (exit status, stdout, stderr)."""
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def master(*flags):
    base = [binpath("mooncake_master"), "--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1",
            "--log_level=info"]
    if not any(f.startswith(("--max_threads", "--rpc_thread_num")) for f in flags):
        base.append("--rpc_thread_num=2")
    return Proc(base + list(flags))


def master_default_ports(*flags):
    flags = list(flags)
    if not any(f.startswith(("--rpc_port", "--port")) for f in flags):
        flags.append("--rpc_port=0")
    if not any(f.startswith("--metrics_port") for f in flags):
        flags.append("--metrics_port=0")
    return master(*flags)


def http(addr, path, headers=None):
    """GET http://addr/path: (status, body text, headers)."""
    req = urllib.request.Request("http://%s%s" % (addr, path), headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode("utf-8", "replace"), r.headers
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace"), e.headers


def cli_put(master_addr, key, value):
    r = subprocess.run([binpath("mooncake_cli"), "--master=" + master_addr, "put", key, "-"],
                       input=value, capture_output=True, timeout=20)
    assert r.returncode == 0, r.stderr
