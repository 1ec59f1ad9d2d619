"""The loopback multi-host test server: routing by Host, keep-alive, logging, misbehaviours.

Checked with the standard library's own HTTP client and raw sockets, independent of our fetcher.
"""

from __future__ import annotations

import gzip
import http.client
import shutil
import socket
import subprocess
import threading

import pytest

from batchcrawl.testing.webserver import (
    GZIP_BOMB_BYTES,
    MultiHostServer,
    Response,
)


def _conn(web: MultiHostServer, timeout: float = 5.0) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", web.port, timeout=timeout)


def _get(conn: http.client.HTTPConnection, host: str, path: str) -> http.client.HTTPResponse:
    conn.request("GET", path, headers={"Host": f"{host}:12345"})
    return conn.getresponse()


def test_routes_by_host_header_and_logs(web, host_name):
    other = "x" + host_name
    web.app.add(host_name, "/a", Response(200, [("X-Which", "one")], b"first"))
    web.app.add(other, "/a", Response(201, [("X-Which", "two")], b"second"))
    mark = web.log.mark()
    conn = _conn(web)
    r1 = _get(conn, host_name, "/a")
    assert (r1.status, r1.read(), r1.getheader("X-Which")) == (200, b"first", "one")
    r2 = _get(conn, other, "/a")
    assert (r2.status, r2.read()) == (201, b"second")
    conn.close()
    entries = web.log.since(mark)
    assert [(e.host, e.path, e.status, e.method) for e in entries] == [
        (host_name, "/a", 200, "GET"),
        (other, "/a", 201, "GET"),
    ]
    assert entries[0].t_ms <= entries[1].t_ms
    assert entries[0].conn_id == entries[1].conn_id  # one keep-alive connection
    assert web.log.for_host(host_name) == [entries[0]]
    assert web.base_url(host_name) == f"http://{host_name}:{web.port}"


def test_unregistered_path_falls_back_to_misbehaving_routes(web, host_name):
    conn = _conn(web)
    assert _get(conn, host_name, "/page").read().startswith(b"<html>")
    r = _get(conn, host_name, "/nowhere")
    assert r.status == 404
    r.read()
    conn.close()


def test_app_receives_headers_and_path_with_query(web, host_name):
    seen = {}

    def app(host, path, headers):
        seen.update(host=host, path=path, ua=headers.get("user-agent"))
        return Response(204)

    web.app.add(host_name, "/q?x=1", app)
    conn = _conn(web)
    conn.request("GET", "/q?x=1", headers={"Host": host_name.upper(), "User-Agent": "t/1"})
    r = conn.getresponse()
    assert r.status == 204 and r.read() == b""
    conn.close()
    assert seen == {"host": host_name, "path": "/q?x=1", "ua": "t/1"}


def test_head_has_no_body(web, host_name):
    web.app.add(host_name, "/h", Response(200, [], b"body!"))
    conn = _conn(web)
    conn.request("HEAD", "/h", headers={"Host": host_name})
    r = conn.getresponse()
    assert r.getheader("Content-Length") == "5" and r.read() == b""
    conn.close()


def test_reset_sends_nothing(web, host_name):
    mark = web.log.mark()
    conn = _conn(web)
    with pytest.raises((ConnectionError, http.client.RemoteDisconnected)):
        _get(conn, host_name, "/reset")
    conn.close()
    assert [e.status for e in web.log.since(mark)] == [None]


def test_truncate_announces_more_than_it_sends(web, host_name):
    conn = _conn(web)
    r = _get(conn, host_name, "/truncated?size=1000")
    assert int(r.getheader("Content-Length")) > 1000
    with pytest.raises(http.client.IncompleteRead) as info:
        r.read()
    assert len(info.value.partial) == 1000
    conn.close()


def test_chunked_transfer_coding(web, host_name):
    conn = _conn(web)
    r = _get(conn, host_name, "/chunked?size=2500")
    assert r.getheader("Transfer-Encoding") == "chunked"
    assert r.getheader("Content-Length") is None
    assert len(r.read()) == 2500
    conn.close()


def test_gzip_bomb_is_small_and_inflates_to_many_megabytes(web, host_name):
    conn = _conn(web)
    r = _get(conn, host_name, "/gzip-bomb")
    raw = r.read()
    conn.close()
    assert r.getheader("Content-Encoding") == "gzip"
    assert len(raw) < GZIP_BOMB_BYTES // 500
    assert len(gzip.decompress(raw)) == GZIP_BOMB_BYTES


def test_huge_streams_until_the_client_leaves(web, host_name):
    conn = _conn(web)
    r = _get(conn, host_name, "/huge")
    got = 0
    while got < 3_000_000:
        got += len(r.read(65536))
    conn.close()
    assert got >= 3_000_000


def test_slow_answers_eventually(web, host_name):
    conn = _conn(web)
    r = _get(conn, host_name, "/slow?delay=0.05&size=100")
    assert r.status == 200 and len(r.read()) == 100
    conn.close()


def test_unknown_behaviour_is_rejected():
    with pytest.raises(ValueError, match="behaviour"):
        Response(behaviour="explode")


def test_stop_interrupts_sleeping_handlers_and_closes_connections():
    entered = threading.Event()

    def app(host, path, headers):
        entered.set()
        return Response(200, [], b"late", "slow", 60.0)

    server = MultiHostServer(app).start()
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(b"GET /sleep HTTP/1.1\r\nHost: a.test\r\n\r\n")
    assert entered.wait(10)
    server.stop()  # must not wait out the 60 s sleep
    while sock.recv(4096):
        pass
    sock.close()
    assert server.connections == 0  # a stopped server reports nothing
    with pytest.raises(RuntimeError):
        _ = server.port


def _listen_backlog(port: int) -> int:
    """The accept-queue capacity (backlog) of the socket listening on 127.0.0.1:``port``, as the
    kernel reports it (``ss``: a LISTEN socket's Send-Q is its backlog, after the
    ``net.core.somaxconn`` cap)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                         check=True).stdout.split()  # fmt: skip
    assert out[0] == "LISTEN" and out[3] == f"127.0.0.1:{port}", out
    return int(out[2])


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_listen_backlog_takes_a_burst_of_new_connections():
    """A crawler's fetch threads open connections to many new hosts at once (a round's first
    contacts). socketserver's backlog of 5 made the kernel drop the SYNs past it, and each of
    those clients waited 1 s or more (TCP's initial retransmission timeout): the harness, not the
    crawler, was slow. The listening socket must queue a burst of 64 unaccepted connections."""
    from batchcrawl.testing.webserver import _Server

    server = _Server(("127.0.0.1", 0), lambda host, path, headers: Response(200, [], b""))
    try:
        assert _listen_backlog(server.server_address[1]) >= 64
    finally:
        server.server_close()
