"""Fixtures: a real mooncake_master and a mooncake_client daemon on loopback with free ports,
started from $MC_BIN_DIR (CTest sets it; default: build/bin next to the sources), stopped and
reaped after the tests."""

import os
import types

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


# The launch lines of upstream's and SGLang's deployment docs, verbatim, for the connector
# replays; only what a test on a shared machine needs is added after them (loopback addresses,
# ephemeral ports, where the docs use 0.0.0.0 and fixed ports).
UPSTREAM_MASTER_LINE = ["mooncake_master", "--enable_http_metadata_server=true",
                        "--http_metadata_server_host=0.0.0.0",
                        "--http_metadata_server_port=8080",
                        "--eviction_high_watermark_ratio=0.95"]
UPSTREAM_CLIENT_LINE = ["mooncake_client", "--global_segment_size=64 MB",
                        "--master_server_address={master}",
                        "--metadata_server=http://127.0.0.1:8080/metadata",
                        "--protocol=tcp", "--device_names=", "--local_buffer_size=0"]


def start_upstream_master():
    """mooncake_master from UPSTREAM_MASTER_LINE (ready: rpc, metrics = its HTTP port)."""
    return Proc([os.path.join(BIN, UPSTREAM_MASTER_LINE[0])] + UPSTREAM_MASTER_LINE[1:]
                + ["--rpc_address=127.0.0.1", "--rpc_port=0", "--metrics_host=127.0.0.1",
                   "--metrics_port=0"])


def start_upstream_client(master_addr):
    """mooncake_client from UPSTREAM_CLIENT_LINE against master_addr (ready: endpoint)."""
    return Proc([os.path.join(BIN, UPSTREAM_CLIENT_LINE[0])]
                + [a.format(master=master_addr) for a in UPSTREAM_CLIENT_LINE[1:]]
                + ["--host=127.0.0.1"])


@pytest.fixture(scope="module")
def upstream_cluster():
    """A master and a client daemon started by UPSTREAM_*_LINE: .master (RPC "host:port"),
    .http (the master's HTTP port, where SGLang's check_server polls) and .endpoint."""
    m = start_upstream_master()
    try:
        d = start_upstream_client(m.ready["rpc"])
    except Exception:
        m.stop()
        raise
    yield types.SimpleNamespace(master=m.ready["rpc"], http=m.ready["metrics"],
                                endpoint=d.ready["endpoint"])
    d.stop()
    m.stop()


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
