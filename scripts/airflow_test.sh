#!/usr/bin/env bash
# Creates the Airflow test environment .venv-airflow (Apache Airflow 3 plus this checkout of
# batchcrawl, in its own virtualenv: Airflow pins many packages) that tests/test_airflow.py uses,
# then runs that test. Without the venv, tests/test_airflow.py skips with a reason.
#
#   bash scripts/airflow_test.sh              # create the venv if missing, run tests/test_airflow.py
#   bash scripts/airflow_test.sh --setup-only # only create the venv (what scripts/test.sh does)
#
# AIRFLOW_TEST_VENV overrides the venv's location (default: .venv-airflow in the repository).
# An existing venv is reused when it imports airflow.sdk and batchcrawl.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AIRFLOW_TEST_VENV:-.venv-airflow}"

# pip's exit status is kept (pipefail); only the notices about missing local index folders of
# this machine's pip configuration are dropped from the log
quiet_pip() {
  "$VENV/bin/python" -m pip install -q "$@" 2>&1 | { grep -v "is neither a file nor a directory" || true; }
}
if "$VENV/bin/python" -c "import airflow.sdk, batchcrawl" >/dev/null 2>&1; then
  echo "airflow_test: reusing $VENV"
  # the checkout may have gained dependencies since the venv was made (pycld2 did): pip installs
  # only what is missing
  quiet_pip -e .
else
  echo "airflow_test: creating $VENV (apache-airflow>=3 and batchcrawl; about a minute)"
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  quiet_pip --upgrade pip
  quiet_pip "apache-airflow>=3,<4"
  quiet_pip -e .
fi
"$VENV/bin/airflow" version

if [ "${1:-}" != "--setup-only" ]; then
  python3 -m pytest -q -p no:cacheprovider tests/test_airflow.py
fi
