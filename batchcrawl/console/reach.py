"""Before a command waits on a Dask scheduler (``--scheduler``, ``round.scheduler``): one TCP
connection attempt to its address, so that a scheduler that is not there is said at once instead of
after ``round.connect_timeout_s`` seconds of silence (issue 34: 30 s), and a slow answer is
announced on stderr while the client waits.
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
        with socket.create_connection((parts.hostname, parts.port), min(PROBE_S, timeout_s)):
            return
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
