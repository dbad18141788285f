"""`pip install .` into a fresh venv, offline: the venv sees Debian's setuptools and wheel
(--system-site-packages), pip builds with --no-build-isolation --no-index, reusing this CMake
build tree for the library (MOONCAKE_C_BUILD_DIR). Then the venv's Python imports mooncake_c,
which must load the library bundled in the venv, and does a put/get against a running cluster.
The upstream alias (mooncake.store) is installed only when asked."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from mcproc import HERE, Proc, binpath, master_default_ports

SRC = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(os.path.join(os.environ.get("MC_BIN_DIR", os.path.join(SRC, "build",
                                                                                "bin")), ".."))
SYSPY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def copy_sources(dst):
    for f in ("setup.py", "setup.cfg", "pyproject.toml", "CMakeLists.txt"):
        shutil.copy2(os.path.join(SRC, f), dst)
    for d in ("python/mooncake_c", "python/compat"):
        shutil.copytree(os.path.join(SRC, d), os.path.join(dst, d),
                        ignore=shutil.ignore_patterns("__pycache__", "_libpath.py"))


def make_venv(tmp, alias):
    r = subprocess.run([SYSPY, "-c", "import setuptools, wheel"], capture_output=True)
    if r.returncode != 0:
        pytest.skip("Debian's python3-setuptools / python3-wheel are not installed")
    venv = os.path.join(tmp, "venv")
    subprocess.run([SYSPY, "-m", "venv", "--system-site-packages", venv], check=True,
                   timeout=120)
    src = os.path.join(tmp, "src")
    os.makedirs(src)
    copy_sources(src)
    env = dict(os.environ, MOONCAKE_C_BUILD_DIR=BUILD, PIP_NO_INDEX="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    if alias:
        env["MOONCAKE_C_UPSTREAM_ALIAS"] = "1"
    py = os.path.join(venv, "bin", "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--no-deps", src], env=env, capture_output=True, text=True, timeout=600,
                       cwd=tmp)
    assert r.returncode == 0, r.stdout + r.stderr
    return py, venv


SCRIPT = textwrap.dedent("""
    import os, sys
    import mooncake_c
    from mooncake_c import _native
    lib = os.path.realpath(_native.lib._name)
    assert lib.startswith(os.path.realpath(sys.prefix)), (lib, sys.prefix)
    with mooncake_c.Client(sys.argv[1], segment_size=0) as c:
        v = bytes(range(256)) * 64
        c.put("pip-venv-key", v)
        assert c.get("pip-venv-key") == v
    try:
        import mooncake.store
        print("ALIAS", mooncake.store.MooncakeDistributedStore.__name__)
    except ImportError:
        print("NOALIAS")
    print("OK")
""")


@pytest.fixture(scope="module")
def cluster():
    m = master_default_ports("--log_level=warn")
    d = Proc([binpath("mooncake_client"), "--host=127.0.0.1", "--master=" + m.ready["rpc"],
              "--segment_size=16MiB", "--log_level=warn"])
    yield m
    d.stop()
    m.stop()


def run_in_venv(py, master, tmp):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("MOONCAKE_CLIENT_LIB", None)
    r = subprocess.run([py, "-c", SCRIPT, master], env=env, capture_output=True, text=True,
                       timeout=60, cwd=tmp)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
    return r.stdout


def test_venv_install_put_get(cluster, tmp_path):
    py, _ = make_venv(str(tmp_path), alias=False)
    out = run_in_venv(py, cluster.ready["rpc"], str(tmp_path))
    assert "NOALIAS" in out


def test_venv_install_with_upstream_alias(cluster, tmp_path):
    py, _ = make_venv(str(tmp_path), alias=True)
    out = run_in_venv(py, cluster.ready["rpc"], str(tmp_path))
    assert "ALIAS MooncakeDistributedStore" in out
