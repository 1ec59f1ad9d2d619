"""A raw-socket HTTP responder on loopback for tests that need exact bytes on the wire."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class RawServer:
    """Serves every connection on 127.0.0.1 (port chosen by the OS) with
    ``send(conn, release, head)`` after reading the request ``head`` (bytes; one request per
    connection; every head is also kept in ``heads``);
    ``release`` is an Event set when the server stops, for senders that hold the connection open
    until then."""

    def __init__(self, send: Callable[[socket.socket, threading.Event, bytes], None]) -> None:
        self.heads: list[bytes] = []
        self._send = send
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.release = threading.Event()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                data = conn.recv(4096)
                if not data:
                    return
                head += data
            self.heads.append(head)
            try:
                self._send(conn, self.release, head)
            except OSError:  # the client left (cap or deadline): expected
                pass

    def close(self) -> None:
        self.release.set()
        self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
        self._sock.close()
        self._accepting.join()
        for t in self._threads:
            t.join()
