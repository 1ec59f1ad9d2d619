#!/usr/bin/env bash
# Installs everything batchcrawl's tests need on a fresh Debian machine, then runs lint and the suite.
# This is the README's test command, and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: the Python HTML documentation is the "real website" of the integration test.
if [ ! -d /usr/share/doc/python3.11/html ] && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3.11-doc >/dev/null
fi

python3 -m pip install -q --upgrade pip
python3 -m pip install -q -e ".[dev]"

ruff check .
ruff format --check .

# pytest exits 5 when it collects no test: that is a failure here too.
python3 -m pytest -q -p no:cacheprovider "$@"
