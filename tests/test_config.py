"""configs/default.toml is generated from config.py; config precedence and error messages."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from batchcrawl.cli import load_crawl_config
from batchcrawl.config import Config, load_config, loopback_test_config, to_toml
from batchcrawl.errors import ConfigError
from batchcrawl.store.crawldir import CrawlDir

REPO = Path(__file__).resolve().parents[1]
GEN_SCRIPT = REPO / "scripts" / "gen_default_config.py"


def gen_module():
    spec = importlib.util.spec_from_file_location("gen_default_config", GEN_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_default_toml_is_the_generated_text():
    checked_in = (REPO / "configs" / "default.toml").read_text(encoding="utf-8")
    assert checked_in == gen_module().render(), "run python scripts/gen_default_config.py"


def test_default_toml_loads_to_the_defaults():
    text = (REPO / "configs" / "default.toml").read_text(encoding="utf-8")
    assert load_config(files=[("configs/default.toml", text)], environ={}) == Config()


def test_default_toml_comments_every_setting():
    text = (REPO / "configs" / "default.toml").read_text(encoding="utf-8").splitlines()
    for section, values in Config().to_dict().items():
        assert f"[{section}]" in text
        for key in values:
            i = next(n for n, line in enumerate(text) if line.startswith(f"{key} = "))
            assert text[i - 1].startswith("# "), key


def test_check_mode_detects_a_stale_file(tmp_path):
    stale = tmp_path / "default.toml"
    stale.write_text("[crawl]\n")
    cmd = [sys.executable, str(GEN_SCRIPT), "--check", "--output", str(stale)]
    assert subprocess.run(cmd, capture_output=True).returncode == 1
    subprocess.run([sys.executable, str(GEN_SCRIPT), "--output", str(stale)], check=True)
    assert subprocess.run(cmd, capture_output=True).returncode == 0


def test_docstrings_are_read_from_the_source_with_ast():
    source = '''
@dataclass(frozen=True)
class FooSection:
    """``[foo]``: a section."""

    size_bytes: int = 3
    """Size of a thing, bytes."""
    plain: int = 1

@dataclass(frozen=True)
class Config:
    foo: FooSection = field(default_factory=FooSection)
'''
    class_docs, field_docs, sections = gen_module().docstrings(source)
    assert class_docs["FooSection"] == "``[foo]``: a section."
    assert field_docs["FooSection"] == {"size_bytes": "Size of a thing, bytes."}
    assert sections == {"foo": "FooSection"}


# -- precedence ------------------------------------------------------------------------------
@pytest.fixture
def crawl(tmp_path) -> CrawlDir:
    text = to_toml(Config().replace(fetch={"shards": 3, "threads": 5, "ring_vnodes": 7}))
    return CrawlDir.create(str(tmp_path / "c"), text, buckets=1)


def test_precedence_defaults_file_env_set_flags(crawl):
    env = {"BATCHCRAWL_FETCH__THREADS": "6", "BATCHCRAWL_FETCH__RING_VNODES": "8"}
    cfg = load_crawl_config(
        crawl,
        sets=["fetch.ring_vnodes=9", "fetch.time_limit_s=12"],
        flags={"fetch": {"time_limit_s": 13.0, "url_cache_size": None}},
        environ=env,
    )
    assert cfg.fetch.shards == 3  # crawl.toml over the default
    assert cfg.fetch.threads == 6  # env over crawl.toml
    assert cfg.fetch.ring_vnodes == 9  # --set over env
    assert cfg.fetch.time_limit_s == 13.0  # explicit flag over --set
    assert cfg.fetch.url_cache_size == Config().fetch.url_cache_size  # unset flag: no effect
    assert cfg.frontier.buckets == Config().frontier.buckets  # default


def test_error_in_crawl_toml_names_file_and_line(tmp_path):
    crawl = CrawlDir.create(str(tmp_path / "c"), "[crawl]\nname = 'x'\n\n[fetch]\nshard = 4\n", 1)
    with pytest.raises(ConfigError, match=r"fetch\.shard \(from .*crawl\.toml:5\): unknown key"):
        load_crawl_config(crawl, environ={})
    crawl2 = CrawlDir.create(str(tmp_path / "d"), "[fetch]\nshards = 'many'\n", 1)
    with pytest.raises(ConfigError, match=r"crawl\.toml:2\): expected an integer"):
        load_crawl_config(crawl2, environ={})


def test_a_key_outside_any_section_names_file_line_and_its_section(tmp_path):
    """``host_delay_s = 0.5`` above the first ``[section]`` was "unknown section [host_delay_s]",
    without a line: it is a key outside any section, at its line, and [politeness] has it."""
    text = "# my crawl\nhost_delay_s = 0.5\n\n[crawl]\nname = 'x'\n"
    crawl = CrawlDir.create(str(tmp_path / "c"), text, 1)
    with pytest.raises(ConfigError) as info:
        load_crawl_config(crawl, environ={})
    message = str(info.value)
    assert message.startswith("host_delay_s (from ") and "unknown section" not in message
    assert "crawl.toml:2): a key outside any section" in message
    assert message.endswith("move it under [politeness], the section that has a key of that name")
    with pytest.raises(ConfigError, match=r"max_bytes \(from c\.toml:1\): a key outside any "
                       r"section .*\(\[robots\], \[sitemaps\] have a key of that name\)"):  # fmt: skip
        load_config(files=[("c.toml", "max_bytes = 1\n[fetch]\n")], environ={})
    with pytest.raises(ConfigError, match=r"c\.toml:1\): a key outside any section .*no section "
                       r"has a key of that name; known sections: crawl, "):  # fmt: skip
        load_config(files=[("c.toml", "colour = 'red'\n")], environ={})


def test_error_from_environment_names_the_variable(crawl):
    with pytest.raises(ConfigError, match="environment variable BATCHCRAWL_FETCH__SHARDS"):
        load_crawl_config(crawl, environ={"BATCHCRAWL_FETCH__SHARDS": "zero"})
    with pytest.raises(ConfigError, match="BATCHCRAWL_FETCHSHARDS.*two underscores"):
        load_crawl_config(crawl, environ={"BATCHCRAWL_FETCHSHARDS": "2"})


def test_error_from_set_names_the_option(crawl):
    with pytest.raises(ConfigError, match=r"fetch\.shards \(from --set fetch\.shards\)"):
        load_crawl_config(crawl, sets=["fetch.shards=0"], environ={})
    with pytest.raises(ConfigError, match="expected section.key=value"):
        load_crawl_config(crawl, sets=["shards=2"], environ={})
    with pytest.raises(ConfigError, match="unknown section"):
        load_crawl_config(crawl, sets=["fetcher.shards=2"], environ={})


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("fetch", "warc_compress_level", 10, r"expected a value >= 0 and <= 9, got 10"),
        ("fetch", "tail_rate_ratio", 1.5, r"expected a value >= 0 and <= 1, got 1.5"),
        ("fetch", "shards", 0, r"expected a value >= 1, got 0"),
        ("fetch", "shards", -3, r"expected a value >= 1, got -3"),
        ("fetch", "time_limit_s", 0.0, r"expected a value >= 0.001 \(a round with no fetch"),
        ("fetch", "threads", 10**8, r"expected a value >= 1 and <= 1024 .*, got 100000000"),
        ("crawl", "user_agent", " ", r"must not be empty"),
        ("crawl", "user_agent", "bot/1\r\nX-Evil: 1", r"only visible ASCII .*RFC 9110"),
        ("crawl", "user_agent", "bot/1 \u00e9", r"only visible ASCII"),
        ("crawl", "robots_agent", "bad bot", r"a robots.txt product token .*RFC 9309"),
        ("generate", "partition_by", "url", r"expected one of host, domain, ip, got 'url'"),
        ("network", "deny_networks", ["10.0.0.0/33"], r"'10.0.0.0/33' is not a CIDR network"),
        ("network", "resolve", {"*.test": "localhost"}, r".*must map to an IP address"),
    ],
)
def test_rules_live_on_the_config_types(section, key, value, message):
    with pytest.raises(ConfigError, match=rf"{section}\.{key} \(from replace\(\)\): {message}"):
        Config().replace(**{section: {key: value}})


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("stream.max_batch_share=abc", r"expected a number >= 0.01 and <= 1, got 'abc'"),
        ("fetch.tail_rate_ratio=half", r"expected a number >= 0 and <= 1, got 'half'"),
        ("politeness.host_delay_s=soon", r"expected a number, got 'soon'"),
    ],
)
def test_a_number_setting_given_text_names_its_bounds(setting, message, crawl):
    """A share is not a number of seconds: the error gives the setting's own bounds."""
    key = setting.split("=", 1)[0].replace(".", r"\.")
    with pytest.raises(ConfigError, match=rf"{key} \(from --set {key}\): {message}"):
        load_crawl_config(crawl, sets=[setting], environ={})


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "+nan"])
@pytest.mark.parametrize(
    ("section", "key"),
    [("politeness", "host_delay_s"), ("fetch", "time_limit_s"), ("fetch", "tail_rate_ratio")],
)
def test_non_finite_numbers_are_refused_from_files_and_set(text, section, key, crawl):
    """NaN passes every ``<``/``>`` bound check, so it needs its own: a NaN delay or time limit
    would otherwise be saved in crawl.toml and silently disable what it configures."""
    message = rf"{section}\.{key} \(from c\.toml:2\): expected a finite number"
    with pytest.raises(ConfigError, match=message):
        load_config(files=[("c.toml", f"[{section}]\n{key} = {text}\n")], environ={})
    with pytest.raises(ConfigError, match=r"from --set .*expected a finite number"):
        load_crawl_config(crawl, sets=[f"{section}.{key}={text}"], environ={})


