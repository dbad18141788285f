"""Fixtures: a real mooncake_master and a mooncake_client daemon on loopback with free ports,
started from $MC_BIN_DIR (CTest sets it; default: build/bin next to the sources), stopped and
reaped after the tests."""

import os

import pytest

from mc_daemons import Proc  # noqa: F401 (test_client.py imports it from here)

HERE = os.path.dirname(os.path.abspath(__file__))
BIN = os.environ.get("MC_BIN_DIR", os.path.join(HERE, "..", "..", "build", "bin"))


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
