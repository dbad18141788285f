#!/usr/bin/env bash
# Installs, with apt, the Debian packages the build, the tests and the benchmarks need.
# Idempotent: installs only what is missing, and runs 'apt-get update' only then.
set -euo pipefail

PKGS=(
  build-essential g++ cmake ninja-build pkg-config git curl ca-certificates procps
  liburing-dev libibverbs-dev librdmacm-dev
  protobuf-c-compiler libprotobuf-c-dev
  libgflags-dev libcmocka-dev libxxhash-dev libmicrohttpd-dev
  python3 util-linux iproute2
  # the Python binding's tests (pytest) and the CLI's terminal test (tmux)
  python3-pytest tmux
  # `pip install .` offline, into a venv (test_compat_pip_install): the build backend and venv
  python3-setuptools python3-wheel python3-venv
  # libcrypto: HMAC-SHA-256 for the connection handshake (--auth_token_file)
  libssl-dev
  # master HA: etcd's v3 HTTP/JSON gateway over libcurl, JSON by jansson; etcd itself for the
  # HA tests (started by them on loopback) and for deployments
  libcurl4-openssl-dev libjansson-dev etcd-server etcd-client
  # ISA-L: CRC32C of values (crc32_iscsi), about twice the hand-written crc32 code
  libisal-dev
  # libFuzzer (clang's compiler-rt) for scripts/fuzz.sh and the CI fuzz pass
  clang libclang-rt-dev
  # the CI style check of changed C files (scripts/test.sh: .clang-format)
  clang-format
  # benchmarks' public references
  redis-server redis-tools iperf3 fio
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
