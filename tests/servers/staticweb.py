"""A :class:`~batchcrawl.testing.sampleweb.SampleWeb` written out as static files, for a real web
server (nginx) to serve in a benchmark against a peer crawler (``scripts/bench_peers.py``).

Layout: ``ROOT/HOST/PATH`` holds the body of every URL the sample web answers 200 (``/`` becomes
``ROOT/HOST/index.html``), exactly as the app renders it (same bytes, links carrying the bound
port). What a file cannot express is returned as :class:`StaticAnswers`: redirects (status and
``Location``) and statuses other than 200/404 (robots.txt answering 500); every other URL is a
404 because its file is missing. The spider-trap calendar is unbounded in the app; here it is cut
after ``calendar_years`` years (links beyond the last month are dead).

Content types follow the file name: ``.html`` (and no extension: the calendar) is HTML, ``.txt``
plain text, ``.pdf`` and ``.png`` as named; the server adds ``charset=utf-8`` to the text types,
as the app does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from batchcrawl.testing.sampleweb import TRAP_START, SampleWeb, SampleWebError

__all__ = ["StaticAnswers", "file_of", "write_static_web"]

#: Years of spider-trap calendar written (12 pages each).
DEFAULT_CALENDAR_YEARS = 50


@dataclass
class StaticAnswers:
    """Answers a static file tree cannot give, per ``(host, path)``.

    ``redirects`` maps to ``(status, location)`` (301 or 302, ``Location`` as the app sends it:
    absolute or root-relative); ``statuses`` maps to a bare status (e.g. 500 for robots.txt).
    ``files`` counts the files written and ``bytes`` their size.
    """

    redirects: dict[tuple[str, str], tuple[int, str]] = field(default_factory=dict)
    statuses: dict[tuple[str, str], int] = field(default_factory=dict)
    files: int = 0
    bytes: int = 0


def file_of(root: Path, host: str, path: str) -> Path:
    """Where the body of ``path`` (``/`` or ``/a/b.html``, no query) on ``host`` is stored."""
    rel = "index.html" if path == "/" else path.lstrip("/")
    if path.endswith("/") and path != "/":
        rel += "index.html"
    return Path(root) / host / rel


def _paths_of(web: SampleWeb, host: str, calendar_years: int) -> list[str]:
    paths = ["/robots.txt"] + [urlsplit(u).path or "/" for u in web.pages_of(host)]
    if host == web.trap_host:
        first = TRAP_START[0]
        paths += [
            f"/cal/{y:04d}/{m:02d}"
            for y in range(first, first + calendar_years)
            for m in range(1, 13)
        ]
    return paths


def write_static_web(
    web: SampleWeb, root: Path, calendar_years: int = DEFAULT_CALENDAR_YEARS
) -> StaticAnswers:
    """Write every 200 answer of ``web`` under ``root`` and return the rest.

    Parameters
    ----------
    web
        A sample web with its port bound (:meth:`SampleWeb.bind`): cross-host links carry it.
    root
        Directory to fill (created if missing); one sub-directory per host name.
    calendar_years
        Years of the spider-trap calendar to write (>= 1).

    Returns
    -------
    StaticAnswers
        Redirects and non-200/404 statuses, for the server's configuration.

    Raises
    ------
    SampleWebError
        The web has no port bound, or ``calendar_years`` < 1.
    """
    if web.port is None:
        raise SampleWebError("write_static_web: bind the web to the server's port first")
    if calendar_years < 1:
        raise SampleWebError(f"calendar_years={calendar_years}: need >= 1")
    answers = StaticAnswers()
    for spec in web.hosts:
        made: set[Path] = set()
        for path in _paths_of(web, spec.name, calendar_years):
            resp = web(spec.name, path, {})
            if resp.status == 200:
                target = file_of(root, spec.name, path)
                if target.parent not in made:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    made.add(target.parent)
                target.write_bytes(resp.body)
                answers.files += 1
                answers.bytes += len(resp.body)
            elif resp.status in (301, 302):
                location = dict(resp.headers)["Location"]
                answers.redirects[(spec.name, path)] = (resp.status, location)
            elif resp.status != 404:
                answers.statuses[(spec.name, path)] = resp.status
    return answers
