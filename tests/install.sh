#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine: tshark for the independent
# capture count, chromium for the status-page browser test, etcd for the controller group test,
# prometheus (which carries promtool) for the alert rules and dashboard test
# (Debian packages, with apt-get: as
# root, or through sudo), the project with its test/spark/clients extras into the running
# python3 (a virtual environment: Debian's own Python refuses pip installs), and the npm client
# (ali-ons) the JS client tests drive. Needs the network: Debian, PyPI and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore

fail() { echo "tests/install.sh: $*" >&2; exit 1; }
step() { echo "tests/install.sh: $*"; }   # one line per step: some take minutes

if ! python3 - <<'PY'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
allowed = os.environ.get("PIP_BREAK_SYSTEM_PACKAGES", "").lower() in ("1", "true", "yes")
sys.exit(1 if managed and sys.prefix == sys.base_prefix and not allowed else 0)
PY
then
    fail "$(command -v python3) belongs to the system (pip says externally-managed-environment):" \
         "run this in a virtual environment: python3 -m venv .venv && . .venv/bin/activate"
fi

missing=()
command -v tshark >/dev/null && command -v mergecap >/dev/null || missing+=(tshark)
command -v chromium >/dev/null || missing+=(chromium)
command -v etcd >/dev/null || missing+=(etcd-server)
command -v prometheus >/dev/null && command -v promtool >/dev/null || missing+=(prometheus)
if ((${#missing[@]})); then
    if [ "$(id -u)" = 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null; then
        as_root=(sudo --preserve-env=DEBIAN_FRONTEND)
    else
        fail "installing ${missing[*]} with apt-get needs root: run it as root or install them first"
    fi
    step "installing ${missing[*]} with apt-get (minutes on a fresh machine)"
    "${as_root[@]}" apt-get update -qq
    "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
step "installing rocketpy with its test, spark and clients extras into $(command -v python3) with pip (pyspark alone is ~300 MB)"
python3 -m pip install -q -e '.[test,spark,clients]' --config-settings editable_mode=compat
step "installing the JS client (tests/clients) with npm ci"
(cd tests/clients && npm ci --no-audit --no-fund --loglevel=error)
step "done"
