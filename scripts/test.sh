#!/usr/bin/env bash
# Installs everything batchcrawl's tests need on a fresh Debian machine, then runs lint and the suite.
# This is the README's test command, and what CI (.ci/run) runs.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages: the Python HTML documentation is the "real website" of the integration test
# (python3.11-doc on Debian 12; where it does not exist, python3-doc, the default Python's, and the
# tests that need 3.11's say so and skip); Chromium renders the crawl report in
# tests/test_report_browser.py (headless, no network); nginx serves the sample web as files in
# tests/test_nginx_web.py (and scripts/bench_peers.py); iproute2's ss reads a listening socket's
# backlog in tests/test_webserver.py; python3-venv makes the virtualenvs below (Debian's Python
# has no ensurepip without it); the aptitude manual in nine languages (aptitude-doc-*) is the
# multilingual site of tests/test_extract_crawl.py and the real site of tests/test_real_sites.py.
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
if { [ ! -d /usr/share/doc/python3.11/html ] || ! command -v chromium >/dev/null \
     || ! [ -x /usr/sbin/nginx ] || ! command -v ss >/dev/null \
     || ! dpkg -s python3-venv >/dev/null 2>&1 || [ ! -d /usr/share/doc/aptitude/html/ja ]; } \
   && command -v apt-get >/dev/null; then
  $SUDO apt-get update -qq
  DOCS=python3-doc
  if apt-cache show python3.11-doc >/dev/null 2>&1; then DOCS=python3.11-doc; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$DOCS" chromium nginx-light \
    iproute2 python3-venv aptitude-doc-cs aptitude-doc-en aptitude-doc-es aptitude-doc-fi \
    aptitude-doc-fr aptitude-doc-it aptitude-doc-ja aptitude-doc-nl aptitude-doc-ru >/dev/null
fi

# Python packages: with pip into this Python where that is allowed (CI: root on a fresh machine),
# else -- a system Python that refuses pip (PEP 668, "externally-managed-environment": Debian 12,
# Ubuntu 23.04+) or has no pip -- into the virtualenv .venv (created once, reused), whose bin/
# then comes first on PATH for everything below (python3, ruff, pytest, the scripts).
in_venv() { python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; }
managed() {
  python3 -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'
}
if ! in_venv && { managed || ! python3 -m pip --version >/dev/null 2>&1; }; then
  [ -x .venv/bin/python3 ] || python3 -m venv .venv
  export PATH="$PWD/.venv/bin:$PATH"
  echo "scripts/test.sh: this Python's pip is not for installing packages; using the virtualenv .venv"
fi
python3 -m pip install -q --upgrade pip
python3 -m pip install -q -e ".[dev]"

ruff check .
ruff format --check .
# Types: batchcrawl/fetch/, frontier/ and store/ strictly ([tool.mypy] in pyproject.toml says what
# is checked how).
python3 -m mypy

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
