"""``Content-Signal`` lines of robots.txt: what a site says its content may be used for.

The Content Signals Policy (contentsignals.org, 2025; crawler-commons parses it per user-agent
group) adds ``Content-Signal: search=yes, ai-input=no, ai-train=no`` lines to robots.txt groups.
The signals do not change what is fetched (they are not access rules); the crawl records them per
host (``hosts.content_signal``) for the group that applies to our product token, chosen as RFC
9309 §2.2.1 chooses a group: the groups naming the token (case-insensitive; several are combined),
else the ``*`` groups. A line outside any group applies to every agent, like a ``Sitemap`` line.

Values are normalized to ``name=yes|no`` pairs (names lower-case, in file order, the first
value of a repeated name kept) joined by ``,``; pairs that are not ``token=yes|no`` are dropped.
"""

from __future__ import annotations

import re

__all__ = ["content_signal"]

_PAIR = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9_.-]*)\s*=\s*(yes|no)\s*", re.ASCII | re.I)
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")


def _field(line: str) -> tuple[str, str] | None:
    name, sep, value = line.partition(":")
    if not sep:
        return None
    return name.strip().lower(), value.strip()


def content_signal(text: str | None, agent: str) -> str | None:
    """The normalized ``Content-Signal`` of robots.txt ``text`` for product token ``agent``
    (module docstring), or None when no signal applies. Never raises."""
    if not text:
        return None
    agent = agent.lower()
    mine: list[str] = []
    star: list[str] = []
    everyone: list[str] = []
    agents: list[str] = []
    in_rules = False  # a User-agent line after rules starts a new group
    for raw in text.splitlines():
        field = _field(raw.split("#", 1)[0])
        if field is None:
            continue
        name, value = field
        if name in ("user-agent", "useragent"):
            if in_rules:
                agents, in_rules = [], False
            m = _PRODUCT_TOKEN.match(value)
            agents.append("*" if value.startswith("*") else (m.group(0).lower() if m else ""))
            continue
        if name in ("allow", "disallow", "crawl-delay", "content-signal"):
            in_rules = in_rules or bool(agents)
        if name != "content-signal":
            continue
        if not agents:
            everyone.append(value)
        if agent in agents:
            mine.append(value)
        elif "*" in agents:
            star.append(value)
    chosen = (mine or star) + everyone
    pairs: dict[str, str] = {}
    for value in chosen:
        for part in value.split(","):
            m = _PAIR.fullmatch(part)
            if m is not None:
                pairs.setdefault(m.group(1).lower(), m.group(2).lower())
    return ",".join(f"{k}={v}" for k, v in pairs.items()) or None
