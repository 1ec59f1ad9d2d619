"""The single-writer lock of a crawl directory (docs/design.md §3 "One writer").

``CRAWL/_lock.json`` names its holder (owner, host, pid, start time, last heartbeat, a random
token). It is published exclusively, with the same trick as a manifest commit: a hard link from a
temp file locally (fails if the name exists), a create-only put (``If-None-Match: *``) on object
stores. A background thread refreshes the heartbeat. A lock whose holder is gone -- a dead pid on this
host, or no heartbeat for ``stale_after_s`` seconds -- is taken over with a logged warning (Nutch and
Hadoop keep such lock files beside the CrawlDb; the heartbeat is what lets a crashed holder's lock
expire instead of needing a manual ``rm``).

Object stores have no atomic rename, so a takeover there deletes the stale lock and then creates
ours; two processes taking over the same stale lock at the same moment are resolved by the
create-only put (one of them gets :class:`LockedError`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from batchcrawl.errors import CrawlDirError, LockedError
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.paths import LOCK_FILE

log = logging.getLogger(__name__)


def _pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists on this host (signal 0 probes without signalling)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


#: The command this process runs (``"batchcrawl crawl"``), recorded in every lock it takes besides
#: the lock's owner (the step: ``"batchcrawl round"``), so that a second writer is told which
#: command holds the crawl (issue 34: a ``crawl`` was named ``round``). Set by :func:`name_command`.
_command: str | None = None


#: The ``nest=True`` locks this process holds, by lock file (:func:`_key`): a ``WriterLock`` of the
#: same crawl acquired in this process while one is held nests in it (:meth:`WriterLock.acquire`).
_held: dict[str, WriterLock] = {}
#: Whether this process has taken a crawl's lock: every write of a crawl but ``init`` happens under
#: it, so a stop before it was taken changed nothing (:func:`taken_in_this_process`).
_taken = False
_held_lock = threading.Lock()


def remove_held_for_exit() -> None:
    """Remove the lock files of every writer lock this process holds, for a process about to
    end at once (a second stop signal, :func:`batchcrawl.console.signals.exit_at_once`; its
    worker processes are killed first). Any thread; it takes no lock of this module, so it
    cannot wait on the thread it interrupts."""
    for held in list(_held.values()):
        held._remove_for_exit()


def _key(crawl: CrawlDir) -> str:
    """The lock file of ``crawl`` as one string whatever path or URL named the crawl (a command's
    relative ``news`` and its cluster's absolute ``/home/me/news`` are one crawl)."""
    path = crawl.path(LOCK_FILE)
    return os.path.realpath(path) if crawl.local else path


def taken_in_this_process() -> bool:
    """Whether this process has taken a crawl's writer lock (held now or released). A command
    stopped before that has written nothing to any crawl (``init`` aside, which writes a new crawl
    without one)."""
    return _taken


def name_command(command: str | None) -> None:
    """Record ``command`` (``"batchcrawl crawl"``; None forgets it) in the locks this process takes
    from now on: the CLI calls it once per command."""
    global _command
    _command = command


class WriterLock:
    """Exclusive writer lock of a crawl directory, as a context manager.

    Parameters
    ----------
    crawl
        The crawl directory (local or object store).
    owner
        Free text naming the holder in error messages (default ``"user@host pid N"``), e.g.
        ``"batchcrawl round"``.
    heartbeat_s
        Seconds between heartbeat refreshes by the background thread.
    stale_after_s
        A lock whose heartbeat is older than this many seconds is stale and may be taken over.
    clock
        Wall clock in seconds since the epoch (``time.time``); heartbeats and staleness use it.
    nest
        Let the other ``WriterLock`` objects of this crawl that this process acquires while this one is
        held nest in it (:meth:`acquire`): a command's hold around its steps. Otherwise a second
        ``WriterLock`` in the same process is a second writer, refused like any other.

    Attributes
    ----------
    took_over
        Once acquired: why the lock it took over was stale (``"dead pid 123 on host h"``), or
        None when no writer left one behind. A writer that held the lock and did not release it
        died: whatever it did after its last commit (requests to hosts, among others) was never
        persisted (a nested hold gives its holder's).

    Raises
    ------
    LockedError
        On ``acquire``/``__enter__``: another live writer holds the lock; the message names it.

    Examples
    --------
    >>> with WriterLock(crawl, owner="batchcrawl round"):  # doctest: +SKIP
    ...     crawl.commit(...)
    """

    def __init__(
        self,
        crawl: CrawlDir,
        owner: str | None = None,
        heartbeat_s: float = 10.0,
        stale_after_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        nest: bool = False,
    ):
        self.crawl = crawl
        self.nest = nest
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.owner = owner or f"{os.environ.get('USER', 'unknown')}@{self.host} pid {self.pid}"
        self.heartbeat_s = float(heartbeat_s)
        self.stale_after_s = float(stale_after_s)
        self.clock = clock
        self.token = uuid.uuid4().hex
        self.started: float | None = None
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._path = crawl.path(LOCK_FILE)
        self._outer: WriterLock | None = None  # the hold this one nests in (acquire)
        self.took_over: str | None = None

    # -- the lock record ---------------------------------------------------------------------
    def _record(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "command": _command,
            "host": self.host,
            "pid": self.pid,
            "started": self.started,
            "heartbeat": self.clock(),
            "token": self.token,
        }

    def read(self) -> dict[str, Any] | None:
        """The current lock record, or None when the crawl is not locked."""
        try:
            raw = self.crawl.fs.cat_file(self._path)
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            if not isinstance(data, dict):
                raise ValueError("not an object")
            return data
        except ValueError:
            # A torn or foreign file: treat as a lock without heartbeat (stale).
            return {"owner": "unknown (unreadable lock file)", "heartbeat": None, "token": None}

    def stale_reason(self, record: dict[str, Any]) -> str | None:
        """Why ``record`` is stale (``"dead pid 123 on host h"``, ``"no heartbeat for 75 s"``), or
        None if its holder is presumed alive."""
        if record.get("host") == self.host and isinstance(record.get("pid"), int):
            if not _pid_alive(record["pid"]):
                return f"process {record['pid']} on {self.host} is gone"
        beat = record.get("heartbeat")
        if not isinstance(beat, int | float):
            return "it has no heartbeat"
        age = self.clock() - beat
        if age > self.stale_after_s:
            return f"no heartbeat for {age:.0f} s (stale after {self.stale_after_s:.0f} s)"
        return None

    # -- publishing --------------------------------------------------------------------------
    def _create(self, data: bytes) -> bool:
        """Create the lock file exclusively; False if it already exists."""
        return self.crawl.create_exclusive(LOCK_FILE, data)

    def _remove_stale(self, record: dict[str, Any]) -> bool:
        """Remove the lock file if it still holds ``record``; False if it changed meanwhile."""
        if self.crawl.local:
            aside = f"{self._path}.stale-{uuid.uuid4().hex}"
            try:
                os.rename(self._path, aside)
            except FileNotFoundError:
                return True  # someone else removed it; try to create ours
            try:
                with open(aside, "rb") as fh:
                    moved = json.loads(fh.read())
            except ValueError:
                moved = {"token": None}
            if moved.get("token") != record.get("token"):
                # We moved a fresh lock taken by a third process: put it back.
                try:
                    os.link(aside, self._path)
                except FileExistsError:
                    pass
                os.unlink(aside)
                return False
            os.unlink(aside)
            return True
        current = self.read()
        if current is not None and current.get("token") != record.get("token"):
            return False
        try:
            self.crawl.fs.rm_file(self._path)
        except FileNotFoundError:
            pass
        return True

    def check_free(self) -> None:
        """Raise :class:`LockedError` now if a live writer holds the lock (a stale lock counts as
        free: :meth:`acquire` takes it over). For a command to say so before it starts a Dask
        cluster (issue 34: 6 s to find the lock); the lock itself is still taken by
        :meth:`acquire`, which checks again.

        Raises
        ------
        LockedError
            A live writer holds the lock.
        """
        record = self.read()
        if record is not None and self.stale_reason(record) is None:
            raise LockedError(_locked_message(self.crawl.url, record, self.clock()))

    def acquire(self) -> WriterLock:
        """Take the lock (taking over a stale one) and start the heartbeat thread.

        If this process holds the crawl's lock through a ``WriterLock`` made with ``nest=True``,
        this one nests in that hold instead: same token and start time, its
        :meth:`check` is the holder's, its release leaves the lock to the holder. So the CLI
        takes the lock before it starts a Dask cluster and holds it for the whole command, and
        the steps inside take it again (a fresh-user trial, issue 34: two writers started a
        second apart both started clusters, and the second was refused only 3-4 s later).

        Raises
        ------
        LockedError
            A live writer holds the lock.
        """
        if self._thread is not None or self._outer is not None:
            raise CrawlDirError(f"{self.crawl.url}: this WriterLock is already held")
        with _held_lock:
            outer = _held.get(_key(self.crawl))
        if outer is not None:
            self._outer, self.token, self.started = outer, outer.token, outer.started
            self.took_over = outer.took_over
            return self
        self.started = self.clock()
        for _ in range(3):
            if self._create(self._dump()):
                break
            record = self.read()
            if record is None:
                continue  # released meanwhile
            reason = self.stale_reason(record)
            if reason is None:
                raise LockedError(_locked_message(self.crawl.url, record, self.clock()))
            log.warning(
                "%s: taking over the writer lock of %s: %s",
                self.crawl.url,
                record.get("owner"),
                reason,
            )
            self._remove_stale(record)
            self.took_over = reason
        else:
            record = self.read() or {"owner": "unknown"}
            raise LockedError(_locked_message(self.crawl.url, record, self.clock()))
        global _taken
        _taken = True
        self.lost = False
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._beat_loop, name=f"lock-heartbeat {self.crawl.url}", daemon=True
        )
        self._thread.start()
        if self.nest:
            with _held_lock:
                _held[_key(self.crawl)] = self
        return self

    def _dump(self) -> bytes:
        return (json.dumps(self._record(), sort_keys=True) + "\n").encode("utf-8")

    # -- heartbeat ---------------------------------------------------------------------------
    def beat(self) -> bool:
        """Refresh the heartbeat now; returns False (and sets :attr:`lost`) if the lock is no
        longer ours (it was taken over as stale)."""
        record = self.read()
        if record is None or record.get("token") != self.token:
            if not self.lost:
                log.error(
                    "%s: the writer lock was taken over by %s",
                    self.crawl.url,
                    (record or {}).get("owner", "nobody"),
                )
            self.lost = True
            return False
        data = self._dump()
        if self.crawl.local:
            tmp = f"{self._path}.tmp-{uuid.uuid4().hex}"
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, self._path)
            except BaseException:  # a full disk: no half-written temp file left beside the lock
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        else:
            self.crawl.fs.pipe_file(self._path, data)
        return True

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            try:
                if not self.beat():
                    return
            except OSError as exc:  # a transient store error: try again at the next beat
                log.warning("%s: lock heartbeat failed: %s", self.crawl.url, exc)

    def check(self) -> None:
        """Raise :class:`LockedError` if the lock was lost (call before committing)."""
        if self._outer is not None:
            self._outer.check()
            return
        if self.lost or not self.beat():
            raise LockedError(
                f"{self.crawl.url}: the writer lock was taken over by another process; "
                "this writer must stop"
            )

    def _remove_for_exit(self) -> None:
        """Remove the lock file if it is still ours, without waiting for the heartbeat thread
        (:func:`remove_held_for_exit`)."""
        self._stop.set()
        record = self.read()
        if record is not None and record.get("token") == self.token:
            with contextlib.suppress(FileNotFoundError):
                self.crawl.fs.rm_file(self._path)

    # -- release -----------------------------------------------------------------------------
    def release(self) -> None:
        """Stop the heartbeat and remove the lock file if it is still ours. (A stop signal is
        not raised inside this module's code, :mod:`batchcrawl.console.signals`: the file steps
        of acquire, heartbeat and release are never cut half way.) A nested hold (:meth:`acquire`)
        leaves the lock to its holder."""
        if self._outer is not None:
            self._outer = None
            return
        with _held_lock:
            if _held.get(_key(self.crawl)) is self:
                del _held[_key(self.crawl)]
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        record = self.read()
        if record is not None and record.get("token") == self.token:
            try:
                self.crawl.fs.rm_file(self._path)
            except FileNotFoundError:
                pass

    def __enter__(self) -> WriterLock:
        return self.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _locked_message(url: str, record: dict[str, Any], now: float) -> str:
    beat = record.get("heartbeat")
    age = f", last heartbeat {now - beat:.0f} s ago" if isinstance(beat, int | float) else ""
    where = ""
    if record.get("host") or record.get("pid"):
        where = f" (host {record.get('host')}, pid {record.get('pid')}{age})"
    holder = record.get("owner")
    command = record.get("command")
    if command and command != holder:
        holder = f"{command} (its step {holder})"
    return (
        f"{url}: locked by {holder}{where}; wait for it to finish, or remove "
        f"{LOCK_FILE} if you are sure it is dead"
    )
