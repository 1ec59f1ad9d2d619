#!/usr/bin/env bash
# Installs everything batchcrawl's tests need on a fresh Debian machine, then runs lint and the suite.
# This is the README's test command, and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: the Python HTML documentation is the "real website" of the integration test;
# Chromium renders the crawl report in tests/test_report_browser.py (headless, no network); nginx
# serves the sample web as files in tests/test_nginx_web.py (and scripts/bench_peers.py); iproute2's
# ss reads a listening socket's backlog in tests/test_webserver.py. The aptitude manuals (en, fr)
# are the real site of tests/test_real_sites.py.
if { [ ! -d /usr/share/doc/python3.11/html ] || [ ! -d /usr/share/doc/aptitude/html/fr ] \
     || ! command -v chromium >/dev/null \
     || ! [ -x /usr/sbin/nginx ] || ! command -v ss >/dev/null; } && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3.11-doc chromium nginx-light \
    iproute2 aptitude-doc-en aptitude-doc-fr >/dev/null
fi

python3 -m pip install -q --upgrade pip
python3 -m pip install -q -e ".[dev]"

ruff check .
ruff format --check .

# Airflow (tests/test_airflow.py runs the DAG in pipelines/ with real Airflow): Apache Airflow 3 lives
# in its own virtualenv, .venv-airflow, because it pins many packages. scripts/airflow_test.sh
# creates it (about a minute from PyPI; reused when it already imports airflow.sdk and batchcrawl).
# Without the venv those tests skip with a reason.
bash scripts/airflow_test.sh --setup-only

# pywb (tests/test_pywb.py replays an exported crawl in a standard pywb collection): pywb 2.10 in its
# own virtualenv, .venv-pywb, created by scripts/pywb_test.sh (about 20 s from PyPI; reused when it
# imports pywb). Without the venv those tests skip with a reason.
bash scripts/pywb_test.sh --setup-only

# pytest exits 5 when it collects no test: that is a failure here too.
python3 -m pytest -q -p no:cacheprovider "$@"
