"""The Python side of the daemons' outside contract, shared by the Python tests and the Python
bench drivers: the READY line mooncake_master and mooncake_client print once they serve (the same
contract as src/tools/ready_line.h and scripts/bench/lib.sh), a child process started and waited
for READY with a deadline, and /metrics samples.

    READY rpc=HOST:PORT metrics=HOST:PORT      mooncake_master
    READY endpoint=HOST:PORT                   mooncake_client

Anything else is refused (ValueError), so a changed line fails loudly instead of half-parsing.
"""

import re
import selectors
import signal
import subprocess
import time
import urllib.request

_ADDR = r"([^ ]+):([0-9]{1,5})"
_MASTER = re.compile(r"READY rpc=%s metrics=%s" % (_ADDR, _ADDR))
_DAEMON = re.compile(r"READY endpoint=%s" % _ADDR)


def _port(text):
    p = int(text)
    if not 1 <= p <= 65535:
        raise ValueError("port out of range: %s" % text)
    return p


def parse_ready(line):
    """{"kind": "master", "rpc": "H:P", "metrics": "H:P"} or {"kind": "daemon", "endpoint":
    "H:P"} from a READY line (a trailing newline is allowed); ValueError otherwise."""
    line = line.rstrip("\n")
    m = _DAEMON.fullmatch(line)
    if m:
        _port(m.group(2))
        return {"kind": "daemon", "endpoint": "%s:%s" % m.group(1, 2)}
    m = _MASTER.fullmatch(line)
    if m:
        _port(m.group(2))
        _port(m.group(4))
        return {"kind": "master", "rpc": "%s:%s" % m.group(1, 2),
                "metrics": "%s:%s" % m.group(3, 4)}
    raise ValueError("not a READY line: %r" % line)


class Proc:
    """A daemon child: stdout a pipe its READY line is read from within timeout seconds (parsed
    into .ready), stderr to stderr_path or discarded. stop() sends SIGTERM, then SIGKILL after 5 s,
    and reaps it; a child that fails to get ready is stopped before the error is raised."""

    def __init__(self, argv, timeout=15.0, stderr_path=None):
        self._err = open(stderr_path, "ab") if stderr_path else None
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                  stderr=self._err or subprocess.DEVNULL, text=True)
        try:
            self.ready = parse_ready(self._first_line(timeout))
        except Exception:
            self.stop()
            raise

    def _first_line(self, timeout):
        with selectors.DefaultSelector() as sel:
            sel.register(self.p.stdout, selectors.EVENT_READ)
            if not sel.select(timeout):
                raise RuntimeError("%s printed no READY line within %.0f s"
                                   % (self.p.args[0], timeout))
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("%s exited before READY (status %s)"
                               % (self.p.args[0], self.p.wait()))
        return line

    def stop(self):
        """Returns the exit status (negative: the signal that ended it)."""
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        if self._err:
            self._err.close()
            self._err = None
        return self.p.returncode


def scrape(addr, timeout=10.0):
    """The Prometheus text of http://ADDR/metrics, within timeout seconds."""
    with urllib.request.urlopen("http://%s/metrics" % addr, timeout=timeout) as r:
        return r.read().decode()


def metric(text, name):
    """The value of the first unlabelled sample NAME of Prometheus text; None when absent."""
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) == 2 and parts[0] == name:
            return float(parts[1])
    return None


def wait_until(pred, timeout, step=0.02):
    """True as soon as pred() is; False when timeout seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step)
    return bool(pred())
