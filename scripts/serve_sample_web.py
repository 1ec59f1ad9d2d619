"""Serve a :class:`batchcrawl.testing.sampleweb.SampleWeb` on loopback until Ctrl-C (or ``--seconds``).

Prints one JSON line on stdout once the server listens::

    {"port": 41234, "hosts": 50, "pages": 5000, "seed": 0, "seeds": ["http://h0001.test:41234/", ...],
     "trap_host": "h0050.test", "resolve": {"*.test": "127.0.0.1"}}

Point a crawler at the seeds with ``*.test`` resolved to 127.0.0.1 (``network.resolve``; the
settings of ``configs/local-web.toml``); never edit /etc/hosts. ``--seeds FILE`` also writes the
seed URLs there, one a line (whole: a temp file renamed), before the JSON line. Example::

    python scripts/serve_sample_web.py --hosts 50 --pages 5000 --seconds 600 --seeds seeds.txt
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, serve, print the JSON line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=50, help="number of hosts (default 50)")
    ap.add_argument("--pages", type=int, default=5000, help="total content pages (default 5000)")
    ap.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: ephemeral)")
    ap.add_argument("--links-per-page", type=int, default=60)
    ap.add_argument("--page-bytes", type=int, default=20_000)
    ap.add_argument("--no-trap", action="store_true", help="no spider-trap host")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    ap.add_argument(
        "--log",
        metavar="FILE",
        help="on exit (--seconds, Ctrl-C or SIGTERM) write the request log as JSON lines "
        "{host, path, t_ms, status}",
    )
    ap.add_argument("--seeds", metavar="FILE", help="also write the seed URLs there, one a line")
    args = ap.parse_args(argv)
    web = SampleWeb(
        args.hosts,
        args.pages,
        seed=args.seed,
        links_per_page=args.links_per_page,
        page_bytes=args.page_bytes,
        trap=not args.no_trap,
    )
    stop = threading.Event()
    with MultiHostServer(web, host="127.0.0.1", port=args.port) as server:
        web.bind(server.port)
        line = {
            "port": server.port,
            "hosts": args.hosts,
            "pages": args.pages,
            "seed": args.seed,
            "seeds": web.seeds(),
            "trap_host": web.trap_host,
            "resolve": {"*.test": "127.0.0.1"},
        }
        if args.seeds:
            tmp = f"{args.seeds}.tmp-{os.getpid()}"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write("".join(f"{url}\n" for url in web.seeds()))
            os.replace(tmp, args.seeds)
        print(json.dumps(line), flush=True)
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            stop.wait(args.seconds)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
        if args.log:
            with open(args.log, "w", encoding="utf-8") as fh:
                for e in server.log.entries():
                    fh.write(json.dumps({"host": e.host, "path": e.path, "t_ms": e.t_ms,
                                         "status": e.status}) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
