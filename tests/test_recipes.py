"""docs/recipes.md cannot rot: every fenced block marked ``sh recipe`` runs, in order, in one fresh
folder, with bash (``set -euo pipefail``), against a sample web on loopback. The test writes
``seeds.txt`` and sets the network and politeness settings through ``BATCHCRAWL_SECTION__KEY``
environment variables (the documented override), so the recipes read as they would on the web.
``batchcrawl`` is this checkout's CLI (``python -m batchcrawl.cli``) on ``PATH``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "docs" / "recipes.md"
_BLOCK = re.compile(r"^```sh recipe\n(.*?)^```$", re.S | re.M)

pytestmark = pytest.mark.slow


def recipe_blocks(text: str) -> list[str]:
    """The bodies of the fenced blocks whose info string is ``sh recipe``, in order."""
    return _BLOCK.findall(text)


def test_recipe_blocks_are_found():
    blocks = recipe_blocks(RECIPES.read_text())
    assert len(blocks) >= 7
    assert any("export" in b for b in blocks) and any("graph build" in b for b in blocks)
    assert recipe_blocks("```sh\nnot run\n```\n```sh recipe\nrun\n```\n") == ["run\n"]


@pytest.fixture(scope="module")
def web():
    site = SampleWeb(3, 40, seed=4, page_bytes=1200, trap=False)
    server = MultiHostServer(site).start()
    site.bind(server.port)
    yield site
    server.stop()


def recipe_env(bin_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHCRAWL_")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}",
        BATCHCRAWL_NETWORK__RESOLVE='{"*.test" = "127.0.0.1"}',
        BATCHCRAWL_NETWORK__SYSTEM_DNS="false",
        BATCHCRAWL_NETWORK__ALLOW_NETWORKS='["127.0.0.0/8"]',
        BATCHCRAWL_POLITENESS__HOST_DELAY_S="0.01",
        BATCHCRAWL_POLITENESS__IP_DELAY_S="0",
        BATCHCRAWL_POLITENESS__MAX_CRAWL_DELAY_S="0.05",
        BATCHCRAWL_ROUND__WORKERS="1",
        BATCHCRAWL_FETCH__SHARDS="2",
    )
    return env


def test_recipes_run_as_written(web, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "batchcrawl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m batchcrawl.cli "$@"\n')
    shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    (work / "seeds.txt").write_text("".join(f"{u}\n" for u in web.seeds()))
    env = recipe_env(bin_dir)
    for i, block in enumerate(recipe_blocks(RECIPES.read_text())):
        run = subprocess.run(
            ["bash", "-c", "set -euo pipefail\n" + block], cwd=work, env=env,
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert run.returncode == 0, (
            f"recipe {i}:\n{block}\nstdout: {run.stdout[-3000:]}\nstderr: {run.stderr[-3000:]}"
        )
        assert run.stdout.strip(), (i, block)  # every recipe shows its result
    assert (work / "site" / "crawl.toml").is_file()
    assert list((work / "lake" / "index").glob("crawl=site/round=*/*.parquet"))
