"""Reloading the workbench's politeness rules (a changed ``[politeness]`` section between rounds or
micro-batches): every host moved into the entry its new group or address names, no delay broken
(BUbiNG §4.2 entries; the groups and per-host rules of :mod:`batchcrawl.politeness`)."""

from __future__ import annotations

from typing import TypeVar

from batchcrawl.config import PolitenessSection
from batchcrawl.fetch.hostdelay import check_seconds
from batchcrawl.fetch.readyqueue import ReadyQueue
from batchcrawl.fetch.visitstate import IPEntry
from batchcrawl.politeness import PolitenessPolicy

T = TypeVar("T")

__all__ = ["PolicyReload"]


class PolicyReload(ReadyQueue[T]):
    """The workbench's rules reload: :meth:`configure` and :meth:`set_policy`."""

    def configure(self, politeness: PolitenessSection) -> None:
        """Apply a changed ``[politeness]`` section to this workbench, keeping every host's
        queue and times (:meth:`set_policy` for the rules and groups)."""
        check_seconds("max_crawl_delay_s", politeness.max_crawl_delay_s)
        check_seconds("adaptive_delay_factor", politeness.adaptive_delay_factor)
        with self._cond:
            self.max_crawl_delay_s = float(politeness.max_crawl_delay_s)
            self.adaptive_delay_factor = float(politeness.adaptive_delay_factor)
            self.cap_crawl_delay = politeness.long_crawl_delay == "cap"
        self.set_policy(PolitenessPolicy.from_config(politeness))

    def set_policy(self, policy: PolitenessPolicy) -> None:
        """Use ``policy`` from now on (a changed config between rounds or micro-batches).

        Every host is put into the entry its new :class:`~batchcrawl.politeness.Slot` names (a
        new entry is created as needed) and every entry takes its slot's delay and concurrency.
        No delay is broken: an entry whose delay changed may next start ``last fetch end + new
        delay``; a host moved into an entry brings the end of its last fetch with it (the entry
        may not start before ``that end + its delay``); an acquired host's fetch counts towards
        its new entry's concurrency. Queues, order and host times are kept.
        """
        with self._cond:
            self.policy = policy
            self.host_delay_s = policy.host_delay_s
            self.ip_delay_s = policy.ip_delay_s
            self.ip_concurrency = policy.ip_concurrency
            touched: dict[int, IPEntry] = {}
            for vs in self._hosts.values():
                slot = policy.slot(vs.host, vs.ip)
                old = vs._entry
                new = self._entry_for(slot, self._clock())
                if new is not old:
                    if vs.pos is not None:
                        old.heap.remove(vs)
                    old.hosts -= 1
                    new.hosts += 1
                    if vs.acquired:
                        old.active -= 1
                        new.active += 1
                    vs._entry = new
                    if vs.last_end is not None:
                        new.next_allowed = max(new.next_allowed, vs.last_end + new.delay_s)
                        new.last_end = max(new.last_end or vs.last_end, vs.last_end)
                    if vs.queue and not vs.acquired:
                        new.heap.push(vs)
                touched[id(old)], touched[id(new)] = old, new
            for entry in self._ips.values():
                touched[id(entry)] = entry
            for entry in touched.values():
                self._reposition(entry)
            self._cond.notify_all()
