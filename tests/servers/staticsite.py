"""A directory of real files served under several host names, and the pages reachable in it.

The real-input integration test crawls a real site: the Debian ``python3.11-doc`` HTML docs
(``/usr/share/doc/python3.11/html``, about 530 HTML pages and 1,000 files) served on loopback by
:class:`batchcrawl.testing.webserver.MultiHostServer` with :class:`DirectorySite` as its app.
:func:`reachable_pages` is the ground truth: it follows the files' ``href``/``src`` attributes with
lxml, independently of the crawler's parser (``batchcrawl.fetch.parse``).

How the hosts relate (decision)
-------------------------------
``hosts[0]`` (e.g. ``docs.test``) is the **primary**: it serves the whole directory. Every further
host (e.g. ``docs-mirror.test``) is a **partial mirror**: it serves only paths under
``mirror_prefix`` (default ``/tutorial/``) and answers 404 elsewhere. The primary's root index
(``/`` and ``/index.html``) gets one extra link, inserted before ``</body>`` at request time, to
``http://MIRROR:PORT/tutorial/`` on each mirror, so a crawl seeded on the primary reaches the
mirrors too. The mirror thus holds exact duplicates of the primary's tutorial pages (content
digests must match across hosts), and the mirror's relative links that leave the tutorial
(``../library/...``) are dead links (404) -- both things a crawler meets on the real web.

Serving rules: the query string is ignored; the path is percent-decoded and normalized (``..``
cannot leave ``root``); a directory is served by its ``index.html``, and a directory path without
its trailing slash is redirected (301) to the path with it; the content type comes from the file
extension (``mimetypes``; ``; charset=utf-8`` added to text types); anything else is 404.
Symbolic links are followed (Debian links ``_static/jquery.js`` to ``/usr/share/javascript``).
``/robots.txt`` is served from memory: allow everything, or ``Disallow: PREFIX`` when
``disallow`` is given (the files' own robots.txt, if any, is hidden).
"""

from __future__ import annotations

import functools
import mimetypes
import posixpath
import re
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from lxml import etree

from batchcrawl.errors import BatchcrawlError
from batchcrawl.testing.webserver import Response

__all__ = ["DEFAULT_MIRROR_PREFIX", "DirectorySite", "StaticSiteError", "reachable_pages"]

#: The part of the tree a mirror host serves.
DEFAULT_MIRROR_PREFIX = "/tutorial/"
#: Where Debian's python3.11-doc puts the HTML docs.
PYTHON_DOCS = Path("/usr/share/doc/python3.11/html")

_ROOT_INDEX = ("/", "/index.html")


class StaticSiteError(BatchcrawlError, ValueError):
    """Bad arguments for :class:`DirectorySite` or :func:`reachable_pages`."""

    exit_code = 2


def _check_args(root: Path, hosts: list[str], disallow: str | None, mirror_prefix: str) -> None:
    if not Path(root).is_dir():
        raise StaticSiteError(f"root {str(root)!r} is not a directory; pass the folder to serve")
    if not hosts or any(not h or h != h.lower() or ":" in h for h in hosts):
        raise StaticSiteError(f"hosts={hosts!r}: give one or more lower-case names without port")
    for name, prefix in (("disallow", disallow), ("mirror_prefix", mirror_prefix)):
        if prefix is not None and not prefix.startswith("/"):
            raise StaticSiteError(f"{name}={prefix!r}: a path prefix must start with '/'")
    if not mirror_prefix.endswith("/"):
        raise StaticSiteError(f"mirror_prefix={mirror_prefix!r}: a directory must end with '/'")


def _route(root: Path, primary: bool, mirror_prefix: str, path: str) -> tuple[str, str | Path]:
    """What a request for ``path`` (no query, still percent-encoded) gets.

    Returns ``("file", file_path)``, ``("redirect", location_path)`` or ``("missing", "")``.
    """
    decoded = unquote(path)
    if "\0" in decoded or not decoded.startswith("/"):
        return "missing", ""
    if not primary and not decoded.startswith(mirror_prefix):
        return "missing", ""
    norm = posixpath.normpath(decoded)  # an absolute path: ".." cannot climb above "/"
    target = root / norm.lstrip("/") if norm != "/" else root
    try:
        if target.is_dir():
            if not path.endswith("/"):
                return "redirect", path + "/"
            target = target / "index.html"
        if target.is_file():
            return "file", target
    except OSError:
        pass
    return "missing", ""


