"""The indexed binary heap the workbench (:mod:`batchcrawl.fetch.workbench`) orders its IP entries
and visit states with (BUbiNG §4.2: choosing the next host in O(log n), never scanning)."""

from __future__ import annotations

from typing import Any

__all__ = ["IndexedHeap", "count_ready"]


class IndexedHeap:
    """Binary min-heap of nodes with ``key`` (unique, comparable) and ``pos`` (index or None)
    attributes, so a node can be removed or re-keyed in O(log n)."""

    __slots__ = ("a",)

    def __init__(self) -> None:
        self.a: list[Any] = []

    def push(self, node: Any) -> None:
        node.pos = len(self.a)
        self.a.append(node)
        self._up(node.pos)

    def pop(self) -> Any:
        a = self.a
        top = a[0]
        last = a.pop()
        if last is not top:
            a[0] = last
            last.pos = 0
            self._down(0)
        top.pos = None
        return top

    def remove(self, node: Any) -> None:
        a = self.a
        i = node.pos
        last = a.pop()
        if last is not node:
            a[i] = last
            last.pos = i
            self._up(i)
            self._down(last.pos)
        node.pos = None

    def update(self, node: Any) -> None:
        """Restore heap order after ``node.key`` changed."""
        self._up(node.pos)
        self._down(node.pos)

    def _up(self, i: int) -> None:
        a = self.a
        node = a[i]
        key = node.key
        while i > 0:
            p = (i - 1) >> 1
            parent = a[p]
            if parent.key <= key:
                break
            a[i] = parent
            parent.pos = i
            i = p
        a[i] = node
        node.pos = i

    def _down(self, i: int) -> None:
        a = self.a
        n = len(a)
        node = a[i]
        key = node.key
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and a[c + 1].key < a[c].key:
                c += 1
            child = a[c]
            if key <= child.key:
                break
            a[i] = child
            child.pos = i
            i = c
        a[i] = node
        node.pos = i


def count_ready(a: list[Any], now: float, cap: int) -> int:
    """Nodes of heap array ``a`` whose time ``key[0]`` is ``<= now``, counting at most ``cap``."""
    count = 0
    stack = [0] if a else []
    while stack and count < cap:
        i = stack.pop()
        if a[i].key[0] <= now:
            count += 1
            stack.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(a))
    return count
