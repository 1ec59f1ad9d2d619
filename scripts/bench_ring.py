"""Benchmark URL canonicalization/keys and the shard ring; rerun the 4 -> 5 shard simulation.

Usage::

    python scripts/bench_ring.py [--hosts 100000] [--placements 30] [--vnodes 1 100 200]

Prints per-call times (µs) of ``canonicalize`` (already-canonical input and input needing work),
``url_key``, ``url_keys`` and ring lookups, then the median fraction of hosts moved and the busiest
shard's load (times an even share) when growing from 4 to 5 shards (Karger et al.; UbiCrawler).
No network; results vary with the machine, so nothing here is asserted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from batchcrawl.ring import HashRing, modular_shards, ring_keys
from batchcrawl.urls import canonicalize, url_key, url_keys


def _per_call_us(fn, arg, n: int = 100_000) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn(arg)
    return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--placements", type=int, default=30)
    parser.add_argument("--vnodes", type=int, nargs="+", default=[1, 100])
    args = parser.parse_args()

    canonical = "https://www.example.com/some/path/page.html?q=1&r=%2F"
    messy = "HTTPS://user@WWW.Example.com:443/some/./path/../page.html?q=%7e1#top"
    print(f"canonicalize (already canonical): {_per_call_us(canonicalize, canonical):6.2f} µs")
    print(f"canonicalize (needs work):        {_per_call_us(canonicalize, messy):6.2f} µs")
    print(f"url_key:                          {_per_call_us(url_key, canonical):6.2f} µs")
    urls = [f"http://h{i % 1000}.test/p/{i}" for i in range(args.hosts)]
    start = time.perf_counter()
    url_keys(urls)
    print(
        f"url_keys:                         {(time.perf_counter() - start) / len(urls) * 1e6:6.2f} µs"
    )
    ring = HashRing(4)
    print(f"HashRing(4).shard_for:            {_per_call_us(ring.shard_for, 'h1.test'):6.2f} µs")

    keys = ring_keys(f"host{i}.site{i % 997}.test" for i in range(args.hosts))
    start = time.perf_counter()
    ring.assign_keys(keys)
    per = (time.perf_counter() - start) / len(keys) * 1e6
    print(f"HashRing(4).assign_keys:          {per:6.3f} µs per key")
    print(f"\n{args.hosts} hosts, {args.placements} placements, 4 -> 5 shards (medians):")
    for vnodes in args.vnodes:
        moved, busiest = [], []
        for seed in range(args.placements):
            r4 = HashRing(4, vnodes=vnodes, seed=seed)
            before, after = r4.assign_keys(keys), r4.with_shard(4).assign_keys(keys)
            moved.append(float(np.mean(before != after)))
            busiest.append(np.bincount(before, minlength=4).max() / (len(keys) / 4))
        print(
            f"  {vnodes:4d} points/shard: moved {np.median(moved):.3f}, "
            f"busiest {np.median(busiest):.3f}x"
        )
    mod = float(np.mean(modular_shards(keys, 4) != modular_shards(keys, 5)))
    print(f"  modular hashing:   moved {mod:.3f}")


if __name__ == "__main__":
    main()
