"""Before a command waits on a Dask scheduler (``--scheduler``, ``round.scheduler``): one TCP
connection attempt to its address and the first bytes of the scheduler's handshake, so that a
scheduler that is not there is said at once instead of after ``round.connect_timeout_s`` seconds of
silence (issue 34: 30 s), something else listening there (a wrong port) is said within that
timeout instead of a wait without end, and a slow answer is announced on stderr while the client
waits.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from batchcrawl.errors import ClusterUnreachable

#: Longest wait of the probe itself, seconds (the client then waits up to its own timeout).
PROBE_S = 2.0


def probe_scheduler(address: str, timeout_s: float, say: Callable[[str], None]) -> None:
    """Try a TCP connection to the scheduler at ``address`` (``tcp://host:port``; other schemes --
    ``tls://``, ``inproc://`` ... -- are left to the client), for at most :data:`PROBE_S` or
    ``timeout_s`` seconds. A refused connection or an unknown host raises at once; no answer yet
    calls ``say`` with a line saying how long the client will wait.

    Raises
    ------
    ClusterUnreachable
        Nothing listens at the address, or its host name does not resolve. The message names the
        address and what to check.
    """
    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme != "tcp" or parts.hostname is None or parts.port is None:
        return
    try:
        sock = socket.create_connection((parts.hostname, parts.port), min(PROBE_S, timeout_s))
    except (ConnectionRefusedError, socket.gaierror) as exc:
        why = "connection refused" if isinstance(exc, ConnectionRefusedError) else exc.strerror
        raise ClusterUnreachable(
            f"cannot reach the Dask scheduler at {address} ({why}); check that it runs "
            "(dask scheduler) and the address (--scheduler, round.scheduler)"
        ) from None
    except OSError:  # no answer yet (a timeout, an unreachable network): the client keeps trying
        say(
            f"batchcrawl: the Dask scheduler at {address} does not answer yet; waiting up to "
            f"{timeout_s:g} s (round.connect_timeout_s)"
        )
        return
    with sock:
        _await_handshake(sock, address, timeout_s, say)


def _await_handshake(
    sock: socket.socket, address: str, timeout_s: float, say: Callable[[str], None]
) -> None:
    """Wait up to ``timeout_s`` seconds for the first bytes of the scheduler's handshake on the
    connected ``sock``: a Dask server writes its handshake as soon as it accepts a connection
    (``distributed.comm.core.Listener.on_connection``). Something else that accepts and then
    says nothing (an HTTP server, a wrong port) made the client wait forever, past
    ``round.connect_timeout_s`` (a fresh-user trial, issue 34).

    Raises
    ------
    ClusterUnreachable
        The peer closed the connection or sent nothing within ``timeout_s``."""
    first_s = min(PROBE_S, timeout_s)
    for i, wait_s in enumerate((first_s, timeout_s - first_s)):  # the 2nd after a "not yet" line
        if wait_s <= 0:
            break
        sock.settimeout(wait_s)
        try:
            if sock.recv(1):
                return
            break  # the peer closed the connection: no Dask server
        except TimeoutError:
            if i == 0 and timeout_s > first_s:
                say(
                    f"batchcrawl: the Dask scheduler at {address} does not answer yet; waiting "
                    f"up to {timeout_s:g} s (round.connect_timeout_s)"
                )
        except OSError:  # reset by the peer
            break
    raise ClusterUnreachable(
        f"{address} accepts connections but did not answer as a Dask scheduler within "
        f"{timeout_s:g} s (round.connect_timeout_s); check the address and port (a Dask "
        "scheduler listens on 8786 by default; 8787 is its dashboard) and that the scheduler "
        "is not overloaded"
    )
