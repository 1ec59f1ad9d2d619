"""nginx on loopback serving a static multi-host web, run by an unprivileged user (benchmarks).

:class:`NginxServer` writes its own configuration under a private prefix (pid file, error log,
temp folders, access log), starts ``nginx -g 'daemon off;'``-style as a child process listening
on ``127.0.0.1:PORT`` only, and stops it with SIGQUIT (graceful: buffered log lines are flushed).
Virtual hosts map ``$host`` to a folder: ``ROOT/HOST/...`` (:mod:`servers.staticweb`);
redirects and odd statuses come from ``map`` blocks keyed by ``$host$uri``.

The access log records, per request, ``$msec`` (wall-clock end, ms precision), ``$request_time``,
status, ``$host`` and ``$request_uri``; :func:`parse_access_log` turns it into entries with the
request's *start* time ``t_ms = (msec - request_time) * 1000``, the shape
:func:`batchcrawl.testing.webserver.politeness_violations` counts.

The Debian package is ``nginx-light`` (``apt-get install nginx-light``); only the install needs
root.
"""

from __future__ import annotations

import grp
import os
import pwd
import random
import resource
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from batchcrawl.errors import BatchcrawlError

__all__ = [
    "NginxError",
    "NginxServer",
    "find_nginx",
    "nginx_config",
    "parse_access_log",
    "pick_port",
]

#: Columns of the access log, space separated (none of them can hold a space).
LOG_FORMAT = "$msec $request_time $status $host $request_uri"
_TEMP_DIRS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


class NginxError(BatchcrawlError):
    """nginx is missing, rejected its configuration, or did not start or stop."""

    exit_code = 1


def find_nginx() -> str:
    """Path of the ``nginx`` binary (``PATH``, then ``/usr/sbin``). Raises :class:`NginxError`
    saying how to install it."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise NginxError(
            "nginx is not installed: install the Debian package nginx-light "
            "(apt-get install -y nginx-light) or put nginx on PATH"
        )
    return found


def pick_port(rng: random.Random | None = None, low: int = 20_000, high: int = 32_000) -> int:
    """A port free on 127.0.0.1, drawn in ``[low, high)``: below Linux's ephemeral range
    (32768-60999), so an outgoing connection cannot take it between this check and nginx's bind.
    The static files name the port, so it must be known before nginx starts."""
    rng = rng or random.Random()
    for _ in range(200):
        port = rng.randrange(low, high)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise NginxError(f"no free port on 127.0.0.1 in [{low}, {high}) after 200 tries")


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _map(variable: str, entries: Mapping[tuple[str, str], str]) -> list[str]:
    lines = [f"    map $host$uri ${variable} {{", '        default "";']
    lines += [f"        {_quote(h + p)} {_quote(v)};" for (h, p), v in sorted(entries.items())]
    return [*lines, "    }"]


def _worker_connections() -> int:
    """nginx's connections per worker: 4096, or fewer when this process may open fewer files
    (each connection is a descriptor, and every request opens its file once more; without a
    margin nginx answers 500, "Too many open files")."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return max(64, min(4096, (soft - 64) // 2)) if soft != resource.RLIM_INFINITY else 4096


def nginx_config(
    prefix: Path,
    root: Path,
    port: int,
    access_log: Path,
    redirects: Mapping[tuple[str, str], tuple[int, str]] | None = None,
    statuses: Mapping[tuple[str, str], int] | None = None,
) -> str:
    """The text of an ``nginx.conf`` serving ``ROOT/$host`` on ``127.0.0.1:port``.

    Parameters
    ----------
    prefix
        Private folder for the pid file, error log and temp folders (must exist).
    root
        Folder with one sub-folder per host name.
    port
        TCP port on 127.0.0.1.
    access_log
        File for the access log (:data:`LOG_FORMAT`).
    redirects
        ``(host, path) -> (301 or 302, location)``.
    statuses
        ``(host, path) -> status`` answered with nginx's own body (only 500 is supported).

    Raises
    ------
    NginxError
        A redirect status other than 301/302 or a status other than 500.
    """
    redirects, statuses = dict(redirects or {}), dict(statuses or {})
    bad = [s for s, _ in redirects.values() if s not in (301, 302)]
    bad += [s for s in statuses.values() if s != 500]
    if bad:
        raise NginxError(f"nginx_config: unsupported statuses {sorted(set(bad))}: use 301/302/500")
    user = ""
    if os.geteuid() == 0:  # else the workers would run as nobody and not read a private temp dir
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};"
    temp = "\n".join(f"    {d}_temp_path {prefix}/temp/{d};" for d in _TEMP_DIRS)
    maps = _map("bench_r301", {k: v for k, (s, v) in redirects.items() if s == 301})
    maps += _map("bench_r302", {k: v for k, (s, v) in redirects.items() if s == 302})
    maps += _map("bench_s500", {k: "1" for k in statuses})
    return f"""\
# written by servers.nginx: a private loopback server for a benchmark
{user}
master_process on;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections {_worker_connections()}; }}
http {{
    types {{ text/html html; text/plain txt; application/pdf pdf; image/png png; }}
    default_type text/html;
    charset utf-8;
    charset_types text/html text/plain;
    sendfile on;
    tcp_nodelay on;
    keepalive_timeout 60s;
    keepalive_requests 1000000;
    server_tokens off;
    absolute_redirect off;
    map_hash_bucket_size 128;
    map_hash_max_size 262144;
{temp}
    log_format bench '{LOG_FORMAT}';
    access_log {access_log} bench buffer=256k flush=1s;
{chr(10).join(maps)}
    server {{
        listen 127.0.0.1:{port} default_server;
        server_name _;
        root {root}/$host;
        index index.html;
        if ($bench_r301) {{ return 301 $bench_r301; }}
        if ($bench_r302) {{ return 302 $bench_r302; }}
        if ($bench_s500) {{ return 500; }}
    }}
}}
"""


