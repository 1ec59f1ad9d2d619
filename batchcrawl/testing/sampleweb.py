"""A deterministic multi-host test web, served on loopback, with its ground truth.

:class:`SampleWeb` is an *app* for :class:`batchcrawl.testing.webserver.MultiHostServer`
(``app(host, path_with_query, request_headers) -> Response``). It stands in for the web in tests,
the demo and the benchmarks (docs/design.md §10): every host is named ``hNNNN.test`` and served by one
loopback server that routes on the ``Host`` header (the crawler resolves ``*.test`` to 127.0.0.1
through its override map).

What the web contains
---------------------
* ``hosts`` hosts with power-law (Zipf, exponent ``zipf_exponent``) page counts summing to exactly
  ``pages`` (each host has at least one page): host ``h0001.test`` is the largest. Content pages
  are ``/`` (page 0, the home page) and ``/sK/pI.html`` (page ``I``, section ``K = I % sections``).
* Links on a content page (about ``links_per_page``): a **menu** shared by every page of the host
  (``menu_links`` links: the home page and a fixed sample of pages), **tree** links (page ``I``
  links to pages ``I*8+1 .. I*8+8``: every page is reachable from its host's home page), random
  same-host links, and ``cross_host_fraction`` of the links to random pages of other hosts (host
  chosen in proportion to its size). Home pages also link to two real external sites
  (:data:`EXTERNAL_LINKS`): the crawl's scope and address policy must keep the crawl on loopback.
* robots.txt variants (:data:`ROBOTS_KINDS`): hosts 1-5 are ``allow``, ``disallow`` (subtree
  ``/s1/``), ``delay`` (``Crawl-delay: N``, N in 1..3 s), ``404`` and ``500`` (RFC 9309 §2.3.1.4:
  the crawler must then assume everything disallowed); later hosts draw a kind at random
  (:data:`ROBOTS_WEIGHTS`).
* Every ``extras_every``-th host (``h0001``, ``h0011``, ...) has, linked from its home page, the
  URLs of :data:`EXTRA_PATHS` (the second and third hops of the chain and of the loop are reached
  only by following the redirects): a 301 (absolute ``Location``) and a 302 (relative ``Location``), a
  chain of 3 redirects, a 2-URL redirect loop, two dead links (404), an exact duplicate and a
  near-duplicate of a page, a PDF-like binary, a plain-text file and a PNG image (linked by ``<img
  src>`` and by ``<a href>``).
* With ``trap=True`` the last host is a **spider trap**: its home page links to ``/cal/2024/01``,
  and every ``/cal/YYYY/MM`` page links to the next month and to the same month next year, for
  ever. Every link of a calendar page points to a later month, so the trap grows only through new
  URLs; only depth limits or per-host budgets stop a crawler in it. Calendar pages differ only in
  their digits (near-duplicates once digits are masked).

Ports (decision)
----------------
Links inside one host are root-relative (``/s1/p7.html``) and do not depend on the port. Links to
other hosts and the absolute 301 ``Location`` must carry the port, which is known only once the
server listens: they are rendered at request time with the port given by ``port=``/:meth:`bind`,
or, when none is set, with the port of the request's ``Host`` header. A rendered body is cached in
a bounded LRU keyed by ``(host, page, port)``, so repeated fetches cost a dict lookup.

Ground truth (for tests and benchmarks) is in URLs, in the crawl's canonical form
(``http://h0001.test:PORT/s1/p7.html``), and needs the port: :meth:`seeds`, :meth:`pages_of`,
:meth:`allowed_pages`, :meth:`crawl_delay`, :meth:`reachable`, :meth:`politeness_bound`,
:meth:`kind_of`.

Cost: the constructor draws only the link graph with numpy (50,000 pages x 60 links in well under
a second); bodies are assembled on request from slices of one shared pseudo-text, a few tens of
microseconds per 20 KB page.
"""

from __future__ import annotations

import functools
import math
import re
import struct
import threading
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np

from batchcrawl.errors import BatchcrawlError
from batchcrawl.testing.webserver import Response

__all__ = [
    "EXTERNAL_LINKS",
    "EXTRA_PATHS",
    "ROBOTS_KINDS",
    "HostSpec",
    "SampleWeb",
    "SampleWebError",
]

