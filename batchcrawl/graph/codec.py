"""Gap + variable-byte coding of adjacency lists in blocks with an index, numpy-vectorised
(Boldi & Vigna, "The WebGraph Framework I", WWW 2004, §3: gaps and a first successor coded relative
to the node; Manning, Raghavan & Schütze, *Introduction to Information Retrieval*, §5.3.1, variable
byte codes, and §20.4, the connectivity server).

The lists of ``n`` consecutive nodes ``first_id .. first_id + n - 1`` become one byte string: per
node its degree ``d``, then (if ``d > 0``) ``zigzag(s_0 - node)`` and the gaps ``s_i - s_{i-1}``
(``>= 1``: lists are sorted and without duplicates) of its sorted successors, every number as a
variable-byte code (7 bits per byte, low bits first, high bit set on every byte but the last). The
index holds the byte offset of every ``block``-th node's list, so a query decodes at most one block.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Nodes per indexed block: a query decodes at most this many lists.
BLOCK = 32


@dataclass(frozen=True)
class CodedLists:
    """The coded lists of consecutive nodes.

    Attributes
    ----------
    data
        uint8 array: the variable-byte codes of every node's list, in node order.
    index
        uint64 array, shape ``(ceil(n / block) + 1,)``: byte offset in ``data`` where each block of
        ``block`` nodes starts, then ``len(data)``.
    block
        Nodes per block.
    """

    data: np.ndarray
    index: np.ndarray
    block: int = BLOCK


def zigzag(v: np.ndarray) -> np.ndarray:
    """Signed int64 -> uint64 with small magnitudes small: 0, -1, 1, -2 -> 0, 1, 2, 3."""
    v = np.asarray(v, dtype=np.int64)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def unzigzag(u: np.ndarray) -> np.ndarray:
    """Inverse of :func:`zigzag`."""
    u = np.asarray(u, dtype=np.uint64)
    return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)


def vbyte_encode(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variable-byte codes of ``values`` (uint64, shape ``(m,)``), concatenated.

    Returns the uint8 codes and the byte length of each value's code (int64, shape ``(m,)``).
    """
    values = np.asarray(values, dtype=np.uint64)
    nbytes = np.ones(len(values), dtype=np.int64)
    rest = values >> np.uint64(7)
    while rest.any():
        nbytes += rest > 0
        rest >>= np.uint64(7)
    starts = np.cumsum(nbytes) - nbytes
    pos = np.arange(int(nbytes.sum()), dtype=np.int64) - np.repeat(starts, nbytes)
    owner = np.repeat(values, nbytes)
    out = ((owner >> (np.uint64(7) * pos.astype(np.uint64))) & np.uint64(0x7F)).astype(np.uint8)
    more = pos < np.repeat(nbytes - 1, nbytes)
    out[more] |= np.uint8(0x80)
    return out, nbytes


def vbyte_decode(data: np.ndarray) -> np.ndarray:
    """Decode concatenated variable-byte codes (uint8) into uint64 values."""
    data = np.asarray(data, dtype=np.uint8)
    if not len(data):
        return np.zeros(0, dtype=np.uint64)
    last = (data & 0x80) == 0
    group = np.concatenate(([0], np.cumsum(last)[:-1]))
    first = np.flatnonzero(np.concatenate(([True], last[:-1])))
    pos = np.arange(len(data)) - first[group]
    parts = (data & 0x7F).astype(np.uint64) << (np.uint64(7) * pos.astype(np.uint64))
    return np.add.reduceat(parts, first)


