"""Fixtures: a real mooncake_master and a mooncake_client daemon on loopback with free ports,
started from $MC_BIN_DIR (CTest sets it; default: build/bin next to the sources), stopped and
reaped after the tests."""

import os
import signal
import subprocess
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MC_BIN_DIR", os.path.join(HERE, "..", "..", "build", "bin"))


class Proc:
    def __init__(self, argv, timeout=15.0):
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  text=True)
        self.ready = self._wait_ready(timeout)

    def _wait_ready(self, timeout):
        import selectors
        sel = selectors.DefaultSelector()
        sel.register(self.p.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            line = self.p.stdout.readline()
            if not line:
                break
            if line.startswith("READY "):
                return dict(kv.split("=", 1) for kv in line.split()[1:])
        self.stop()
        raise RuntimeError("%s did not print READY" % self.p.args[0])

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()


@pytest.fixture(scope="module")
def master():
    m = Proc([os.path.join(BIN, "mooncake_master"), "--rpc_port=0", "--rpc_address=127.0.0.1",
              "--metrics_port=0", "--metrics_host=127.0.0.1", "--log_level=warn"])
    yield m.ready["rpc"]
    m.stop()


@pytest.fixture(scope="module")
def daemon(master):
    d = Proc([os.path.join(BIN, "mooncake_client"), "--master=" + master,
              "--host=127.0.0.1", "--segment_size=64MiB", "--log_level=warn"])
    yield d.ready["endpoint"]
    d.stop()


@pytest.fixture
def store(master, daemon):
    """An upstream-style store that contributes no DRAM: its puts land in the daemon."""
    from mooncake_c import MooncakeDistributedStore
    s = MooncakeDistributedStore()
    assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 << 20, "tcp", "", master) == 0
    yield s
    s.remove_all(True)
    s.close()


@pytest.fixture
def upstream_import():
    """Makes `import mooncake.store` find the compatibility alias (<build>/python-compat), as
    an engine that imports upstream's package would, and forgets it afterwards."""
    import sys
    compat = os.environ.get("MC_PYTHON_COMPAT",
                            os.path.join(HERE, "..", "..", "build", "python-compat"))
    sys.path.insert(0, compat)
    yield
    sys.path.remove(compat)
    for m in [m for m in sys.modules if m == "mooncake" or m.startswith("mooncake.")]:
        del sys.modules[m]
