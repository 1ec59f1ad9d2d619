"""robots.txt matching rules (RFC 9309 §2.2), with the project's own cases, so a clone without
../shared/testdata (the RFC and Google suites) still tests how rules and groups are matched.

Each case is ``(robots.txt, agent, path, allowed)``; section numbers are RFC 9309's.
"""

from __future__ import annotations

import pytest

from batchcrawl.fetch.robots import robots_policy_for

CASES = [
    # §2.2.2: the longest matching rule wins ...
    ("User-agent: *\nDisallow: /a\nAllow: /a/b\n", "bot", "/a/b/c", True),
    ("User-agent: *\nDisallow: /a\nAllow: /a/b\n", "bot", "/a/c", False),
    ("User-agent: *\nAllow: /a\nDisallow: /a/b\n", "bot", "/a/b", False),
    # ... and on equal length, allow wins
    ("User-agent: *\nDisallow: /page\nAllow: /page\n", "bot", "/page", True),
    # no matching rule: allowed; an empty Disallow disallows nothing
    ("User-agent: *\nDisallow: /x\n", "bot", "/y", True),
    ("User-agent: *\nDisallow:\n", "bot", "/anything", True),
    # §2.2.3: '*' matches any sequence, '$' anchors the end
    ("User-agent: *\nDisallow: /*.pdf$\n", "bot", "/docs/a.pdf", False),
    ("User-agent: *\nDisallow: /*.pdf$\n", "bot", "/docs/a.pdf?x=1", True),
    ("User-agent: *\nDisallow: /a*z\n", "bot", "/a/b/c/z/end", False),
    ("User-agent: *\nDisallow: /$\n", "bot", "/", False),
    ("User-agent: *\nDisallow: /$\n", "bot", "/index.html", True),
    # paths match case-sensitively; the query is part of the path
    ("User-agent: *\nDisallow: /Private\n", "bot", "/private", True),
    ("User-agent: *\nDisallow: /search?q=\n", "bot", "/search?q=cats", False),
    # §2.2.1: the group of our product token is used, not '*'; tokens match case-insensitively
    ("User-agent: *\nDisallow: /\n\nUser-agent: bot\nAllow: /\n", "bot", "/x", True),
    ("User-agent: *\nAllow: /\n\nUser-agent: BOT\nDisallow: /x\n", "bot", "/x", False),
    ("User-agent: other\nDisallow: /\n", "bot", "/x", True),
    # consecutive User-agent lines share one group; groups for one agent are merged
    ("User-agent: a\nUser-agent: bot\nDisallow: /g\n", "bot", "/g", False),
    ("User-agent: bot\nDisallow: /1\n\nUser-agent: bot\nDisallow: /2\n", "bot", "/2", False),
    # §2.2.2: percent-encoded and plain characters are the same octets
    ("User-agent: *\nDisallow: /%7Euser\n", "bot", "/~user/page", False),
    ("User-agent: *\nDisallow: /~user\n", "bot", "/%7Euser/page", False),
    # unknown lines and comments are ignored
    ("# hello\nUser-agent: *\nFoo: bar\nDisallow: /x # no x\n", "bot", "/x", False),
]


@pytest.mark.parametrize(("txt", "agent", "path", "allowed"), CASES)
def test_matching(txt, agent, path, allowed):
    rules = robots_policy_for(200, txt.encode(), None)
    assert rules.allowed(f"http://h.test{path}", agent) is allowed


def test_robots_txt_itself_is_always_allowed():
    rules = robots_policy_for(200, b"User-agent: *\nDisallow: /\n", None)
    assert rules.allowed("http://h.test/robots.txt", "bot") is True  # §2.2.2
