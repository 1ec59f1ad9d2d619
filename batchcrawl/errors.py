"""The exception hierarchy of batchcrawl.

Every error the library raises on purpose derives from :class:`BatchcrawlError`, so a caller can catch
one type. Errors caused by bad input (a config value, a URL, a crawl directory that is not one) also
derive from :class:`ValueError`, like ``requests.exceptions.InvalidURL``; their messages name the file,
line, key or URL and say how to fix it.

Each class carries ``exit_code``: the process exit status the CLI uses for it (documented in the README).
"""

from __future__ import annotations


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (the class name when it has none): what a one-line
    error quotes of the error it replaces (a DuckDB, pyarrow or socket error's text runs on)."""
    return (str(exc).splitlines() or [type(exc).__name__])[0]


class BatchcrawlError(Exception):
    """Root of all batchcrawl errors. ``exit_code`` is the CLI exit status (default 1); ``label``
    the word the CLI prints before the message (``batchcrawl: error: ...``; empty for states that
    are not failures)."""

    exit_code = 1
    label = "error"


class ConfigError(BatchcrawlError, ValueError):
    """A configuration key is unknown or its value is invalid (exit code 2).

    The message names the key, where the value came from (file and line, environment variable, or
    ``--set``) and what was expected.
    """

    exit_code = 2


class InvalidURL(BatchcrawlError, ValueError):
    """A URL cannot be parsed or canonicalized (not http/https, no host, bad characters)."""

    exit_code = 2


class CrawlDirError(BatchcrawlError, ValueError):
    """A crawl directory is missing, not a crawl, already exists, or its manifests are malformed
    (exit code 3)."""

    exit_code = 3


class SchemaError(BatchcrawlError, ValueError):
    """A table written to the crawl directory does not match its schema in ``storage/schema.sql``."""

    exit_code = 3


class LockedError(BatchcrawlError):
    """Another live writer holds the crawl's lock (exit code 4). The message names its owner."""

    exit_code = 4


class CommitConflict(BatchcrawlError):
    """The next generation's manifest was published by someone else first (exit code 4)."""

    exit_code = 4


class NothingDue(BatchcrawlError):
    """The frontier has no URL due for fetching: the round has nothing to do (exit code 75).

    Not a failure: Airflow's task maps it to a skip. The message says when the next URL is due.
    """

    exit_code = 75
    label = ""


class ClusterUnreachable(BatchcrawlError):
    """The Dask scheduler given by ``--scheduler`` / ``round.scheduler`` did not answer within
    ``round.connect_timeout_s`` seconds (exit code 1). The message names the address."""


class WorkerLost(BatchcrawlError):
    """A Dask worker died or stopped answering during a round (exit code 5): nothing of the round
    was committed, the last generation is intact, and a rerun does the round again."""

    exit_code = 5


class SQLError(BatchcrawlError, ValueError):
    """A query passed to ``batchcrawl sql`` failed or tried to write (exit code 2)."""

    exit_code = 2


class WarcError(BatchcrawlError):
    """A WARC file cannot be written or a record cannot be read back at the given location."""


class Stopped(BatchcrawlError):
    """The command was stopped by a signal: 130 after SIGINT (Ctrl-C), 143 after SIGTERM
    (``128 + signal number``). The message says what was committed and what was not."""

    exit_code = 130
    label = ""

    def __init__(self, message: str, exit_code: int = 130) -> None:
        super().__init__(message)
        self.exit_code = exit_code