def _content_type(name: str) -> str:
    ctype = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if ctype.startswith("text/") or ctype in ("application/javascript", "application/json"):
        ctype += "; charset=utf-8"
    return ctype


def _host_url(host: str, port: int | None) -> str:
    return f"http://{host}" if port in (None, 80) else f"http://{host}:{port}"


class DirectorySite:
    """An app (``batchcrawl.testing.webserver.App``) serving ``root`` under the names ``hosts``.

    Parameters
    ----------
    root
        Directory to serve.
    hosts
        Lower-case host names without port; ``hosts[0]`` is the primary, the others partial
        mirrors (see the module docstring).
    disallow
        Path prefix the in-memory robots.txt disallows (None: allow everything).
    mirror_prefix
        Path prefix (starting and ending with ``/``) the mirror hosts serve.
    port
        Port used in the injected mirror links; None takes it from each request's ``Host`` header
        (or call :meth:`bind`).
    cache_files
        File bodies kept in memory (LRU).

    Raises
    ------
    StaticSiteError
        ``root`` is not a directory, a host name is empty or has a port, a prefix lacks its ``/``.
    """

    def __init__(
        self,
        root: Path,
        hosts: list[str],
        *,
        disallow: str | None = None,
        mirror_prefix: str = DEFAULT_MIRROR_PREFIX,
        port: int | None = None,
        cache_files: int = 1024,
    ) -> None:
        _check_args(root, hosts, disallow, mirror_prefix)
        self.root, self.hosts, self.disallow = Path(root), list(hosts), disallow
        self.mirror_prefix, self.port = mirror_prefix, port
        self._read = functools.lru_cache(maxsize=cache_files)(Path.read_bytes)

    def bind(self, port: int) -> DirectorySite:
        """Use ``port`` in injected links (the server's port); returns self."""
        self.port = port
        return self

    def robots_txt(self) -> bytes:
        """The robots.txt served on every host."""
        rule = self.disallow or ""
        return f"User-agent: *\nDisallow: {rule}\n".encode()

    def mirror_links(self, port: int | None) -> list[str]:
        """URLs the primary's root index links to on the mirrors."""
        return [_host_url(h, port) + self.mirror_prefix for h in self.hosts[1:]]

    def __call__(self, host: str, path_with_query: str, headers: Mapping[str, str]) -> Response:
        """Answer one request (``host`` lower-case without port)."""
        if host not in self.hosts:
            return _not_found()
        path = path_with_query.split("?", 1)[0]
        if path == "/robots.txt":
            return Response(200, [("Content-Type", "text/plain; charset=utf-8")], self.robots_txt())
        primary = host == self.hosts[0]
        kind, where = _route(self.root, primary, self.mirror_prefix, path)
        if kind == "redirect":
            return Response(301, [("Location", str(where)), ("Content-Type", "text/html")], b"")
        if kind == "missing":
            return _not_found()
        try:
            body = self._read(where)
        except OSError:
            return _not_found()
        if primary and path in _ROOT_INDEX and len(self.hosts) > 1:
            port = self.port if self.port is not None else _port_of(headers)
            body = _inject_links(body, self.mirror_links(port))
        return Response(200, [("Content-Type", _content_type(where.name))], body)

    def reachable(
        self,
        seed_paths: Iterable[str],
        *,
        port: int | None = None,
        tags: Collection[str] | None = None,
    ) -> set[str]:
        """:func:`reachable_pages` with this site's settings (``port`` defaults to :attr:`port`)."""
        return reachable_pages(
            self.root,
            seed_paths,
            self.hosts,
            port=self.port if port is None else port,
            disallow=self.disallow,
            mirror_prefix=self.mirror_prefix,
            tags=tags,
        )


def _not_found() -> Response:
    return Response(
        404, [("Content-Type", "text/html; charset=utf-8")], b"<h1>404 not found</h1>\n"
    )


def _port_of(headers: Mapping[str, str]) -> int | None:
    value = headers.get("Host") or ""
    tail = value.rsplit(":", 1)[-1] if ":" in value else ""
    return int(tail) if tail.isdigit() else None


