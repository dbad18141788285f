"""An upstream connector, unchanged, through the `mooncake.store` alias (<build>/python-compat)."""

import os
import sys

import pytest


@pytest.fixture
def alias_path():
    compat = os.environ.get("MC_PYTHON_COMPAT")
    if not compat:
        pytest.fail("MC_PYTHON_COMPAT is not set (CTest sets it to <build>/python-compat)")
    sys.path.insert(0, compat)
    yield
    sys.path.remove(compat)
    for m in [m for m in sys.modules if m == "mooncake" or m.startswith("mooncake.")]:
        del sys.modules[m]
    sys.modules.pop("upstream_connector", None)


def test_upstream_connector_runs_unchanged(alias_path, master, daemon):
    import upstream_connector
    c = upstream_connector.KVConnector(master)
    try:
        keys = ["layer0/block%d" % i for i in range(4)]
        blocks = [bytes([i + 1]) * (1000 + i * 5000) for i in range(4)]
        assert c.lookup(keys) == [False] * 4
        assert c.save(keys, blocks)
        assert c.lookup(keys) == [True] * 4
        assert c.load(keys) == blocks
        assert c.load(["layer0/absent"]) is None
        assert c.store.get("layer0/block0") == blocks[0]
        assert c.store.get("layer0/absent") == b""
        c.store.remove_all(True)
    finally:
        c.close()
