"""The parts of ``scripts/bench_peers.py`` that can be wrong without a crawler: the static copy of
the sample web, the nginx configuration, and reading request start times from nginx's log."""

from __future__ import annotations

import http.client
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from servers.nginx import (
    NginxError,
    NginxServer,
    nginx_config,
    parse_access_log,
    pick_port,
)
from servers.staticweb import write_static_web

from batchcrawl.testing.sampleweb import SampleWeb, SampleWebError
from batchcrawl.testing.webserver import politeness_violations

needs_nginx = pytest.mark.skipif(
    shutil.which("nginx") is None and shutil.which("nginx", path="/usr/sbin") is None,
    reason="nginx is not installed (Debian package nginx-light)",
)


def test_log_start_times_are_end_minus_request_time(tmp_path: Path) -> None:
    # a.test: ends 1.2 s apart, but the second took 0.3 s: the starts are 0.9 s apart
    (tmp_path / "access.log").write_text(
        "1000.000 0.000 200 a.test /robots.txt\n"
        "1001.200 0.300 200 a.test /p?q=1\n"
        "1000.000 0.000 200 b.test /\n"
        "1001.000 0.000 404 b.test /x\n"
    )
    entries = list(parse_access_log(tmp_path / "access.log"))
    assert entries[1] == {"host": "a.test", "path": "/p?q=1", "t_ms": 1000900.0, "status": 200}
    violations = politeness_violations(entries, lambda host: 1.0, tolerance_ms=2.0)
    assert [(h, round(gap), need) for h, gap, need in violations] == [("a.test", 900, 1000.0)]


def test_a_line_in_another_format_is_named(tmp_path: Path) -> None:
    (tmp_path / "access.log").write_text('127.0.0.1 - - [01/Dec/2026] "GET / HTTP/1.1" 200\n')
    with pytest.raises(NginxError, match=r"access.log:1: not an access-log line"):
        list(parse_access_log(tmp_path / "access.log"))


def test_config_refuses_statuses_it_cannot_answer(tmp_path: Path) -> None:
    with pytest.raises(NginxError, match="unsupported statuses"):
        nginx_config(tmp_path, tmp_path, 8080, tmp_path / "a.log", statuses={("a.test", "/"): 503})


def test_static_web_needs_the_port(tmp_path: Path) -> None:
    with pytest.raises(SampleWebError, match="bind"):
        write_static_web(SampleWeb(3, 10), tmp_path)


@needs_nginx
def test_nginx_accepts_the_config(tmp_path: Path) -> None:
    server = NginxServer(
        tmp_path / "prefix",
        tmp_path / "web",
        pick_port(),
        redirects={("a.test", "/r"): (301, "http://a.test:1/x"), ("a.test", "/s"): (302, "/y")},
        statuses={("b.test", "/robots.txt"): 500},
    )
    server.check()


def _get(port: int, host: str, path: str) -> tuple[int, str | None, str | None, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": host})
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location"), resp.getheader("Content-Type"), resp.read()
    finally:
        conn.close()


@needs_nginx
def test_nginx_serves_what_the_sample_web_app_answers(tmp_path: Path) -> None:
    """Every URL of a small web (all robots kinds, extras, trap) gets from nginx the app's status,
    Location, content type and body; unknown paths and hosts get 404; each request is logged."""
    port = pick_port()
    web = SampleWeb(12, 150).bind(port)
    answers = write_static_web(web, tmp_path / "web", calendar_years=2)
    assert answers.statuses and answers.redirects  # a 500 robots.txt and the extras' redirects
    cases = [(h.name, "/robots.txt") for h in web.hosts]
    cases += [(h.name, u.split(str(port), 1)[1]) for h in web.hosts for u in web.pages_of(h.name)]
    cases += [(web.trap_host, "/cal/2024/01"), (web.trap_host, "/cal/2025/12")]
    checked = 0
    with NginxServer(tmp_path / "prefix", tmp_path / "web", port, answers.redirects,
                     answers.statuses) as server:  # fmt: skip
        for host, path in cases:
            want = web(host, path, {})
            status, location, ctype, body = _get(port, host, path)
            assert status == want.status, (host, path)
            headers = dict(want.headers)
            assert location == headers.get("Location"), (host, path)
            if status == 200:
                assert body == want.body, (host, path)
                assert ctype == headers["Content-Type"], (host, path)
            checked += 1
        assert _get(port, web.trap_host, "/cal/2026/01")[0] == 404  # past the years written
        assert _get(port, "other.test", "/")[0] == 404
    log = list(parse_access_log(server.access_log))
    assert len(log) == checked + 2
    assert [(e["host"], e["path"]) for e in log[:3]] == cases[:3]


def _bench_peers():
    spec = importlib.util.spec_from_file_location(
        "bench_peers", Path(__file__).resolve().parents[1] / "scripts" / "bench_peers.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_peers", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_tree_memory_sampler_splits_the_peak_and_counts_shared_pages_once() -> None:
    """bench_peers' sampler over a real process tree: a parent holding 64 MiB of its own memory and
    a child importing the same libraries. The RSS sum counts the libraries' pages in each
    process, PSS divides them: PSS <= RSS, the file-backed share is below the peak, and the
    parent's own 64 MiB are in both."""
    bench = _bench_peers()
    script = (
        "import subprocess, sys, time\n"
        "held = bytearray(64 << 20)\n"
        "for i in range(0, len(held), 4096): held[i] = 1\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3)'])\n"
        "time.sleep(3); child.wait()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    sampler = bench.TreeRss(proc.pid, interval_s=0.2)
    sampler.start()
    proc.wait()
    sampler.stop.set()
    sampler.join()
    assert sampler.peak >= 64 << 20 and sampler.at_peak["driver"] >= 64 << 20
    assert 0 < sampler.file_at_peak < sampler.peak
    assert 64 << 20 <= sampler.pss_peak <= sampler.peak
