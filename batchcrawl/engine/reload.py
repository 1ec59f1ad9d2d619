"""The ``[politeness]`` section a running crawl takes up between rounds and micro-batches (issue 31,
item 3): per-host rules, groups and delays may change while ``batchcrawl crawl`` loops rounds or
``batchcrawl crawl --stream`` runs, by editing the crawl's ``crawl.toml``.

:func:`politeness_reloaded` reads the configuration again through the same layers the command read
at its start (``crawl.toml`` < ``BATCHCRAWL_*`` < ``--set`` < flags, the CLI's
``load_crawl_config``) and takes only its ``[politeness]`` section: every other setting (shards,
buckets, time limits) stays what the run started with. A file that no longer reads (a typo
while editing) is logged as an error naming it and the politeness in force is kept, so a running
crawl does not stop for it; ``batchcrawl round`` (one process per round) reads the file afresh
and fails on such a file with the same message.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from batchcrawl.config import Config
from batchcrawl.errors import ConfigError

__all__ = ["ConfigReload", "politeness_reloaded"]

log = logging.getLogger(__name__)

#: reads the run's configuration again (the CLI passes its ``load_crawl_config`` with the run's
#: ``--set`` and flags)
ConfigReload = Callable[[], Config]


def politeness_reloaded(cfg: Config, reload: ConfigReload | None) -> Config:
    """``cfg`` with the ``[politeness]`` section of ``reload()`` (``cfg`` itself when ``reload`` is
    None, the section is unchanged, or the configuration no longer reads: then an error is
    logged)."""
    if reload is None:
        return cfg
    try:
        fresh = reload().politeness
    except ConfigError as exc:
        log.error("the politeness settings stay as they were: %s", exc)
        return cfg
    if fresh == cfg.politeness:
        return cfg
    log.info("politeness settings changed in the crawl's config: applied from now on")
    return dataclasses.replace(cfg, politeness=fresh)
