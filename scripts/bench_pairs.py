"""Benchmark two trees back to back, alternating, and print medians (not a test).

Runs ``scripts/bench_round.py`` (or any benchmark of ``scripts/`` that prints one JSON line) with
the same arguments on this checkout and on a base commit (checked out as a temporary git worktree),
``--repeat`` times each, alternating in ABBA order (base, tree, tree, base, base, tree, ...) so that
a machine growing slower or faster during the series weighs on both alike: in Session 6 the second
run of a back-to-back pair of CPU-bound rounds was ~2 % slower whichever tree it was
(docs/benchmarks.md), so plain base-then-tree pairs favour the base. Single runs of the round benchmarks differ by a few
per cent in pages/s and by +-0.03 in the shares (docs/benchmarks.md): a pair of single runs cannot
show a change smaller than that, the medians of a few alternating pairs can. Prints one JSON line::

    {"benchmark", "args", "base", "repeat", "keys": {KEY: {"base": [..], "tree": [..],
     "base_median", "tree_median", "ratio": tree_median / base_median}}}

for each ``--key`` (default: pages_per_s, distinct_pages, ceiling_share, bound_share,
wall_idle_share, cpu_ms_per_page, peak_pss_mb). Everything the benchmark does stays as it is:
its servers run on loopback only (docs/design.md §10).

    python scripts/bench_pairs.py --base main --repeat 3 -- --hosts 500 --pages 50000 \\
        --seconds 120 --host-delay-s 1.0
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
KEYS = ["pages_per_s", "distinct_pages", "ceiling_share", "bound_share", "wall_idle_share",
        "cpu_ms_per_page", "peak_pss_mb"]  # fmt: skip


def run_once(tree: Path, benchmark: str, args: list[str]) -> dict:
    """One run of ``benchmark`` from ``tree`` (its own ``batchcrawl`` first on the path); its
    JSON line. Raises RuntimeError with the benchmark's stderr tail when it fails."""
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(
        [sys.executable, str(tree / "scripts" / benchmark), *args],
        env=env, cwd=tree, capture_output=True, text=True,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(
            f"{tree / 'scripts' / benchmark} exited {done.returncode}: {done.stderr[-2000:]}"
        )
    return json.loads(lines[-1])


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the alternating series, print the JSON line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--base", required=True, help="commit (or branch, tag) to compare against")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each tree (default 3)")
    ap.add_argument("--benchmark", default="bench_round.py", help="a script of scripts/")
    ap.add_argument("--key", dest="keys", action="append", help="JSON keys to report")
    ap.add_argument("args", nargs=argparse.REMAINDER, help="-- then the benchmark's arguments")
    opts = ap.parse_args(argv)
    if opts.repeat < 1:
        ap.error("--repeat must be at least 1")
    args = opts.args[1:] if opts.args[:1] == ["--"] else opts.args
    keys = opts.keys or KEYS
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(base),
                        opts.base], check=True)  # fmt: skip
        try:
            runs: dict[str, list[dict]] = {"base": [], "tree": []}
            trees = {"base": base, "tree": ROOT}
            for i in range(opts.repeat):  # ABBA: the second run of a pair is the slower one
                for side in ("base", "tree") if i % 2 == 0 else ("tree", "base"):
                    runs[side].append(run_once(trees[side], opts.benchmark, args))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           check=False)  # fmt: skip
    report = {}
    for k in keys:
        values = {side: [r.get(k) for r in rs] for side, rs in runs.items()}
        row: dict = dict(values)
        for side, vs in values.items():
            nums = [v for v in vs if isinstance(v, int | float)]
            row[f"{side}_median"] = statistics.median(nums) if nums else None
        b, t = row["base_median"], row["tree_median"]
        row["ratio"] = round(t / b, 4) if b and t is not None else None
        report[k] = row
    print(json.dumps({"benchmark": opts.benchmark, "args": args, "base": opts.base,
                      "repeat": opts.repeat, "keys": report}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