#: robots.txt variants, in the order hosts 1-5 get them.
ROBOTS_KINDS = ("allow", "disallow", "delay", "404", "500")
#: Probabilities of the variants for hosts after the fifth (same order as ROBOTS_KINDS).
ROBOTS_WEIGHTS = (0.55, 0.15, 0.10, 0.15, 0.05)
#: The subtree disallowed by hosts of kind ``disallow``.
DISALLOWED_PREFIX = "/s1/"
#: Real sites linked from every home page; a crawl must never request them.
EXTERNAL_LINKS = ("https://www.python.org/", "http://example.com/")
#: Special URLs of an extras host and their kind (see :meth:`SampleWeb.kind_of`).
EXTRA_PATHS = {
    "/r/301": "redirect",
    "/r/302": "redirect",
    "/r/chain/1": "redirect",
    "/r/chain/2": "redirect",
    "/r/chain/3": "redirect",
    "/r/loop/a": "redirect",
    "/r/loop/b": "redirect",
    "/dead/1": "dead",
    "/dead/2": "dead",
    "/dup/copy.html": "duplicate",
    "/near/copy.html": "near_duplicate",
    "/files/report.pdf": "pdf",
    "/files/notes.txt": "text",
    "/img/logo.png": "image",
}
#: Extras reached only through a redirect (not linked from the home page).
_HIDDEN = frozenset({"/r/chain/2", "/r/chain/3", "/r/loop/b"})
TRAP_START = (2024, 1)
FANOUT = 8  # tree children per page

_PAGE_RE = re.compile(r"/s(\d+)/p(\d+)\.html")
_CAL_RE = re.compile(r"/cal/(\d{4,})/(\d\d)")
_HTML = "text/html; charset=utf-8"


class SampleWebError(BatchcrawlError, ValueError):
    """Bad parameters for :class:`SampleWeb`, or ground truth asked for before the port is known."""

    exit_code = 2


@dataclass(frozen=True)
class HostSpec:
    """One host of a :class:`SampleWeb`.

    ``size`` counts its content pages (``/`` and ``/sK/pI.html``; 1 for the trap host, whose
    calendar is unbounded); ``offset`` is the global id of its home page; ``crawl_delay_s`` is set
    only for robots kind ``delay``.
    """

    name: str
    index: int
    size: int
    offset: int
    robots: str
    crawl_delay_s: float | None
    extras: bool
    trap: bool


def page_path(local: int, sections: int) -> str:
    """Path of content page ``local`` of a host: ``/`` for 0, else ``/sK/pI.html``."""
    return "/" if local == 0 else f"/s{local % sections}/p{local}.html"


def _cal_path(year: int, month: int) -> str:
    return f"/cal/{year:04d}/{month:02d}"


def _cal_next(year: int, month: int) -> list[tuple[int, int]]:
    nxt = (year + 1, 1) if month == 12 else (year, month + 1)
    return [nxt, (year + 1, month)]


