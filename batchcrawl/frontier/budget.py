"""Per-domain budgets of a round: IRLbot's STAR and BEAST (Lee, Leonard, Wang, Loguinov, "IRLbot:
Scaling to 6 Billion Pages and Beyond", WWW 2008 / TWEB 2009, §6; docs/design.md §5).

**STAR** (Spam Tracking and Avoidance through Reputation): a pay-level domain's crawl budget per
round grows with its *reputation*, the number of distinct other pay-level domains linking to it
(:mod:`batchcrawl.frontier.indegree`), instead of one fixed cap for every domain. A spam farm of
thousands of hosts under one domain links mostly to itself: links inside a domain earn nothing,
so its budget stays near the floor however many URLs it offers.

**BEAST** (Budget Enforcement with Anti-Spam Tactics): a URL over its domain's budget is not
dropped; it is delayed. The URLs over budget, in breadth-first order, are spread over queues
with exponentially growing waits: the first budget's worth waits ``beast_delay_s``, the next two
budgets' worth twice that, the next four four times, ..., capped at ``beast_max_delay_s``
(IRLbot re-checks its j-th queue every 2^j periods). :func:`beast_delay_s` is the one place that
says how long; update writes the new ``next_fetch_time`` so the due-time index sees it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config, GenerateSection

__all__ = ["DomainBudgets", "beast_delay_s", "star_budget"]


def star_budget(linking_domains: np.ndarray, g: GenerateSection) -> np.ndarray:
    """STAR budget of each domain, URLs per round (IRLbot §6.2: budget linear in in-degree,
    clipped to ``[B_min, B_max]``).

    Parameters
    ----------
    linking_domains : ndarray of int, shape (n,)
        Distinct other pay-level domains linking to each domain (>= 0).
    g : GenerateSection
        ``star_min_urls_per_domain`` (the floor, in-degree 0), ``star_urls_per_linking_domain``
        and ``star_max_urls_per_domain`` (the ceiling).

    Returns
    -------
    ndarray of int64, shape (n,)
        ``clip(min + per_link * in_degree, min, max)``: non-decreasing in the in-degree.
    """
    d = np.asarray(linking_domains, dtype=np.float64)
    raw = np.floor(g.star_min_urls_per_domain + g.star_urls_per_linking_domain * d)
    hi = max(g.star_max_urls_per_domain, g.star_min_urls_per_domain)
    return np.clip(raw, g.star_min_urls_per_domain, hi).astype(np.int64)


def beast_delay_s(excess: np.ndarray, budget: np.ndarray, g: GenerateSection) -> np.ndarray:
    """BEAST's wait for URLs over their domain's budget, seconds.

    Parameters
    ----------
    excess : ndarray of int, shape (n,)
        Position of each URL among its domain's URLs over budget (0: the first one over),
        breadth-first order.
    budget : ndarray of int, shape (n,)
        The domain's budget (>= 1), URLs per round.
    g : GenerateSection
        ``beast_delay_s`` (the first queue's wait) and ``beast_max_delay_s`` (the cap).

    Returns
    -------
    ndarray of float64, shape (n,)
        ``min(beast_delay_s * 2**j, beast_max_delay_s)`` with queue ``j = floor(log2(1 +
        excess / budget))``: queue j holds ``2**j`` budgets' worth of URLs. Non-decreasing in
        ``excess``, within ``[min(beast_delay_s, max), beast_max_delay_s]``.
    """
    e = np.maximum(np.asarray(excess, dtype=np.float64), 0.0)
    b = np.maximum(np.asarray(budget, dtype=np.float64), 1.0)
    level = np.floor(np.log2(1.0 + e / b))
    level = np.minimum(level, 1023.0)  # 2**1023 is a float; the cap applies below
    return np.minimum(g.beast_delay_s * np.exp2(level), g.beast_max_delay_s)


@dataclass(frozen=True)
class DomainBudgets:
    """Each pay-level domain's cap for one round (``generate.budget``).

    Attributes
    ----------
    star : bool
        STAR budgets (``"star"``) or the fixed ``max_urls_per_domain`` (``"fixed"``).
    linking : dict of str to int
        Distinct other pay-level domains linking to each domain (STAR); absent: 0.
    """

    g: GenerateSection
    star: bool = False
    linking: dict[str, int] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, cfg: Config, linking: dict[str, int] | None = None) -> DomainBudgets:
        """The budgets of ``cfg.generate``; ``linking`` is the in-degree table (STAR only)."""
        return cls(cfg.generate, cfg.generate.budget == "star", dict(linking or {}))

    def caps(self, domains: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """The cap of each row's domain (int64, shape ``(len(domains),)``)."""
        n = len(domains)
        if not self.star:
            return np.full(n, self.g.max_urls_per_domain, dtype=np.int64)
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        enc = pc.dictionary_encode(domains)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        names = enc.dictionary.to_pylist()
        per = star_budget(np.array([self.linking.get(d, 0) for d in names], np.int64), self.g)
        return per[np.asarray(enc.indices.to_numpy(), dtype=np.int64)]