def encode(
    first_id: int, n: int, src: np.ndarray, dst: np.ndarray, block: int = BLOCK
) -> CodedLists:
    """Code the lists of nodes ``first_id .. first_id + n - 1``.

    Parameters
    ----------
    first_id
        Id of the first node.
    n
        Number of nodes (nodes without successors get an empty list).
    src, dst
        int64 arrays, shape ``(e,)``: arcs ``src -> dst`` with ``src`` in the node range, sorted by
        ``(src, dst)`` and without duplicates.
    block
        Nodes per indexed block.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    local = src - first_id
    degree = (
        np.bincount(local, minlength=n).astype(np.int64) if len(local) else np.zeros(n, np.int64)
    )
    new_node = np.ones(len(dst), dtype=bool)
    new_node[1:] = src[1:] != src[:-1]
    arc_values = np.empty(len(dst), dtype=np.uint64)
    arc_values[~new_node] = (dst[1:] - dst[:-1])[~new_node[1:]].astype(np.uint64)
    arc_values[new_node] = zigzag(dst[new_node] - src[new_node])
    # the value stream: node i's degree, then its arc values
    slot_of_degree = np.arange(n, dtype=np.int64) + (np.cumsum(degree) - degree)
    values = np.empty(n + len(dst), dtype=np.uint64)
    values[slot_of_degree] = degree.astype(np.uint64)
    is_arc = np.ones(len(values), dtype=bool)
    is_arc[slot_of_degree] = False
    values[is_arc] = arc_values
    data, nbytes = vbyte_encode(values)
    value_start = np.cumsum(nbytes) - nbytes
    block_starts = value_start[slot_of_degree[::block]] if n else np.zeros(0, np.int64)
    index = np.concatenate((block_starts, [len(data)])).astype(np.uint64)
    return CodedLists(data, index, block)


def decode_list(coded: CodedLists, first_id: int, node: int) -> np.ndarray:
    """The sorted successors (int64 ids) of ``node`` (``first_id <= node < first_id + n``)."""
    local = node - first_id
    b, skip = divmod(local, coded.block)
    lo, hi = int(coded.index[b]), int(coded.index[b + 1])
    values = vbyte_decode(coded.data[lo:hi])
    at = 0
    for _ in range(skip):
        at += 1 + int(values[at])
    degree = int(values[at])
    if degree == 0:
        return np.zeros(0, dtype=np.int64)
    arcs = values[at + 1 : at + 1 + degree].astype(np.int64)
    arcs[0] = node + unzigzag(values[at + 1 : at + 2])[0]
    return np.cumsum(arcs)


def decode_all(coded: CodedLists, first_id: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every arc of the ``n`` nodes: ``(src, dst)`` int64 arrays sorted by ``(src, dst)``."""
    values = vbyte_decode(coded.data)
    srcs, dsts = [], []
    at = 0
    for local in range(n):
        degree = int(values[at])
        if degree:
            node = first_id + local
            arcs = values[at + 1 : at + 1 + degree].astype(np.int64)
            arcs[0] = node + unzigzag(values[at + 1 : at + 2])[0]
            dsts.append(np.cumsum(arcs))
            srcs.append(np.full(degree, node, dtype=np.int64))
        at += 1 + degree
    if not srcs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(srcs), np.concatenate(dsts)


_MAGIC = b"BCGL"  # batchcrawl graph lists, format 1
_HEADER = np.dtype([("magic", "S4"), ("block", "<u4"), ("index_len", "<u8"), ("data_len", "<u8")])


def to_bytes(coded: CodedLists) -> bytes:
    """The file form of ``coded``: a 24-byte header (``BCGL``, block, index and data lengths),
    the index (little-endian uint64), the data."""
    header = np.array([(_MAGIC, coded.block, len(coded.index), len(coded.data))], dtype=_HEADER)
    return header.tobytes() + coded.index.astype("<u8").tobytes() + coded.data.tobytes()


def from_bytes(raw: bytes, origin: str) -> CodedLists:
    """Parse :func:`to_bytes` output; ``ValueError`` naming ``origin`` if it is not one."""
    if len(raw) < _HEADER.itemsize or raw[:4] != _MAGIC:
        raise ValueError(f"{origin}: not a batchcrawl graph list file (bad header)")
    header = np.frombuffer(raw, dtype=_HEADER, count=1)[0]
    n_index, n_data = int(header["index_len"]), int(header["data_len"])
    at = _HEADER.itemsize
    if len(raw) != at + 8 * n_index + n_data:
        raise ValueError(f"{origin}: truncated graph list file ({len(raw)} bytes)")
    index = np.frombuffer(raw, dtype="<u8", count=n_index, offset=at)
    data = np.frombuffer(raw, dtype=np.uint8, count=n_data, offset=at + 8 * n_index)
    return CodedLists(data, index, int(header["block"]))
