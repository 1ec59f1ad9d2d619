"""Issue 31, items 3 and 5: per-host politeness settings, politeness groups and long Crawl-delays,
checked in the server's log of `batchcrawl round` processes (one per round, as Airflow runs them),
with the crawl's ``crawl.toml`` edited between rounds."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from round_helpers import cli_command, new_crawl, round_config, serve, subprocess_env

from batchcrawl.config import Config, ConfigError, to_toml
from batchcrawl.engine.reload import politeness_reloaded
from batchcrawl.frontier.hostcaps import HostCaps
from batchcrawl.politeness import PolitenessPolicy, host_surt, parse_group_rules
from batchcrawl.store import sql
from batchcrawl.store.paths import CONFIG_FILE
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize

#: the log's millisecond rounding
SLACK_S = 0.002
GROUP = ("g1.test", "g2.test", "g3.test")
SOLO, FREE, SLOW = "solo.test", "free.test", "slow.test"
#: ``slow.test``'s robots.txt Crawl-delay, far above the crawl's ``max_crawl_delay_s`` (0.3 s)
SLOW_CRAWL_DELAY_S = 1.5


class ChainSite:
    """Every host is an endless chain of pages (``/n`` links ``/n+1`` and ``/n+2``);
    ``slow.test``'s robots.txt asks for a long Crawl-delay, the others have none (404)."""

    def __call__(self, host, path, headers):
        if path == "/robots.txt":
            if host == SLOW:
                body = f"User-agent: *\nCrawl-delay: {SLOW_CRAWL_DELAY_S}\n".encode()
                return Response(200, [("Content-Type", "text/plain")], body)
            return Response(404, [("Content-Type", "text/plain")], b"")
        n = int(path.strip("/") or 0)
        body = f'<a href="/{n + 1}">a</a> <a href="/{n + 2}">b</a>'.encode()
        return Response(200, [("Content-Type", "text/html")], body)


def _config(group_delay_s: float, solo_delay_s: float, long_crawl_delay: str = "slow") -> Config:
    return round_config(
        politeness={
            "adaptive_delay_factor": 0.0,
            "long_crawl_delay": long_crawl_delay,
            "groups": [{"name": "trio", "match": "g?.test", "delay_s": group_delay_s}],
            "hosts": [{"surt": host_surt(SOLO), "delay_s": solo_delay_s}],
        },
        fetch={"time_limit_s": 4.0, "tail_rate_ratio": 0.0, "tail_capacity_ratio": 0.0,
               "tail_idle_s": 0.0},
        generate={"time_fit": 0.0},
    )  # fmt: skip


def _gaps(log, hosts) -> list[float]:
    """Seconds between consecutive request starts to any of ``hosts`` (robots.txt included)."""
    t = sorted(e.t_ms / 1000 for e in log if e.host in hosts)
    return [b - a for a, b in zip(t, t[1:], strict=False)]