def parse_access_log(path: Path) -> Iterator[dict]:
    """Entries ``{host, path, t_ms, status}`` of an access log written with :data:`LOG_FORMAT`.

    ``t_ms`` is the request's start, wall-clock ms: the log's end time ``$msec`` minus
    ``$request_time`` (both with ms resolution). ``path`` is the request target as sent (with its
    query). Raises :class:`NginxError` naming the line for a line not in that format.
    """
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.split()
            if not parts:
                continue
            try:
                msec, took, status, host, target = parts
                t_ms = round((float(msec) - float(took)) * 1000.0, 3)
                entry = {"host": host, "path": target, "t_ms": t_ms, "status": int(status)}
            except ValueError:
                raise NginxError(f"{path}:{n}: not an access-log line of {LOG_FORMAT!r}") from None
            yield entry


class NginxServer:
    """nginx serving ``root`` (``ROOT/HOST/...``) on ``127.0.0.1:port``; a context manager.

    Parameters
    ----------
    prefix
        Private, writable folder for the configuration, pid, logs and temp folders.
    root, port, redirects, statuses
        As for :func:`nginx_config`.
    binary
        The nginx executable (default: :func:`find_nginx`).

    Attributes
    ----------
    access_log : Path
        The access log (complete once :meth:`stop` returned).
    """

    def __init__(
        self,
        prefix: Path,
        root: Path,
        port: int,
        redirects: Mapping[tuple[str, str], tuple[int, str]] | None = None,
        statuses: Mapping[tuple[str, str], int] | None = None,
        binary: str | None = None,
    ) -> None:
        self.prefix, self.root, self.port = Path(prefix), Path(root), port
        self.binary = binary or find_nginx()
        self.conf = self.prefix / "nginx.conf"
        self.access_log = self.prefix / "access.log"
        self.error_log = self.prefix / "error.log"
        for d in _TEMP_DIRS:
            (self.prefix / "temp" / d).mkdir(parents=True, exist_ok=True)
        self.conf.write_text(
            nginx_config(self.prefix, self.root, port, self.access_log, redirects, statuses),
            encoding="utf-8",
        )
        self.proc: subprocess.Popen | None = None

    def _cmd(self, *extra: str) -> list[str]:
        return [self.binary, "-p", str(self.prefix), "-c", str(self.conf), *extra]

    def check(self) -> None:
        """``nginx -t`` on the configuration; raises :class:`NginxError` with nginx's words."""
        done = subprocess.run(self._cmd("-t"), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NginxError(f"nginx -t rejected {self.conf}: {done.stderr.strip()}")

    def start(self, timeout_s: float = 10.0) -> NginxServer:
        """Start nginx (its own session: a terminal's Ctrl-C reaches only the caller) and wait
        until the port accepts connections. Raises :class:`NginxError` if it exits first."""
        with open(self.prefix / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                self._cmd("-g", "daemon off;"),
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                said = [f.read_text(errors="replace") for f in (self.prefix / "stderr.log",
                        self.error_log) if f.exists()]  # fmt: skip
                raise NginxError(
                    f"nginx exited with {self.proc.returncode}: {''.join(said)}".strip()
                )
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        self.stop()
        raise NginxError(f"nginx did not listen on 127.0.0.1:{self.port} within {timeout_s} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        """Graceful stop (SIGQUIT: the access log is flushed), then SIGKILL after ``timeout_s``."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGQUIT)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> NginxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
