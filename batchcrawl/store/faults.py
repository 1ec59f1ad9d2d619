"""Which ``OSError`` means the crawl's storage cannot take writes (full, over quota, a file past
the size limit, read-only): a fault of the place, not of one page or file, so a writer stops at
the first one instead of failing every page after it, and the CLI names it in one line."""

from __future__ import annotations

import errno

#: errno values of a storage that cannot take writes (``ENOSPC``, ``EDQUOT``, ``EFBIG``, ``EROFS``).
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def storage_fault(exc: BaseException | None) -> OSError | None:
    """The ``OSError`` with an errno in :data:`STORAGE_ERRNOS` that is ``exc`` or caused it
    (``raise ... from``, e.g. a :class:`~batchcrawl.errors.WarcError` over a failed write);
    None if there is none."""
    seen = 0
    while exc is not None and seen < 16:  # a cause chain is short; never loop on a cycle
        if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None


def is_storage_fault(exc: BaseException) -> bool:
    """True if ``exc`` is, or was caused by, a storage that cannot take writes
    (:func:`storage_fault`)."""
    return storage_fault(exc) is not None