def _inject_links(body: bytes, urls: list[str]) -> bytes:
    links = "".join(f'<p><a href="{u}">mirror: {u}</a></p>' for u in urls).encode()
    at = body.rfind(b"</body>")
    return body + links if at < 0 else body[:at] + links + body[at:]


def reachable_pages(
    root: Path,
    seed_paths: Iterable[str],
    hosts: list[str],
    *,
    port: int | None = None,
    disallow: str | None = None,
    mirror_prefix: str = DEFAULT_MIRROR_PREFIX,
    tags: Collection[str] | None = None,
) -> set[str]:
    """URLs answering 200 that a crawl of a :class:`DirectorySite` reaches from ``seed_paths``.

    Breadth-first over the files: every ``href`` and ``src`` attribute of every element (or only
    of elements named in ``tags``) of each HTML file reached is resolved against the page URL
    (``urllib.parse.urljoin``, RFC 3986 §5.2), its fragment and query dropped, and kept when it is
    an ``http`` URL on one of ``hosts`` with the served port. Redirects (a directory without its
    slash) are followed to their target; 404s and paths under ``disallow`` are not included. The
    primary's root index also links to the mirrors (as :class:`DirectorySite` serves it).

    Parameters
    ----------
    root
        The served directory.
    seed_paths
        Paths (``/``, ``/library/os.html``) on ``hosts[0]``.
    hosts
        The site's host names, primary first.
    port
        The server port as it appears in URLs (None: URLs without port).
    disallow, mirror_prefix
        As given to :class:`DirectorySite`.
    tags
        Element names whose links are followed (None: all elements).

    Returns
    -------
    set of str
        URLs ``http://HOST[:PORT]/PATH`` (no query, no fragment; directories end in ``/``).

    Raises
    ------
    StaticSiteError
        Bad ``root``, ``hosts`` or prefixes.
    """
    root = Path(root)
    _check_args(root, hosts, disallow, mirror_prefix)
    site = DirectorySite(root, hosts, disallow=disallow, mirror_prefix=mirror_prefix, port=port)
    bases = {_host_url(h, port): h for h in hosts}
    queue = deque(
        _host_url(hosts[0], port) + (p if p.startswith("/") else "/" + p) for p in seed_paths
    )
    seen: set[str] = set(queue)
    pages: set[str] = set()
    parser = etree.HTMLParser(recover=True, no_network=True)
    while queue:
        url = queue.popleft()
        parts = urlsplit(url)
        host = bases[f"{parts.scheme}://{parts.netloc}"]
        path = parts.path or "/"
        if disallow and path.startswith(disallow):
            continue
        kind, where = _route(root, host == hosts[0], mirror_prefix, path)
        links: list[str] = []
        if kind == "redirect":
            links = [urljoin(url, str(where))]
        elif kind == "file":
            pages.add(url)
            if _content_type(where.name).startswith("text/html"):
                links = _links_of(where, parser, tags)
                if host == hosts[0] and path in _ROOT_INDEX:
                    links += site.mirror_links(port)
        for link in {v.strip().split("#", 1)[0].split("?", 1)[0] for v in links}:
            if not link:  # "#frag" or "?q": the page itself
                continue
            target = urljoin(url, link)
            tparts = urlsplit(target)
            if f"{tparts.scheme}://{tparts.netloc}" in bases and target not in seen:
                seen.add(target)
                queue.append(target)
    return pages


def _links_of(file: Path, parser: etree.HTMLParser, tags: Collection[str] | None) -> list[str]:
    """Raw ``href``/``src`` attribute values of an HTML file, in document order."""
    data = file.read_bytes()
    if not data.strip():
        return []
    doc = etree.fromstring(data, parser)
    if doc is None:
        return []
    return _xpath_for(frozenset(tags) if tags is not None else None)(doc)


@functools.lru_cache(maxsize=16)
def _xpath_for(tags: frozenset[str] | None) -> etree.XPath:
    """A compiled XPath selecting the ``href``/``src`` attribute values (of elements in ``tags``)."""
    if tags is None:
        return etree.XPath("//@href | //@src", smart_strings=False)
    bad = [t for t in tags if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", t)]
    if bad:
        raise StaticSiteError(f"tags={sorted(tags)!r}: {bad!r} are not element names")
    expr = " | ".join(f"//{t}/@href | //{t}/@src" for t in sorted(tags))
    return etree.XPath(expr or "/nothing", smart_strings=False)
