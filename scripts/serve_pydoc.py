"""Serve the Debian python3.11-doc HTML docs on loopback until Ctrl-C (or ``--seconds``).

The docs (``apt-get install python3.11-doc``; ``/usr/share/doc/python3.11/html``) are served by
:class:`servers.staticsite.DirectorySite` under ``docs.test`` (everything) and
``docs-mirror.test`` (a partial mirror of ``/tutorial/``, linked from the primary's root index).
Prints one JSON line on stdout once the server listens::

    {"port": 41234, "hosts": ["docs.test", "docs-mirror.test"], "seeds": ["http://docs.test:41234/"],
     "root": "/usr/share/doc/python3.11/html", "resolve": {"*.test": "127.0.0.1"}}

With ``--count-pages`` the line also has ``reachable``: the number of URLs
:func:`servers.staticsite.reachable_pages` finds from the seeds (a few seconds).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

from batchcrawl.testing.webserver import MultiHostServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/servers/

from servers.staticsite import PYTHON_DOCS, DirectorySite  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, serve, print the JSON line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--root", type=Path, default=PYTHON_DOCS, help="directory to serve")
    ap.add_argument("--hosts", default="docs.test,docs-mirror.test", help="comma-separated names")
    ap.add_argument("--disallow", default=None, help="path prefix robots.txt disallows")
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: ephemeral)")
    ap.add_argument("--seconds", type=float, default=None, help="stop after this many seconds")
    ap.add_argument("--count-pages", action="store_true", help="add the reachable page count")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        print(
            f"{args.root} is not a directory: install the docs with "
            "`apt-get install -y python3.11-doc` or pass --root",
            file=sys.stderr,
        )
        return 2
    hosts = [h.strip() for h in args.hosts.split(",") if h.strip()]
    site = DirectorySite(args.root, hosts, disallow=args.disallow)
    stop = threading.Event()
    with MultiHostServer(site, host="127.0.0.1", port=args.port) as server:
        site.bind(server.port)
        line = {
            "port": server.port,
            "hosts": hosts,
            "seeds": [server.base_url(hosts[0]) + "/"],
            "root": str(args.root),
            "resolve": {"*.test": "127.0.0.1"},
        }
        if args.count_pages:
            line["reachable"] = len(site.reachable(["/"]))
        print(json.dumps(line), flush=True)
        try:
            stop.wait(args.seconds)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
