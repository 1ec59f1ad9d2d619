#!/usr/bin/env bash
# Creates the pywb test environment .venv-pywb (pywb 2.10 and cdxj-indexer, in their own
# virtualenv: pywb pins gevent, jinja2 and others) that tests/test_pywb.py uses, then runs that
# test. Without the venv, tests/test_pywb.py skips with a reason.
#
#   bash scripts/pywb_test.sh              # create the venv if missing, run tests/test_pywb.py
#   bash scripts/pywb_test.sh --setup-only # only create the venv (what scripts/test.sh does)
#
# PYWB_TEST_VENV overrides the venv's location (default: .venv-pywb in the repository).
# An existing venv is reused when it imports pywb's app. batchcrawl is not installed in it: the
# test runs pywb's own tools (wb-manager, its WSGI app) on files the crawler wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${PYWB_TEST_VENV:-.venv-pywb}"

if "$VENV/bin/python" -c "import pywb.apps.frontendapp" >/dev/null 2>&1; then
  echo "pywb_test: reusing $VENV"
else
  echo "pywb_test: creating $VENV (pywb 2.10; under a minute)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  quiet_pip() {
    "$VENV/bin/python" -m pip install -q "$@" 2>&1 | { grep -v "is neither a file nor a directory" || true; }
  }
  quiet_pip --upgrade pip
  quiet_pip "pywb>=2.10,<2.11"
fi
"$VENV/bin/python" -c "import pywb; print('pywb', pywb.__version__)"

if [ "${1:-}" != "--setup-only" ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_pywb.py
fi
