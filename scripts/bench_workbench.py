"""Benchmark of the workbench (batchcrawl.fetch.workbench): operations per second with many hosts.

Runs on a fake clock (no sleeps, no network): adds ``--items`` items to each of ``--hosts`` hosts
spread over ``--ips`` addresses, then takes, pops and gives back visit states until every item is
fetched, jumping the fake clock forward whenever nothing is ready. Prints one line per phase.

    python scripts/bench_workbench.py --hosts 100000 --ips 20000 --items 5
    python scripts/bench_workbench.py --hosts 20000 --ips 1 --ip-concurrency 8   # shared hosting
"""

from __future__ import annotations

import argparse
import random
import time

from batchcrawl.fetch.workbench import Workbench


class JumpClock:
    """Fake clock: moves ``step`` seconds per reading, and jumps when told to."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--ips", type=int, default=20_000)
    ap.add_argument("--items", type=int, default=5, help="items per host")
    ap.add_argument("--host-delay-s", type=float, default=2.0)
    ap.add_argument("--ip-delay-s", type=float, default=1.0)
    ap.add_argument(
        "--ip-concurrency", type=int, default=1, help="fetches in flight per IP (workbench slots)"
    )
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    rng = random.Random(args.seed)
    clock = JumpClock(step=1e-5)
    wb: Workbench[int] = Workbench(
        clock,
        host_delay_s=args.host_delay_s,
        ip_delay_s=args.ip_delay_s,
        ip_concurrency=args.ip_concurrency,
    )
    hosts = [f"h{i}.test" for i in range(args.hosts)]
    ips = [f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}" for i in range(args.ips)]

    t0 = time.perf_counter()
    for n, h in enumerate(hosts):
        wb.add(h, ips[rng.randrange(len(ips))], range(n * args.items, (n + 1) * args.items))
    t_add = time.perf_counter() - t0
    print(
        f"add:     {args.hosts:>9} hosts x {args.items} items  {args.hosts / t_add:>12,.0f} adds/s"
    )

    t0 = time.perf_counter()
    cycles = waits = 0
    while len(wb):
        vs, wait = wb.acquire()
        if vs is None:
            waits += 1
            clock.now += wait
            continue
        vs.pop()
        wb.release(vs, download_s=0.05)
        cycles += 1
    t_cycle = time.perf_counter() - t0
    print(
        f"fetch:   {cycles:>9} acquire+pop+release cycles  {cycles / t_cycle:>12,.0f} cycles/s "
        f"({waits} clock jumps, {clock.now:,.0f} fake seconds)"
    )

    t0 = time.perf_counter()
    states = wb.snapshot()
    t_snap = time.perf_counter() - t0
    print(f"snapshot: {len(states):>8} hosts  {len(states) / t_snap:>12,.0f} hosts/s")
    t0 = time.perf_counter()
    forgot = len(wb.prune_idle())
    print(f"prune:   {forgot:>9} idle hosts  {forgot / (time.perf_counter() - t0):>12,.0f} hosts/s")


if __name__ == "__main__":
    main()