def _round(crawl) -> dict:
    done = subprocess.run(cli_command("round", crawl.url), env=subprocess_env(),
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _not_selected(summary: dict) -> dict:
    gen = summary.get("generate", summary)
    return gen.get("not_selected", summary.get("not_selected", {}))


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_group_delay_override_and_long_crawl_delay_hold_and_change_between_rounds(tmp_path):
    with serve(ChainSite()) as server:
        seeds = [canonicalize(server.base_url(h) + f"/{i}")
                 for h in (*GROUP, SOLO, FREE, SLOW) for i in range(8)]  # fmt: skip
        crawl = new_crawl(tmp_path / "crawl", _config(0.3, 0.5), seeds)

        mark = server.log.mark()
        _round(crawl)
        log1 = server.log.since(mark)
        group = _gaps(log1, GROUP)
        assert {e.host for e in log1} >= set(GROUP)  # each of the three was crawled
        assert len(group) >= 6
        assert min(group) >= 0.3 - SLACK_S, group  # one delay across the three hosts
        solo = _gaps(log1, {SOLO})
        assert len(solo) >= 3 and min(solo) >= 0.5 - SLACK_S, solo  # the override
        # control: a host in no group and with no rule goes at the crawl's 0.05 s, so the checks
        # above can fail
        assert min(_gaps(log1, {FREE})) < 0.3
        slow = _gaps(log1, {SLOW})  # robots.txt, then pages at the full Crawl-delay, not 0.3 s
        assert len(slow) >= 1 and min(slow) >= SLOW_CRAWL_DELAY_S - SLACK_S, slow

        # the user edits crawl.toml between rounds: a longer group delay and override
        crawl.fs.pipe_file(crawl.path(CONFIG_FILE), to_toml(_config(0.8, 1.0)).encode())
        mark = server.log.mark()
        summary2 = _round(crawl)
        log2 = server.log.since(mark)
        group = _gaps(log2, GROUP)
        assert len(group) >= 3 and min(group) >= 0.8 - SLACK_S, group
        solo = _gaps(log2, {SOLO})
        assert len(solo) >= 1 and min(solo) >= 1.0 - SLACK_S, solo
        # slow.test's Crawl-delay is known now: as many URLs as fit 4 s at 1.5 s (2), the rest
        # stays due, counted capped_host
        assert sum(e.host == SLOW for e in log2) == 2, [e.path for e in log2 if e.host == SLOW]
        assert _not_selected(summary2).get("capped_host", 0) >= 1, summary2
        rows = sql.query(crawl, "SELECT host, host_delay_s, crawl_delay_s FROM hosts "
                                "WHERE host IN ('solo.test', 'slow.test') ORDER BY host")  # fmt: skip
        assert rows.to_pylist() == [
            {"host": SLOW, "host_delay_s": SLOW_CRAWL_DELAY_S, "crawl_delay_s": SLOW_CRAWL_DELAY_S},
            {"host": SOLO, "host_delay_s": 1.0, "crawl_delay_s": None},
        ]

        # skip hosts with a long Crawl-delay: no request, its URLs counted and kept queued
        crawl.fs.pipe_file(crawl.path(CONFIG_FILE), to_toml(_config(0.8, 1.0, "skip")).encode())
        mark = server.log.mark()
        summary3 = _round(crawl)
        assert not [e for e in server.log.since(mark) if e.host == SLOW]
        assert _not_selected(summary3).get("long_crawl_delay", 0) >= 1, summary3
        queued = sql.query(crawl, "SELECT count(*) AS n FROM frontier "
                                  "WHERE host = 'slow.test' AND status = 'queued'")  # fmt: skip
        assert queued.to_pylist()[0]["n"] >= 1


class EditingSite(ChainSite):
    """:class:`ChainSite` that rewrites the crawl's ``crawl.toml`` (``edit``) when the
    ``after``-th request to the group arrives, as a user editing it while a stream runs; its
    server-log time (ms) is kept in ``edited_ms``."""

    def __init__(self, edit, after: int) -> None:
        self.edit, self.after, self.seen, self.edited_ms = edit, after, 0, None
        self.lock = threading.Lock()

    def __call__(self, host, path, headers):
        with self.lock:
            if host in GROUP:
                self.seen += 1
                if self.seen == self.after:
                    self.edit()
                    self.edited_ms = time.time() * 1000
        return super().__call__(host, path, headers)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_running_stream_takes_up_a_changed_group_delay_at_its_next_micro_batch(tmp_path):
    cfg = _config(0.3, 0.3).replace(stream={"flush_interval_s": 0.5})
    holder = {}

    def edit():
        changed = _config(1.0, 0.3).replace(stream={"flush_interval_s": 0.5})
        holder["crawl"].fs.pipe_file(holder["crawl"].path(CONFIG_FILE), to_toml(changed).encode())

    site = EditingSite(edit, after=6)
    with serve(site) as server:
        seeds = [canonicalize(server.base_url(h) + f"/{i}") for h in GROUP for i in range(8)]
        crawl = holder["crawl"] = new_crawl(tmp_path / "crawl", cfg, seeds)
        done = subprocess.run(cli_command("crawl", crawl.url, "--stream", "--max-seconds", "30"),
                              env=subprocess_env(), capture_output=True, text=True,
                              timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        log = server.log.entries()
    assert site.edited_ms is not None, "the stream never made six requests to the group"
    gaps = _gaps(log, GROUP)
    assert min(gaps) >= 0.3 - SLACK_S, gaps  # the group's delay before and after
    before = _gaps([e for e in log if e.t_ms <= site.edited_ms], GROUP)
    after = _gaps([e for e in log if e.t_ms > site.edited_ms], GROUP)
    assert min(before) < 1.0  # control: the old delay was in force before the edit
    assert len(after) >= 4, after
    assert min(after[-3:]) >= 1.0 - SLACK_S, after  # the new one by the next micro-batches


def test_rules_match_by_glob_or_surt_first_match_wins():
    policy = PolitenessPolicy.from_config(Config().replace(politeness={
        "hosts": [{"match": "*.a.org", "delay_s": 5.0, "urls_per_round": 3},
                  {"surt": "org,a,", "enabled": False}],
        "groups": [{"name": "pld", "match": "*.b.org", "by": "domain", "delay_s": 2.0},
                   {"name": "one", "surt": "org,c,", "delay_s": 3.0, "concurrency": 2}],
    }).politeness)  # fmt: skip
    assert (policy.delay_floor_s("x.a.org"), policy.urls_per_round("x.a.org")) == (5.0, 3)
    assert policy.enabled("x.a.org") and not policy.enabled("a.org")  # the first match wins
    assert policy.delay_floor_s("z.test") == 2.0 and policy.urls_per_round("z.test") == 1000
    assert policy.slot("x.b.org", "10.0.0.1").key == "group:pld:b.org"
    assert policy.slot("c.org", "10.0.0.1") == policy.slot("w.c.org", "10.0.0.2")
    assert policy.slot("w.c.org", "10.0.0.2").concurrency == 2
    assert policy.slot("z.test", "10.0.0.9").key == "ip:10.0.0.9"
    assert policy.route("w.c.org", "c.org", None) == "group:one"
    assert policy.route("z.test", "z.test", None) is None


@pytest.mark.parametrize(
    "table",
    [
        {"name": "g", "delay_s": 1.0},  # neither match nor surt
        {"name": "g", "match": "*", "surt": "org,", "delay_s": 1.0},  # both
        {"match": "*", "delay_s": 1.0},  # no name
        {"name": "g", "match": "*", "delay_s": -1.0},
        {"name": "g", "match": "*", "delay_s": 1.0, "concurrency": 0},
        {"name": "g", "match": "*", "delay_s": 1.0, "by": "host"},
        {"name": "g", "match": "*", "delay_s": 1.0, "speed": 3},
    ],
)
def test_bad_group_tables_are_refused_with_their_index(table):
    with pytest.raises(ConfigError, match=r"politeness\.groups"):
        Config().replace(politeness={"groups": [table]})
    with pytest.raises(ConfigError):
        parse_group_rules([table])


def test_a_running_crawl_takes_up_only_politeness_and_keeps_it_on_a_bad_file(caplog):
    cfg = Config()

    def bad() -> Config:
        raise ConfigError("CRAWL/crawl.toml: not valid TOML: Expected '=' (at line 3)")

    assert politeness_reloaded(cfg, bad) is cfg and "not valid TOML" in caplog.text
    new = cfg.replace(politeness={"host_delay_s": 5.0}, fetch={"shards": 7})
    got = politeness_reloaded(cfg, lambda: new)
    assert got.politeness.host_delay_s == 5.0 and got.fetch == cfg.fetch  # politeness only
    assert politeness_reloaded(cfg, lambda: cfg.replace(fetch={"shards": 7})) is cfg
    assert politeness_reloaded(cfg, None) is cfg


@pytest.mark.parametrize(
    ("mode", "limit", "excluded"),
    [("slow", 40, None), ("skip", 1000, "long_crawl_delay"), ("cap", 1000, None)],
)
def test_a_long_crawl_delay_fits_the_round_or_skips_the_host(mode, limit, excluded):
    cfg = Config().replace(politeness={"long_crawl_delay": mode, "max_crawl_delay_s": 30.0},
                           fetch={"time_limit_s": 3600.0})  # fmt: skip
    caps = HostCaps(cfg, {"slow.org": 90.0})  # 3600 s / 90 s = 40 URLs
    assert (caps.limit("slow.org"), caps.excluded("slow.org")) == (limit, excluded)
    assert (caps.limit("fast.org"), caps.excluded("fast.org")) == (1000, None)