class SampleWeb:
    """A seeded, lazily rendered multi-host web; callable as a ``MultiHostServer`` app.

    Parameters
    ----------
    hosts
        Number of hosts H (>= 1; >= 2 with ``trap``), named ``h0001.test`` ... .
    pages
        Total content pages N over all hosts (>= H).
    seed
        Seed of every random choice: equal arguments give an identical web.
    port
        Port the server listens on, if already known (else call :meth:`bind` or let each request's
        ``Host`` header supply it).
    links_per_page
        Target number of links on a content page (menu + tree + random + cross-host).
    menu_links
        Links of the per-host menu repeated on every page of the host.
    page_bytes
        Target size of a content page body, bytes.
    cross_host_fraction
        Share of a page's links that go to other hosts.
    zipf_exponent
        Exponent s of the host sizes, size of the r-th host ~ 1 / r**s.
    extras_every
        Every this-many-th host gets the :data:`EXTRA_PATHS` (0: none).
    trap
        Make the last host the calendar spider trap.
    sections
        Number of ``/sK/`` subtrees per host (>= 2; ``/s1/`` is the disallowed one).
    cache_pages
        Rendered bodies kept in the LRU cache.

    Raises
    ------
    SampleWebError
        A parameter is out of range (the message names it).
    """

    def __init__(
        self,
        hosts: int,
        pages: int,
        seed: int = 0,
        port: int | None = None,
        *,
        links_per_page: int = 60,
        menu_links: int = 10,
        page_bytes: int = 20_000,
        cross_host_fraction: float = 0.1,
        zipf_exponent: float = 1.0,
        extras_every: int = 10,
        trap: bool = True,
        sections: int = 4,
        cache_pages: int = 4096,
    ) -> None:
        _check(hosts >= (2 if trap else 1), f"hosts={hosts}: need >= 1 (>= 2 with trap=True)")
        _check(pages >= hosts, f"pages={pages}: need at least one page per host (>= {hosts})")
        _check(menu_links >= 1 and links_per_page >= menu_links, "need 1 <= menu_links <= links")
        _check(0.0 <= cross_host_fraction <= 1.0, "cross_host_fraction must be in [0, 1]")
        _check(sections >= 2, f"sections={sections}: need >= 2 (/s1/ is the disallowed subtree)")
        _check(page_bytes >= 0 and cache_pages >= 1, "page_bytes >= 0 and cache_pages >= 1")
        self.seed, self.port, self.sections, self.page_bytes = seed, port, sections, page_bytes
        rng = np.random.default_rng(seed)
        self.hosts: list[HostSpec] = _make_hosts(
            rng, hosts, pages, zipf_exponent, extras_every, trap
        )
        self._by_name = {h.name: h for h in self.hosts}
        self._sizes = np.array([h.size for h in self.hosts], dtype=np.int64)
        self._offsets = np.array([h.offset for h in self.hosts], dtype=np.int64)
        total = int(self._sizes.sum())
        self._host_of = np.repeat(np.arange(hosts, dtype=np.int64), self._sizes)
        self._host_list: list[int] = self._host_of.tolist()
        self._offset_list: list[int] = self._offsets.tolist()
        self._names = [h.name for h in self.hosts]
        self._menus = _make_menus(rng, self._sizes, self._offsets, menu_links)
        n_cross = round(links_per_page * cross_host_fraction) if hosts > 1 else 0
        n_same = max(0, links_per_page - menu_links - n_cross - 1)
        self._links = _make_links(rng, self._host_of, self._sizes, self._offsets, n_same, n_cross)
        self._extra_targets = {
            h.index: rng.integers(0, h.size, size=4).tolist() for h in self.hosts if h.extras
        }
        self.trap_host: str | None = self.hosts[-1].name if trap else None
        self._allowed = np.ones(total, dtype=bool)
        for h in self.hosts:
            if h.robots == "500":
                self._allowed[h.offset : h.offset + h.size] = False
            elif h.robots == "disallow":
                local = np.arange(h.size)
                self._allowed[h.offset : h.offset + h.size] = (local % sections) != 1
        self._render = functools.lru_cache(maxsize=cache_pages)(self._render_uncached)

    # -- configuration -------------------------------------------------------------------------

    def bind(self, port: int) -> SampleWeb:
        """Set the port links and ground-truth URLs use (the server's :attr:`port`); returns self."""
        self.port = port
        self._render.cache_clear()
        return self

    def host(self, name: str) -> HostSpec:
        """The :class:`HostSpec` of host ``name``. Raises SampleWebError for an unknown host."""
        try:
            return self._by_name[name]
        except KeyError:
            raise SampleWebError(f"host {name!r} is not part of this SampleWeb") from None

    def url(self, host: str, path: str) -> str:
        """Canonical URL ``http://HOST:PORT/PATH`` (``:80`` omitted) of a path on one of our hosts."""
        if self.port is None:
            raise SampleWebError("the port is unknown: pass port= or call bind(server.port) first")
        return f"http://{host}{'' if self.port == 80 else f':{self.port}'}{path}"

    # -- serving --------------------------------------------------------------------------------

    def __call__(self, host: str, path_with_query: str, headers: Mapping[str, str]) -> Response:
        """Answer one request (the ``App`` signature of ``batchcrawl.testing.webserver``).

        The query string is ignored (as many real sites do); unknown hosts and paths get 404.
        """
        spec = self._by_name.get(host)
        if spec is None:
            return _not_found()
        path = path_with_query.split("?", 1)[0]
        port = self.port if self.port is not None else _port_of(headers)
        if path == "/robots.txt":
            return _robots(spec)
        local = self._content_local(spec, path)
        if local is not None:
            return Response(200, [("Content-Type", _HTML)], self._render(spec.index, local, port))
        if spec.trap:
            m = _CAL_RE.fullmatch(path)
            if m and int(m[1]) >= TRAP_START[0] and 1 <= int(m[2]) <= 12:
                body = self._render(spec.index, (int(m[1]), int(m[2])), port)
                return Response(200, [("Content-Type", _HTML)], body)
        if spec.extras and path in EXTRA_PATHS:
            return self._extra(spec, path, port)
        return _not_found()

    def _content_local(self, spec: HostSpec, path: str) -> int | None:
        """Local page number of a content-page path of ``spec``, or None."""
        if path == "/":
            return 0
        m = _PAGE_RE.fullmatch(path)
        if m is None:
            return None
        local = int(m[2])
        if 0 < local < spec.size and path == page_path(local, self.sections):
            return local
        return None

    def _extra(self, spec: HostSpec, path: str, port: int | None) -> Response:
        kind = EXTRA_PATHS[path]
        if kind == "redirect":
            status, target = self._redirects(spec)[path]
            if path == "/r/301":
                target = f"http://{spec.name}{'' if port in (None, 80) else f':{port}'}{target}"
            return Response(status, [("Location", target), ("Content-Type", _HTML)], b"")
        if kind == "dead":
            return _not_found()
        if kind in ("duplicate", "near_duplicate"):
            key = (
                self._extra_targets[spec.index][3] if kind == "duplicate" else ("near", spec.index)
            )
            return Response(200, [("Content-Type", _HTML)], self._render(spec.index, key, port))
        return Response(200, [("Content-Type", _FILE_TYPES[kind])], _file_body(kind, self.seed))

    def _redirects(self, spec: HostSpec) -> dict[str, tuple[int, str]]:
        a, b, c, _ = (page_path(i, self.sections) for i in self._extra_targets[spec.index])
        return {
            "/r/301": (301, a),  # made absolute at request time
            "/r/302": (302, b),
            "/r/chain/1": (302, "/r/chain/2"),
            "/r/chain/2": (301, "/r/chain/3"),
            "/r/chain/3": (302, c),
            "/r/loop/a": (302, "/r/loop/b"),
            "/r/loop/b": (302, "/r/loop/a"),
        }

    # -- rendering -------------------------------------------------------------------------------

    def _href(self, from_host: int, to_host: int, path: str, port: int | None) -> str:
        if from_host == to_host:
            return path
        name = self.hosts[to_host].name
        return f"http://{name}{'' if port in (None, 80) else f':{port}'}{path}"

    def _render_uncached(self, h: int, key: int | tuple, port: int | None) -> bytes:
        """Body of content page ``key`` (int), calendar page ``(year, month)`` or the near
        duplicate ``("near", h)`` of host ``h``."""
        spec = self.hosts[h]
        near = isinstance(key, tuple) and key[0] == "near"
        if near:
            key = self._extra_targets[h][3]
        if isinstance(key, tuple):
            return self._render_calendar(spec, key, port)
        gid = spec.offset + key
        targets = self._out_gids_many(np.array([gid])).tolist()
        n_menu = int((self._menus[h] >= 0).sum())
        items = self._lis(h, targets, port)
        menu_html, body_html = items[:n_menu], items[n_menu:]
        title = f"{spec.name} page {key}"
        head = [
            f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>{title}</title>"
            f"</head><body><nav><ul>"
        ]
        head += menu_html
        head.append(f"</ul></nav><main><h1>{title}</h1>")
        tail = [f"</main><footer><p>{'revision 2' if near else 'revision 1'}</p><ul>"]
        for to_host, path, text in self._home_links(spec) if key == 0 else ():
            href = path if to_host is None else self._href(h, to_host, path, port)
            tail.append(f'<li><a href="{href}">{text}</a></li>')
        if key == 0 and spec.extras:
            tail.append('<li><img src="/img/logo.png" alt="logo"></li>')
        tail.append("</ul></footer></body></html>\n")
        link_html = [body_html[i::4] for i in range(4)]
        used = sum(map(len, head)) + sum(map(len, tail)) + sum(map(len, body_html))
        text_len = max(0, self.page_bytes - used - 4 * 20) // 4
        out = head
        for i in range(4):
            out.append(f"<p>{self._text(gid * 4 + i, text_len)}</p><ul>")
            out += link_html[i]
            out.append("</ul>")
        out += tail
        return "".join(out).encode()

    def _render_calendar(self, spec: HostSpec, ym: tuple[int, int], port: int | None) -> bytes:
        year, month = ym
        links = [("/", "home")] + [(_cal_path(y, m), f"{y:04d}-{m:02d}") for y, m in _cal_next(*ym)]
        lis = "".join(f'<li><a href="{p}">{t}</a></li>' for p, t in links)
        # one text per host: calendar pages differ only in digits, as real ones do
        text = self._text(spec.offset * 4, max(0, self.page_bytes // 4))
        return (
            f"<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>calendar "
            f"{year:04d}-{month:02d}</title></head><body><h1>{year:04d}-{month:02d}</h1>"
            f"<ul>{lis}</ul><p>{text}</p></body></html>\n"
        ).encode()

    def _lis(self, h: int, gids: list[int], port: int | None) -> list[str]:
        """``<li><a href=...>`` items linking content pages ``gids`` from host ``h`` (hot path:
        plain Python lists, no numpy scalars)."""
        host_of, offsets, names, sec = (
            self._host_list,
            self._offset_list,
            self._names,
            self.sections,
        )
        colon = "" if port in (None, 80) else f":{port}"
        out = []
        for g in gids:
            to = host_of[g]
            local = g - offsets[to]
            path = "/" if local == 0 else f"/s{local % sec}/p{local}.html"
            if to != h:
                path = f"http://{names[to]}{colon}{path}"
            out.append(f'<li><a href="{path}">page {local}</a></li>')
        return out

    def _home_links(self, spec: HostSpec) -> list[tuple[int | None, str, str]]:
        """Extra links of a home page: (target host index or None for external, path/URL, text)."""
        links: list[tuple[int | None, str, str]] = []
        if spec.extras:
            links += [
                (spec.index, p, p.rsplit("/", 1)[-1]) for p in EXTRA_PATHS if p not in _HIDDEN
            ]
        if spec.trap:
            links.append((spec.index, _cal_path(*TRAP_START), "calendar"))
        if spec.index == 0 and self.trap_host is not None:
            links.append((len(self.hosts) - 1, "/", "calendar site"))
        links += [(None, u, u) for u in EXTERNAL_LINKS]
        return links

    def _text(self, n: int, length: int) -> str:
        corpus = _corpus(self.seed)
        if length <= 0:
            return ""
        length = min(length, len(corpus) // 2)
        start = (n * 2_654_435_761 + self.seed * 97) % (len(corpus) - length)
        return corpus[start : start + length]

    # -- the graph ---------------------------------------------------------------------------------

    def _node(self, h: int, path: str) -> int | tuple[int, str]:
        """Global id of a content page, else ``(host index, path)``."""
        local = self._content_local(self.hosts[h], path)
        return self.hosts[h].offset + local if local is not None else (h, path)

    def _special_out(self, node: tuple[int, str]) -> list[int | tuple[int, str]]:
        h, path = node
        spec = self.hosts[h]
        m = _CAL_RE.fullmatch(path)
        if spec.trap and m:
            return [spec.offset] + [(h, _cal_path(*ym)) for ym in _cal_next(int(m[1]), int(m[2]))]
        kind = EXTRA_PATHS.get(path) if spec.extras else None
        if kind == "redirect":
            return [self._node(h, self._redirects(spec)[path][1])]
        if kind in ("duplicate", "near_duplicate"):
            src = spec.offset + self._extra_targets[h][3]
            return [int(g) for g in self._out_gids_many(np.array([src]))] + self._home_out(src)
        return []

    def _home_out(self, gid: int) -> list[int | tuple[int, str]]:
        h = int(self._host_of[gid])
        if gid != self.hosts[h].offset:
            return []
        out: list[int | tuple[int, str]] = []
        for to, path, _ in self._home_links(self.hosts[h]):
            if to is not None:
                out.append(self._node(to, path))
        return out

    def _is_allowed(self, node: int | tuple[int, str]) -> bool:
        if isinstance(node, int):
            return bool(self._allowed[node])
        spec = self.hosts[node[0]]
        if spec.robots == "500":
            return False
        return not (spec.robots == "disallow" and node[1].startswith(DISALLOWED_PREFIX))

    # -- ground truth ------------------------------------------------------------------------------

    def seeds(self, count: int | None = None) -> list[str]:
        """Home-page URLs of the first ``count`` hosts (all hosts when None), largest host first."""
        return [self.url(h.name, "/") for h in self.hosts[:count]]

    def _finite_paths(self, spec: HostSpec) -> list[str]:
        paths = [page_path(i, self.sections) for i in range(spec.size)]
        return paths + (list(EXTRA_PATHS) if spec.extras else [])

    def pages_of(self, host: str) -> list[str]:
        """URLs of every page ``host`` links to itself: content pages, then the extras (any status
        and type). For the trap host only the finite part (its home page) -- its calendar is
        unbounded (see :meth:`reachable`)."""
        spec = self.host(host)
        return [self.url(host, p) for p in self._finite_paths(spec)]

    def allowed_pages(self, host: str) -> list[str]:
        """The URLs of :meth:`pages_of` that the host's robots.txt lets a crawler fetch (RFC 9309:
        404 allows all, 500 disallows all)."""
        spec = self.host(host)
        return [
            self.url(host, p) for p in self._finite_paths(spec) if self._is_allowed((spec.index, p))
        ]

    def crawl_delay(self, host: str) -> float | None:
        """The ``Crawl-delay`` of ``host``'s robots.txt in seconds, or None when it sets none."""
        return self.host(host).crawl_delay_s

    def polite_delay(self, host: str, host_delay_s: float, max_crawl_delay_s: float) -> float:
        """The least gap in seconds a polite crawler keeps between two requests to ``host``: the
        crawler's ``host_delay_s``, raised by the host's robots.txt Crawl-delay up to
        ``max_crawl_delay_s``. Hosts not in this web get ``host_delay_s``."""
        try:
            crawl_delay = self.crawl_delay(host) or 0.0
        except SampleWebError:
            crawl_delay = 0.0
        return max(host_delay_s, min(crawl_delay, max_crawl_delay_s))

    def kind_of(self, url: str) -> str:
        """What ``url`` is: ``page``, ``calendar``, ``robots``, ``external`` (not one of our hosts),
        ``missing`` (404 on our host) or a kind of :data:`EXTRA_PATHS` (``redirect``, ``dead``,
        ``duplicate``, ``near_duplicate``, ``pdf``, ``text``, ``image``)."""
        parts = urlsplit(url)
        spec = self._by_name.get(parts.hostname or "")
        if spec is None:
            return "external"
        path = parts.path or "/"
        if path == "/robots.txt":
            return "robots"
        if self._content_local(spec, path) is not None:
            return "page"
        m = _CAL_RE.fullmatch(path)
        if spec.trap and m and int(m[1]) >= TRAP_START[0] and 1 <= int(m[2]) <= 12:
            return "calendar"
        if spec.extras and path in EXTRA_PATHS:
            return EXTRA_PATHS[path]
        return "missing"

    def reachable(
        self,
        from_seeds: Iterable[str] | None = None,
        respect_robots: bool = True,
        max_depth: int = 20,
    ) -> set[str]:
        """URLs a breadth-first crawl from ``from_seeds`` fetches within ``max_depth`` hops.

        A seed has depth 0; an ``<a href>``/``<img src>`` link or a redirect ``Location`` adds one
        hop (redirect targets are new frontier entries, docs/design.md §6). Only URLs on our hosts count
        (external links are never fetched). With ``respect_robots`` a URL its host's robots.txt
        disallows is neither included nor followed. Every fetched URL is included whatever its
        status or type (filter with :meth:`kind_of`). ``max_depth`` keeps the trap finite.

        Parameters
        ----------
        from_seeds
            Seed URLs (default :meth:`seeds`); seeds on other hosts are ignored.
        respect_robots
            Apply each host's robots.txt.
        max_depth
            Largest depth included (>= 0); the crawl config's ``filters.max_depth``.
        """
        _check(max_depth >= 0, f"max_depth={max_depth}: need >= 0")
        seeds = self.seeds() if from_seeds is None else list(from_seeds)
        visited = np.zeros(len(self._host_of), dtype=bool)
        seen: set[tuple[int, str]] = set()
        front_g: list[int] = []
        front_s: list[tuple[int, str]] = []

        def admit(nodes: Iterable[int | tuple[int, str]]) -> None:
            for n in nodes:
                if respect_robots and not self._is_allowed(n):
                    continue
                if isinstance(n, int):
                    if not visited[n]:
                        visited[n] = True
                        front_g.append(n)
                elif n not in seen:
                    seen.add(n)
                    front_s.append(n)

        admit(self._seed_node(u) for u in seeds if self.kind_of(u) != "external")
        for _ in range(max_depth):
            gids, specials = np.array(front_g, dtype=np.int64), front_s
            front_g, front_s = [], []
            nxt: list[int | tuple[int, str]] = []
            for g in gids[self._offsets[self._host_of[gids]] == gids].tolist():
                nxt += self._home_out(g)
            for node in specials:
                nxt += self._special_out(node)
            if len(gids):
                cand = np.unique(self._out_gids_many(gids))
                cand = cand[~visited[cand]]
                if respect_robots:
                    cand = cand[self._allowed[cand]]
                visited[cand] = True
                front_g.extend(cand.tolist())
            admit(nxt)
            if not front_g and not front_s:
                break
        urls = {
            self.url(self.hosts[h].name, page_path(int(g - self._offsets[h]), self.sections))
            for g in np.flatnonzero(visited)
            for h in (int(self._host_of[g]),)
        }
        return urls | {self.url(self.hosts[h].name, p) for h, p in seen}

    def crawl_ceiling(
        self,
        seconds: float,
        host_delay_s: float,
        max_crawl_delay_s: float,
        max_depth: int = 20,
    ) -> int:
        """Most distinct URLs a polite crawler can fetch from this web in ``seconds``.

        The sum over hosts of ``min(URLs of the host in :meth:`reachable`, 1 + floor(T /
        polite delay))``: a crawl cannot fetch what the web does not have (the ceiling of every
        "pages per second" over T), nor more than one request per delay on one host (BUbiNG
        §4.2). Unlike :meth:`politeness_bound` it holds at ``host_delay_s = 0`` (hosts without
        a Crawl-delay are then limited only by their reachable URLs) and counts only URLs a
        crawl from the seeds can find (robots.txt obeyed, within ``max_depth`` hops), so it is
        the tighter bound.

        Parameters
        ----------
        seconds
            Crawl duration T, seconds (>= 0).
        host_delay_s
            The crawler's least delay between two requests to one host D, seconds (>= 0).
        max_crawl_delay_s
            The crawler's cap on a robots.txt Crawl-delay, seconds (:meth:`polite_delay`).
        max_depth
            Hops from a seed (the crawl config's ``filters.max_depth``).
        """
        _check(seconds >= 0, f"seconds={seconds}: need >= 0")
        _check(host_delay_s >= 0, f"host_delay_s={host_delay_s}: need >= 0 seconds")
        per_host = Counter(urlsplit(u).hostname for u in self.reachable(max_depth=max_depth))
        total = 0
        for host, count in per_host.items():
            delay = self.polite_delay(host, host_delay_s, max_crawl_delay_s)
            total += count if delay <= 0 else min(count, 1 + math.floor(seconds / delay))
        return total

    def _out_gids_many(self, gids: np.ndarray) -> np.ndarray:
        """Content-page targets of content pages ``gids`` (global ids): for each page its menu,
        tree children, random and cross-host links, in that order, concatenated."""
        hosts = self._host_of[gids]
        local = gids - self._offsets[hosts]
        child = local[:, None] * FANOUT + np.arange(1, FANOUT + 1)
        child = (child + self._offsets[hosts][:, None])[child < self._sizes[hosts][:, None]]
        out = np.concatenate([self._menus[hosts].ravel(), child, self._links[gids].ravel()])
        return out[out >= 0]

    def _seed_node(self, url: str) -> int | tuple[int, str]:
        parts = urlsplit(url)
        return self._node(self._by_name[parts.hostname].index, parts.path or "/")

    def politeness_bound(self, seconds: float, host_delay_s: float) -> int:
        """Most pages a polite crawler can fetch in ``seconds``.

        The sum over hosts of ``min(allowed pages of the host, 1 + floor(T / max(D, its
        Crawl-delay)))``: one request at once, then one per delay (BUbiNG §4.2 politeness). The
        trap host's allowed pages are unbounded.

        Parameters
        ----------
        seconds
            Crawl duration T, seconds (>= 0).
        host_delay_s
            The crawler's least delay between two requests to one host D, seconds (> 0).
        """
        _check(seconds >= 0, f"seconds={seconds}: need >= 0")
        _check(host_delay_s > 0, f"host_delay_s={host_delay_s}: need > 0 seconds")
        total = 0
        for spec in self.hosts:
            if spec.robots == "500":
                continue
            delay = max(host_delay_s, spec.crawl_delay_s or 0.0)
            budget = 1 + math.floor(seconds / delay)
            if spec.trap:
                total += budget
                continue
            allowed = sum(self._is_allowed((spec.index, p)) for p in self._finite_paths(spec))
            total += min(allowed, budget)
        return total


# -- construction helpers -------------------------------------------------------------------------


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise SampleWebError(f"SampleWeb: {message}")


def _make_hosts(
    rng: np.random.Generator, n: int, pages: int, s: float, extras_every: int, trap: bool
) -> list[HostSpec]:
    content = n - 1 if trap else n
    budget = pages - 1 if trap else pages
    weights = 1.0 / np.arange(1, content + 1, dtype=float) ** s
    sizes = np.ones(content, dtype=np.int64)
    spare = budget - content
    extra = np.floor(spare * weights / weights.sum()).astype(np.int64)
    extra[: spare - int(extra.sum())] += 1
    sizes += extra
    if trap:
        sizes = np.append(sizes, 1)
    kinds = rng.choice(len(ROBOTS_KINDS), size=n, p=ROBOTS_WEIGHTS).tolist()
    delays = rng.integers(1, 4, size=n).tolist()
    specs, offset = [], 0
    for i in range(n):
        is_trap = trap and i == n - 1
        kind = "allow" if is_trap else ROBOTS_KINDS[i] if i < 5 else ROBOTS_KINDS[kinds[i]]
        specs.append(
            HostSpec(
                name=f"h{i + 1:04d}.test",
                index=i,
                size=int(sizes[i]),
                offset=offset,
                robots=kind,
                crawl_delay_s=float(delays[i]) if kind == "delay" else None,
                extras=bool(extras_every) and i % extras_every == 0 and not is_trap,
                trap=is_trap,
            )
        )
        offset += int(sizes[i])
    return specs


def _make_menus(
    rng: np.random.Generator, sizes: np.ndarray, offsets: np.ndarray, m: int
) -> np.ndarray:
    """(H, m) global ids of each host's menu (home first, then early pages), -1 padded."""
    menus = np.full((len(sizes), m), -1, dtype=np.int64)
    for h, size in enumerate(sizes.tolist()):
        pool = np.arange(1, min(size, 10 * m))
        pick = np.sort(rng.choice(pool, size=min(m - 1, len(pool)), replace=False))
        menus[h, : 1 + len(pick)] = offsets[h] + np.concatenate([[0], pick])
    return menus


def _make_links(
    rng: np.random.Generator,
    host_of: np.ndarray,
    sizes: np.ndarray,
    offsets: np.ndarray,
    n_same: int,
    n_cross: int,
) -> np.ndarray:
    """(N, n_same + n_cross) global ids: random pages of the page's host, then of other hosts
    (host drawn in proportion to its size)."""
    total = len(host_of)
    row_size = sizes[host_of][:, None]
    same = (rng.random((total, n_same)) * row_size).astype(np.int64) + offsets[host_of][:, None]
    to_host = rng.choice(len(sizes), size=(total, n_cross), p=sizes / sizes.sum())
    cross = (rng.random((total, n_cross)) * sizes[to_host]).astype(np.int64) + offsets[to_host]
    return np.concatenate([same, cross], axis=1)


# -- bodies ----------------------------------------------------------------------------------------


def _port_of(headers: Mapping[str, str]) -> int | None:
    value = headers.get("Host") or ""
    tail = value.rsplit(":", 1)[-1] if ":" in value and not value.endswith("]") else ""
    return int(tail) if tail.isdigit() else None


def _not_found() -> Response:
    return Response(404, [("Content-Type", _HTML)], b"<!DOCTYPE html><h1>404 not found</h1>\n")


def _robots(spec: HostSpec) -> Response:
    plain = [("Content-Type", "text/plain; charset=utf-8")]
    if spec.robots == "404":
        return Response(404, plain, b"not found\n")
    if spec.robots == "500":
        return Response(500, plain, b"internal server error\n")
    if spec.robots == "delay":
        text = f"User-agent: *\nCrawl-delay: {spec.crawl_delay_s:g}\nDisallow:\n"
    elif spec.robots == "disallow":
        text = f"User-agent: *\nDisallow: {DISALLOWED_PREFIX}\n"
    else:
        text = "User-agent: *\nAllow: /\n"
    return Response(200, plain, text.encode())


#: Held while a corpus is built: ``functools.lru_cache`` does not stop concurrent callers from
#: each computing a missing entry, and the server's first burst of page requests (one thread per
#: connection) then built it once per thread, ~0.1 s of CPU each: a stall of ~2 s before the
#: first content pages of a crawl's seed round were answered.
_CORPUS_LOCK = threading.Lock()


def _corpus(seed: int, words: int = 200_000) -> str:
    """Deterministic pseudo-English text (lowercase words and full stops), about 1.3 MB; built once
    per ``(seed, words)`` however many threads ask at once."""
    with _CORPUS_LOCK:
        return _build_corpus(seed, words)


@functools.lru_cache(maxsize=4)
def _build_corpus(seed: int, words: int) -> str:
    rng = np.random.default_rng(seed + 1_000_003)
    syl = np.array(
        "ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu "
        "ra re ri ro ru sa se si so su ta te ti to tu an en in on un er ar or".split()
    )
    vocab = np.array(
        ["".join(syl[rng.integers(0, len(syl), size=k)]) for k in rng.integers(1, 4, size=4000)]
    )
    idx = rng.zipf(1.3, size=words) % len(vocab)
    out = vocab[idx].astype(object)
    out[rng.random(words) < 0.08] += "."
    return " ".join(out.tolist())


_FILE_TYPES = {"pdf": "application/pdf", "text": "text/plain; charset=utf-8", "image": "image/png"}


@functools.lru_cache(maxsize=8)
def _file_body(kind: str, seed: int) -> bytes:
    if kind == "pdf":
        noise = np.random.default_rng(seed + 7).integers(0, 256, size=4096, dtype=np.uint8)
        return b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + noise.tobytes() + b"\n%%EOF\n"
    if kind == "text":
        return b"Release notes\n=============\n\n" + _corpus(seed)[:3000].encode() + b"\n"
    return _png_1x1()


def _png_1x1() -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    ihdr = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x80\x00"))
        + chunk(b"IEND", b"")
    )
