"""pip packaging of the Python binding mooncake_c with its C library.

    pip install .                        # builds libmooncake_client with CMake, then installs
    MOONCAKE_C_BUILD_DIR=build pip install --no-build-isolation .   # reuse a CMake build tree

The wheel carries libmooncake_client.so.0 in mooncake_c/lib/ and a _libpath.py pointing there,
so the package works in any environment (a venv included) without the system library.

Offline (no package index): Debian's python3-setuptools and python3-wheel provide the build
backend; use a venv made with --system-site-packages, or pass --no-build-isolation.

Upstream's import path, `mooncake.store`, is opt-in because it would shadow upstream's own
`mooncake` package: set MOONCAKE_C_UPSTREAM_ALIAS=1 when installing.

Build-time needs for the library: cmake, ninja or make, a C compiler and the -dev packages of
scripts/install-deps.sh.
"""

import glob
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
SONAME = "libmooncake_client.so.0"


def version():
    with open(os.path.join(HERE, "CMakeLists.txt")) as f:
        m = re.search(r"^project\(\S+ VERSION (\S+)", f.read(), re.M)
    return m.group(1) if m else "0.0.0"


def alias_wanted():
    return os.environ.get("MOONCAKE_C_UPSTREAM_ALIAS", "").lower() in ("1", "on", "yes", "true")


def build_library():
    """Returns the path of the built libmooncake_client shared library."""
    bdir = os.environ.get("MOONCAKE_C_BUILD_DIR")
    if bdir:
        bdir = os.path.abspath(bdir)
    else:
        bdir = os.path.join(HERE, "build", "pip-cmake")
        if not os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
            gen = ["-G", "Ninja"] if shutil.which("ninja") else []
            subprocess.check_call(["cmake", "-S", HERE, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release"] + gen)
    if os.path.exists(os.path.join(bdir, "CMakeCache.txt")):
        jobs = os.environ.get("MC_JOBS", "2")
        subprocess.check_call(["cmake", "--build", bdir, "--target", "mc_client_shared",
                               "--parallel", jobs])
    libs = sorted(glob.glob(os.path.join(bdir, "lib", "libmooncake_client.so.*")))
    libs = [p for p in libs if not os.path.islink(p)] or libs
    if not libs:
        raise RuntimeError("libmooncake_client.so not found under %s/lib" % bdir)
    return os.path.realpath(libs[-1])


class BuildPyWithLib(build_py):
    """build_py, plus the shared library and the _libpath.py that points at it."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "mooncake_c")
        os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
        shutil.copy2(build_library(), os.path.join(pkg, "lib", SONAME))
        with open(os.path.join(pkg, "_libpath.py"), "w") as f:
            f.write("# Written by setup.py: the library bundled in this package.\n")
            f.write('LIBDIR = "lib"\nVERSION = "%s"\n' % version())


class BinaryDistribution(Distribution):
    """The wheel holds a native library: tag it for this platform."""

    def has_ext_modules(self):
        return True


os.makedirs(os.path.join(HERE, "build", "pip"), exist_ok=True)  # setup.cfg egg_base
packages = ["mooncake_c"]
package_dir = {"mooncake_c": "python/mooncake_c"}
if alias_wanted():
    packages.append("mooncake")
    package_dir["mooncake"] = "python/compat/mooncake"

setup(
    name="mooncake-c",
    version=version(),
    description="Python binding of mooncake-c, a Mooncake-compatible KV-cache store in C",
    long_description=__doc__,
    long_description_content_type="text/plain",
    python_requires=">=3.8",
    packages=packages,
    package_dir=package_dir,
    exclude_package_data={"mooncake_c": ["_libpath.py"]},
    cmdclass={"build_py": BuildPyWithLib},
    distclass=BinaryDistribution,
    zip_safe=False,
)
