"""The Airflow DAG (pipelines/batchcrawl_dag.py), run by real Apache Airflow 3.

Airflow lives in its own virtualenv (``bash scripts/airflow_test.sh`` creates ``.venv-airflow``);
without it these tests skip. Each test runs ``airflow dags test batchcrawl_round DATE`` with a SQLite
metadata database in a temporary AIRFLOW_HOME and no webserver or scheduler, against a sample web
served on loopback by this process, and checks what the DAG did to the crawl directory and what it
left in Airflow's database (task states, XCom).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from batchcrawl.config import loopback_test_config, to_toml
from batchcrawl.export.lake import exported_rounds
from batchcrawl.frontier.inject import inject
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("AIRFLOW_TEST_VENV", REPO / ".venv-airflow"))
AIRFLOW = VENV / "bin" / "airflow"
DAG_ID = "batchcrawl_round"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not AIRFLOW.exists(),
        reason=f"no Airflow virtualenv at {VENV}: run `bash scripts/airflow_test.sh` to create it",
    ),
]


@pytest.fixture(scope="module")
def web():
    site = SampleWeb(3, 30, seed=5, page_bytes=2000, trap=False)
    server = MultiHostServer(site).start()
    site.bind(server.port)
    yield site
    server.stop()


@pytest.fixture(scope="module")
def cfg():
    return loopback_test_config(
        crawl={"name": "airflowtest"},
        politeness={"host_delay_s": 0.02, "ip_delay_s": 0.0, "max_crawl_delay_s": 0.05},
        frontier={"buckets": 2},
        fetch={"shards": 1, "threads": 2},
        round={"workers": 1, "threads_per_worker": 1},
    )


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory):
    """A temporary AIRFLOW_HOME with a migrated SQLite metadata database."""
    home = tmp_path_factory.mktemp("airflow_home")
    proc = subprocess.run(
        [str(AIRFLOW), "db", "migrate"],
        env=airflow_env(home),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return home


def airflow_env(home: Path, **variables: str) -> dict[str, str]:
    """Environment of an Airflow command: its own venv first on PATH, settings and Variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AIRFLOW", "PYTHON", "VIRTUAL_ENV", "BATCHCRAWL_"))
    }
    env.update(
        PATH=f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        AIRFLOW_HOME=str(home),
        AIRFLOW__CORE__DAGS_FOLDER=str(REPO / "pipelines"),
        AIRFLOW__CORE__LOAD_EXAMPLES="False",
        AIRFLOW__DATABASE__SQL_ALCHEMY_CONN=f"sqlite:///{home}/airflow.db",
        AIRFLOW_VAR_BATCHCRAWL_RETRIES="0",  # a failing task fails the run at once
    )
    for name, value in variables.items():
        env[f"AIRFLOW_VAR_{name.upper()}"] = value
    return env


def dags_test(home: Path, date: str, **variables: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [str(AIRFLOW), "dags", "test", DAG_ID, date],
        env=airflow_env(home, **variables),
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


def run_record(home: Path, date: str) -> dict:
    """Task states and return-value XComs of the DAG run of logical date ``date``."""
    with sqlite3.connect(home / "airflow.db") as db:
        (run_id,) = db.execute(
            "SELECT run_id FROM dag_run WHERE dag_id = ? AND logical_date LIKE ?",
            (DAG_ID, f"{date}%"),
        ).fetchone()
        states = dict(
            db.execute(
                "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?",
                (DAG_ID, run_id),
            ).fetchall()
        )
        xcoms = {
            task: json.loads(value)
            for task, value in db.execute(
                "SELECT task_id, value FROM xcom WHERE dag_id = ? AND run_id = ? "
                "AND key = 'return_value'",
                (DAG_ID, run_id),
            ).fetchall()
        }
    return {"states": states, "xcom": xcoms}


def new_crawl(path: Path, cfg, seeds: list[str]) -> CrawlDir:
    crawl = CrawlDir.create(str(path), to_toml(cfg), buckets=cfg.frontier.buckets)
    if seeds:
        inject(crawl, cfg, seeds, source="seeds")
    return crawl


def test_dag_definition_has_no_overlap_and_retries(airflow_home):
    code = (
        "import importlib.util, json, sys\n"
        "spec = importlib.util.spec_from_file_location('d', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "dag = m.batchcrawl_round()\n"
        "print(json.dumps({'max_active_runs': dag.max_active_runs, 'catchup': dag.catchup,\n"
        "  'tasks': {t.task_id: [t.retries, getattr(t.trigger_rule, 'value', t.trigger_rule),\n"
        "                        t.max_active_tis_per_dag]\n"
        "            for t in dag.tasks},\n"
        "  'edges': sorted(t.task_id for t in dag.get_task('round').downstream_list)}))\n"
    )
    proc = subprocess.run(
        [str(VENV / "bin" / "python"), "-c", code, str(REPO / "pipelines" / "batchcrawl_dag.py")],
        env={k: v for k, v in airflow_env(airflow_home).items() if "RETRIES" not in k},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["max_active_runs"] == 1 and info["catchup"] is False
    assert info["tasks"]["round"][0] == 2  # retries: a round is idempotent
    assert info["tasks"]["round"][2] == 1
    assert info["tasks"]["export"][1] == "none_failed"
    assert info["edges"] == ["export"]


def test_dag_run_commits_a_round_pushes_its_summary_and_exports(airflow_home, web, cfg, tmp_path):
    crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
    before = crawl.generations()
    dest = tmp_path / "lake"
    date = "2024-06-01"
    dags_test(airflow_home, date, batchcrawl_crawl=crawl.url, batchcrawl_export_dest=str(dest))
    after = crawl.generations()
    assert len(after) == len(before) + 1  # exactly one round committed
    manifest = crawl.manifest()
    assert manifest.round == 1 and manifest.summary["step"] == "round"
    record = run_record(airflow_home, date)
    assert record["states"] == {"round": "success", "export": "success"}
    summary = record["xcom"]["round"]
    assert summary["round"] == 1 and summary["generation"] == manifest.generation
    assert summary["stored"] == manifest.summary["stored"] > 0
    assert record["xcom"]["export"]["exported"] == [1]
    assert sorted(exported_rounds(str(dest), "airflowtest")) == [1]


def test_nothing_due_skips_the_round_and_still_runs_the_export(airflow_home, cfg, tmp_path):
    crawl = new_crawl(tmp_path / "empty", cfg, [])  # no seeds: nothing is ever due
    before = crawl.generations()
    date = "2024-06-02"
    dags_test(
        airflow_home, date, batchcrawl_crawl=crawl.url, batchcrawl_export_dest=str(tmp_path / "l")
    )
    assert crawl.generations() == before
    record = run_record(airflow_home, date)
    assert record["states"] == {"round": "skipped", "export": "success"}
    assert "round" not in record["xcom"]
    assert record["xcom"]["export"]["exported"] == []
