#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian machine (run as root, or with the
# Debian packages already there): tshark for the independent capture count, chromium for the
# status-page browser test, the project with its test/spark/clients extras, and the npm client
# (ali-ons) the JS client tests drive.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
if ! command -v tshark >/dev/null || ! command -v mergecap >/dev/null || ! command -v chromium >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends tshark chromium >/dev/null
fi
python3 -m pip install -q -e '.[test,spark,clients]' --config-settings editable_mode=compat
(cd tests/clients && npm ci --no-audit --no-fund --loglevel=error)