def test_rule_error_names_file_and_line(tmp_path):
    text = "[fetch]\nthreads = 4\nwarc_compress_level = 12\n"
    with pytest.raises(ConfigError, match=r"fetch\.warc_compress_level \(from c\.toml:3\): .*<= 9"):
        load_config(files=[("c.toml", text)], environ={})


@pytest.mark.parametrize(
    ("robots", "message"),
    [
        ({"cache_ttl_s": 86400.5}, r"robots\.cache_ttl_s .*<= 86400 \(RFC 9309"),
        ({"max_bytes": 511_999}, r"robots\.max_bytes .*>= 512000 \(RFC 9309"),
    ],
)
def test_robots_bounds_of_rfc_9309_are_enforced(robots, message):
    with pytest.raises(ConfigError, match=message):
        loopback_test_config(robots=robots)
    edge = {k: 86400.0 if k == "cache_ttl_s" else 512_000 for k in robots}
    assert loopback_test_config(robots=edge)  # the bound itself is fine


def test_the_local_web_config_keeps_a_crawl_on_loopback(tmp_path):
    """configs/local-web.toml (README, "A crawl by hand"): loads without error, resolves only
    *.test names, to loopback, asks no DNS server, contacts only 127.0.0.0/8, and lifts the
    per-IP delay that all hosts of a local web would share."""
    path = REPO / "configs" / "local-web.toml"
    cfg = load_config(files=[(str(path), path.read_text(encoding="utf-8"))], environ={})
    assert cfg.network.resolve == {"*.test": "127.0.0.1"}
    assert cfg.network.system_dns is False and cfg.network.allow_networks == ["127.0.0.0/8"]
    assert cfg.politeness.ip_delay_s == 0.0 and cfg.politeness.host_delay_s > 0
    assert cfg.politeness.ip_concurrency >= cfg.fetch.threads


def test_a_renamed_key_is_read_as_its_new_name_from_every_layer():
    # fetch.warc_rotate_bytes became fetch.warc_max_bytes (issue 35): old crawl.toml files open
    old = load_config(files=[("crawl.toml", "[fetch]\nwarc_rotate_bytes = 5000\n")], environ={})
    assert old.fetch.warc_max_bytes == 5000
    cfg = load_config(environ={"BATCHCRAWL_FETCH__WARC_ROTATE_BYTES": "7000"},
                      sets=["fetch.warc_rotate_bytes=6000"])  # fmt: skip
    assert cfg.fetch.warc_max_bytes == 6000  # --set wins over the environment, as for any key
    with pytest.raises(ConfigError, match="warc_max_bytes"):
        load_config(files=[("c.toml", "[fetch]\nwarc_rotate_bytes = 0\n")], environ={})
