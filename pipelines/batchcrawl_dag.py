"""Airflow 3 DAG ``batchcrawl_round``: one ``batchcrawl round`` per run, then an optional export.

Each run of the DAG runs ``batchcrawl round CRAWL`` once (generate, fetch, update, commit; docs/design.md
§7, §9) as a subprocess and pushes the round's one-line JSON summary (the last line of its stdout)
to XCom as the task's return value. Then, if an export destination is configured, it runs
``batchcrawl export CRAWL DEST`` (incremental: only rounds not exported yet) and pushes that summary.

* **No overlap**: ``max_active_runs=1`` and ``catchup=False``; the crawl's writer lock would refuse a
  second concurrent round anyway (exit code 4, retried later).
* **Retries are safe**: a round that dies before its commit leaves only orphan files and is redone
  by the retry (the crawl directory commits atomically); an export resumes at the first round
  without an export manifest.
* **Nothing due** (exit code 75) skips the round task instead of failing it. The export task runs
  whenever no upstream task failed (trigger rule ``none_failed``), so a skipped round still catches
  up with rounds whose export failed earlier.

Configuration, read when a task runs, from Airflow Variables (set them in the UI, with
``airflow variables set``, or as environment variables ``AIRFLOW_VAR_<NAME>``):

==================================  ===============================================================
Variable                            meaning
==================================  ===============================================================
``batchcrawl_crawl``                the crawl directory (path or fsspec URL); required
``batchcrawl_export_dest``          export destination (path or fsspec URL); empty: no export
``batchcrawl_export_tables``        ``--tables`` of the export (default: the command's default)
``batchcrawl_round_args``           extra ``batchcrawl round`` arguments, e.g. ``--workers 8``
``batchcrawl_command``              the command to run (default: this Python's
                                    ``-m batchcrawl.cli``); point it at another virtualenv's
                                    ``batchcrawl`` to keep the crawler's dependencies apart
==================================  ===============================================================

The schedule and the retry policy are needed when the file is parsed, so they come from environment
variables: ``AIRFLOW_VAR_BATCHCRAWL_SCHEDULE`` (a cron expression or preset; default ``@hourly``),
``AIRFLOW_VAR_BATCHCRAWL_RETRIES`` (default 2) and ``AIRFLOW_VAR_BATCHCRAWL_RETRY_DELAY_S`` (seconds,
default 300). Credentials
for object stores come from the workers' environment (``AWS_*``), never from Variables in the
command line. Installation: see ``docs/airflow.md``.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import sys
from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Variable, dag, task
from airflow.sdk.exceptions import AirflowException, AirflowSkipException

log = logging.getLogger(__name__)

#: ``batchcrawl`` exit code meaning "the frontier has nothing due" (batchcrawl.errors.NothingDue).
EXIT_NOTHING_DUE = 75
SCHEDULE = os.environ.get("AIRFLOW_VAR_BATCHCRAWL_SCHEDULE", "@hourly")
RETRIES = int(os.environ.get("AIRFLOW_VAR_BATCHCRAWL_RETRIES", "2"))
RETRY_DELAY_S = float(os.environ.get("AIRFLOW_VAR_BATCHCRAWL_RETRY_DELAY_S", "300"))


def _variable(name: str, default: str = "") -> str:
    return str(Variable.get(name, default=default) or "").strip()


def _command() -> list[str]:
    configured = _variable("batchcrawl_command")
    return shlex.split(configured) if configured else [sys.executable, "-m", "batchcrawl.cli"]


def last_json_line(stdout: str, what: str) -> dict[str, Any]:
    """The JSON object on the last non-empty line of ``stdout`` (batchcrawl prints its summary
    there); raises AirflowException naming ``what`` when there is none."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise AirflowException(f"{what}: printed no summary on stdout")
    try:
        summary = json.loads(lines[-1])
    except json.JSONDecodeError as exc:
        raise AirflowException(
            f"{what}: last stdout line is not JSON: {lines[-1][:200]!r}"
        ) from exc
    if not isinstance(summary, dict):
        raise AirflowException(f"{what}: last stdout line is not a JSON object")
    return summary


def run_batchcrawl(args: list[str]) -> dict[str, Any]:
    """Run ``batchcrawl ARGS``; its stderr goes to the task log, its JSON summary is returned.

    Raises
    ------
    AirflowSkipException
        Exit code 75: nothing was due.
    AirflowException
        Any other non-zero exit code (the task fails and is retried).
    """
    cmd = [*_command(), *args]
    log.info("running %s", shlex.join(cmd))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, check=False)
    if proc.returncode == EXIT_NOTHING_DUE:
        raise AirflowSkipException(f"batchcrawl {args[0]}: nothing is due (exit code 75)")
    if proc.returncode != 0:
        raise AirflowException(
            f"batchcrawl {args[0]} failed with exit code {proc.returncode} (see the log above)"
        )
    return last_json_line(proc.stdout, f"batchcrawl {args[0]}")


@dag(
    dag_id="batchcrawl_round",
    schedule=SCHEDULE,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": RETRIES, "retry_delay": timedelta(seconds=RETRY_DELAY_S)},
    tags=["batchcrawl"],
    doc_md=__doc__,
)
def batchcrawl_round():
    """One crawl round, then an optional incremental export."""

    @task(task_id="round", max_active_tis_per_dag=1, multiple_outputs=False)
    def crawl_round() -> dict[str, Any]:
        crawl = _variable("batchcrawl_crawl")
        if not crawl:
            raise AirflowException(
                "set the Airflow Variable batchcrawl_crawl to the crawl directory"
            )
        return run_batchcrawl(["round", crawl, *shlex.split(_variable("batchcrawl_round_args"))])

    @task(
        task_id="export",
        trigger_rule="none_failed",
        max_active_tis_per_dag=1,
        multiple_outputs=False,
    )
    def export() -> dict[str, Any]:
        crawl, dest = _variable("batchcrawl_crawl"), _variable("batchcrawl_export_dest")
        if not dest:
            raise AirflowSkipException("no export: Variable batchcrawl_export_dest is not set")
        tables = _variable("batchcrawl_export_tables")
        return run_batchcrawl(["export", crawl, dest, *(["--tables", tables] if tables else [])])

    crawl_round() >> export()


batchcrawl_round()
