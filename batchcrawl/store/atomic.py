"""Whole-or-absent file writes on any fsspec filesystem (docs/design.md §3, "Atomic rounds").

:func:`open_whole` is the one way batchcrawl writes a data file that readers may open by name: the
crawl's tables (:meth:`batchcrawl.store.crawldir.CrawlDir.open_output`), the shuffle files and the
export's files (:class:`batchcrawl.export.lake.Destination`). When the ``with`` block ends with an
error, nothing appears at the final name, on every filesystem:

* **local** — the bytes go to ``NAME.tmp-<uuid>`` in the same folder, renamed into place
  (``os.replace``) on success and removed on error (``gc`` removes the leftovers of a killed process,
  by the ``.tmp-`` marker);
* **object stores** (fsspec's ``AbstractBufferedFile``: s3fs, gcsfs, adlfs) — the object is written at its name
  as a single or multipart upload that is only completed by a clean ``close``; on error the file's
  ``discard`` drops the buffer and aborts the multipart upload (S3 ``AbortMultipartUpload``);
* **any other filesystem** — temp name, then ``fs.mv`` on success, ``fs.rm`` on error.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import uuid
from collections.abc import Iterator, Mapping
from typing import IO, Any

import fsspec
from fsspec.spec import AbstractBufferedFile

from batchcrawl.store.paths import TMP_MARKER

log = logging.getLogger(__name__)


def protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    """The protocols of ``fs`` (fsspec gives one string or a tuple): ``("file", "local")``."""
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def is_local(fs: fsspec.AbstractFileSystem) -> bool:
    """True if ``fs`` is the local filesystem (its protocols include ``file``)."""
    return "file" in protocols(fs)


class Location:
    """A folder named by a local path or an fsspec URL (``s3://bucket/x``): its filesystem
    ``fs``, its ``root`` path on it, and whether it is ``local``. The base of a crawl directory and
    of an export destination.

    Parameters
    ----------
    url
        Local path or fsspec URL.
    storage_options
        Passed to fsspec (credentials otherwise come from the usual fsspec/boto settings).
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.url = str(url)
        root: str
        self.fs, root = fsspec.core.url_to_fs(self.url, **dict(storage_options or {}))
        self.root = root.rstrip("/") or root
        self.local = is_local(self.fs)

    def path(self, rel: str) -> str:
        """Filesystem path of ``rel`` (relative to the root)."""
        return posixpath.join(self.root, rel)


def temp_name(path: str) -> str:
    """A fresh temp name beside ``path``: ``path.tmp-<32 hex digits>``."""
    return f"{path}{TMP_MARKER}{uuid.uuid4().hex}"


@contextlib.contextmanager
def open_whole(fs: fsspec.AbstractFileSystem, path: str, **open_kwargs: Any) -> Iterator[IO[bytes]]:
    """Open ``path`` on ``fs`` for binary writing; the file is whole or absent once the block ends.

    Parameters
    ----------
    fs
        The filesystem (local, an object store, or any other fsspec filesystem).
    path
        Final path on ``fs`` (without protocol). Parent folders are created.
    **open_kwargs
        Passed to ``fs.open`` (e.g. ``block_size``: bytes per multipart part on object stores).

    Yields
    ------
    IO[bytes]
        The file handle; do not close it yourself.

    Raises
    ------
    OSError
        Creating, writing or publishing failed; nothing is left at ``path``. An exception raised
        inside the block is re-raised after the partial file is discarded.
    """
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    local = is_local(fs)
    target = temp_name(path)
    fh = fs.open(target, "wb", **open_kwargs)
    if isinstance(fh, AbstractBufferedFile):
        # A buffered upload creates nothing before close: write at the final name instead.
        _drop_upload(fh)
        target = path
        fh = fs.open(path, "wb", **open_kwargs)
    try:
        yield fh
        fh.close()  # completes the upload; a failure here is a failure of the write
    except BaseException:
        _discard(fs, fh, target if target != path else None, local)
        raise
    if target != path:
        try:
            if local:
                os.replace(target, path)
            else:
                fs.mv(target, path)
        except BaseException:
            _remove_quietly(fs, target, local)
            raise


def _discard(fs: fsspec.AbstractFileSystem, fh: Any, temp: str | None, local: bool) -> None:
    """Drop a partial write: abort the upload, or close and remove the temp file."""
    if temp is None:  # a buffered upload at the final name
        try:
            _drop_upload(fh)
        except Exception as exc:  # noqa: BLE001 - cleanup after the real error, which is re-raised
            log.debug("discarding a partial upload failed: %s", exc)
        return
    _close_quietly(fh)
    if temp is not None:
        _remove_quietly(fs, temp, local)


def _drop_upload(fh: AbstractBufferedFile) -> None:
    """Abort a buffered upload and mark the file closed, so that its ``__del__`` does not try to
    flush (and so publish) what is left of it."""
    try:
        fh.discard()
    finally:
        fh.closed = True


def _close_quietly(fh: Any) -> None:
    try:
        fh.close()
    except Exception as exc:  # noqa: BLE001 - cleanup after the real error, which is re-raised
        log.debug("closing a partial file failed: %s", exc)


def _remove_quietly(fs: fsspec.AbstractFileSystem, path: str, local: bool) -> None:
    try:
        if local:
            os.unlink(path)
        else:
            fs.rm(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.debug("removing temp file %s failed: %s", path, exc)
