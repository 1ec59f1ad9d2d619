"""README.md cannot rot: every fenced block marked ``sh recipe`` runs, in order, as written, with
bash (``set -euo pipefail``) in a fresh folder that holds the repository's ``scripts`` and
``configs`` (the README's commands run from the repository's folder), with ``batchcrawl`` this
checkout's CLI on ``PATH`` and no ``BATCHCRAWL_*`` variable: the blocks set up everything they need
themselves (issue 34: "A crawl by hand", followed literally, crawled nothing and said nothing why).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_recipes import recipe_blocks

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_the_readme_has_a_recipe_for_the_crawl_by_hand():
    blocks = recipe_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    assert any("serve_sample_web.py" in b and "batchcrawl round local" in b for b in blocks)


def test_readme_recipes_run_as_written(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "batchcrawl"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m batchcrawl.cli "$@"\n')
    shim.chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    for name in ("scripts", "configs"):
        (work / name).symlink_to(REPO / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHCRAWL_")}
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
        PYTHONPATH=f"{REPO}{os.pathsep}{env.get('PYTHONPATH', '')}",
    )
    blocks = recipe_blocks((REPO / "README.md").read_text(encoding="utf-8"))
    # twice: a user repeats the recipe in the same folder (a fresh-user trial, issue 34: the
    # second time ran against the first crawl, whose seeds named a web that had gone)
    for i, block in enumerate(blocks + blocks):
        proc = subprocess.Popen(
            ["bash", "-c", "set -euo pipefail\n" + block], cwd=work, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        try:
            out, err = proc.communicate(timeout=800)
        finally:  # a block that failed half way leaves no server behind
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert proc.returncode == 0, f"README recipe {i} failed:\n{block}\n{err[-4000:]}"
        assert "Traceback" not in err, err[-4000:]
        assert "dns_error" not in out + err, err[-4000:]
    assert (work / "local" / "crawl.toml").exists() and (work / "local.html").exists()
