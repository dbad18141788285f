"""Upstream's launch lines start mooncake_master and mooncake_client unchanged: every upstream
flag either works (aliases, checked by their effect) or is accepted with exactly one log line
saying it has no effect here."""

import json
import os

import pytest

from mcproc import Proc, binpath, free_port, http, master_default_ports, run


def no_effect_lines(err, flag):
    return [l for l in err.splitlines() if "has no effect here" in l and "flag=--%s " % flag in l]


# upstream's docs: deployment guides and the SGLang HiCache guide
MASTER_LINES = [
    ["--enable_http_metadata_server=true"],  # SGLang HiCache quick start
    ["--enable_http_metadata_server=true", "--http_metadata_server_port=8080",
     "--eviction_high_watermark_ratio=0.95"],
    ["--enable_http_metadata_server=true", "--http_metadata_server_host=0.0.0.0",
     "--http_metadata_server_port=8080", "--enable_metric_reporting=true",
     "--default_kv_lease_ttl=5000"],
    ["--eviction_high_watermark_ratio=0.95", "-v=1", "--rpc_interface=lo",
     "--enable_metadata_cleanup_on_timeout=true", "--client_ttl=10", "--memory_allocator=offset"],
    ["--enable_offload=true", "--promotion_on_hit=true", "--promotion_admission_threshold=2",
     "--offload_on_evict=true", "--enable_snapshot=false", "--enable_kv_events=false",
     "--enable_multi_tenants=false", "--logtostderr"],
]


@pytest.mark.parametrize("line", MASTER_LINES)
def test_master_upstream_line_starts(line):
    m = master_default_ports(*line)
    try:
        err = m.err()
        for f in line:
            name = f.lstrip("-").split("=")[0]
            if name in ("enable_http_metadata_server", "http_metadata_server_port",
                        "http_metadata_server_host", "enable_metric_reporting", "v",
                        "rpc_interface", "enable_metadata_cleanup_on_timeout", "memory_allocator",
                        "enable_snapshot", "enable_kv_events", "enable_multi_tenants",
                        "logtostderr"):
                assert len(no_effect_lines(err, name)) == 1, (name, err)
        # the master serves: its HTTP port answers
        st, body, _ = http(m.ready["metrics"], "/role")
        assert (st, body) == (200, "leader")
    finally:
        assert m.stop() == 0


def test_master_port_is_rpc_port():
    port = free_port()
    m = master_default_ports("--port=%d" % port, "--max_threads=3")
    try:
        assert m.ready["rpc"].endswith(":%d" % port)
        assert "io_threads=3" in m.err()
    finally:
        assert m.stop() == 0


def test_master_port_and_rpc_port_conflict():
    rc, _, err = run([binpath("mooncake_master"), "--port=1", "--rpc_port=2"])
    assert rc == 2 and "--rpc_port" in err


def test_master_config_path_refused_with_remedy(tmp_path):
    cfg = tmp_path / "master.yaml"
    cfg.write_text("rpc_port: 50051\n")
    rc, _, err = run([binpath("mooncake_master"), "--config_path=%s" % cfg])
    assert rc == 2 and "--flagfile" in err


def test_master_help_lists_upstream_flags():
    rc, out, _ = run([binpath("mooncake_master"), "--help"])
    assert rc == 0
    for f in ("enable_http_metadata_server", "http_metadata_server_port", "metrics_port",
              "enable_metric_reporting", "enable_ha", "etcd_endpoints", "ha_backend_connstring",
              "ha_backend_type"):
        assert "-" + f in out


@pytest.fixture
def m():
    p = master_default_ports("--log_level=warn")
    yield p
    p.stop()


def segments_detail(metrics):
    st, body, _ = http(metrics, "/get_segments_detail")
    assert st == 200
    return json.loads(body)


def test_client_upstream_line(m):
    # upstream's standalone client line (deployment guide), with loopback addresses
    c = Proc([binpath("mooncake_client"), "--host=127.0.0.1",
              "--master_server_address=" + m.ready["rpc"], "--global_segment_size=64 MB",
              "--metadata_server=P2PHANDSHAKE", "--device_names=eth0",
              "--local_buffer_size=0", "--port=50052", "--protocol=tcp", "--logtostderr"])
    try:
        err = c.err()
        for name in ("metadata_server", "device_names", "local_buffer_size", "port",
                     "logtostderr"):
            assert len(no_effect_lines(err, name)) == 1, (name, err)
        d = segments_detail(m.ready["metrics"])
        assert d["total_segments"] == 1
        # --global_segment_size reached the mount, --master_server_address the master
        assert d["segments"][0]["size_bytes"] == 64 << 20
        assert d["segments"][0]["te_endpoint"] == c.ready["endpoint"]
    finally:
        assert c.stop() == 0


def test_client_alias_conflict(m):
    rc, _, err = run([binpath("mooncake_client"), "--master=127.0.0.1:1",
                      "--master_server_address=127.0.0.1:2", "--master_wait=0"])
    assert rc == 2 and "--master_server_address" in err
    rc, _, err = run([binpath("mooncake_client"), "--segment_size=1MiB",
                      "--global_segment_size=2MiB", "--master_wait=0"])
    assert rc == 2 and "--global_segment_size" in err


def test_client_device_names_is_rdma_devices():
    # both spellings with different values: refused, naming the alias
    rc, _, err = run([binpath("mooncake_client"), "--rdma_devices=mlx5_0",
                      "--device_names=mlx5_1", "--master_wait=0"])
    assert rc == 2 and "--device_names" in err and "--rdma_devices" in err, err
    # the same value in both: accepted (it fails later, at the master, not at the flags)
    rc, _, err = run([binpath("mooncake_client"), "--rdma_devices=mlx5_0",
                      "--device_names=mlx5_0", "--master=127.0.0.1:1", "--master_wait=0"])
    assert rc != 2 and "disagree" not in err, err


def test_client_device_names_taken_as_rdma_devices_with_rdma(m):
    # with --protocol=rdma --device_names is taken as --rdma_devices (logged as such, not as
    # a flag without effect); rdma cannot serve on loopback, so the daemon then exits
    rc, _, err = run([binpath("mooncake_client"), "--host=127.0.0.1", "--protocol=rdma",
                      "--master=" + m.ready["rpc"], "--device_names=mc_no_such_dev7",
                      "--segment_size=16MiB", "--master_wait=0"])
    assert "flag=--device_names devices=mc_no_such_dev7" in err, err
    assert not no_effect_lines(err, "device_names"), err
    assert rc != 0, err


def test_client_same_value_in_both_spellings(m):
    c = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
              "--master_server_address=" + m.ready["rpc"], "--segment_size=32MiB",
              "--global_segment_size=32MiB"])
    try:
        assert segments_detail(m.ready["metrics"])["segments"][0]["size_bytes"] == 32 << 20
    finally:
        assert c.stop() == 0


def test_client_other_tenant_refused():
    rc, _, err = run([binpath("mooncake_client"), "--tenant_id=t1", "--master_wait=0"])
    assert rc == 2 and "one tenant" in err
