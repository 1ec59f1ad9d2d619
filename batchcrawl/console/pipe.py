"""A rich console for stdout that leaves a closed pipe to the CLI (``batchcrawl status CRAWL |
head -2``).

rich's own handling of a reader that went away prints nothing and raises ``SystemExit(1)``
(``Console.on_broken_pipe``): the command exited 1 although everything the reader asked for was
delivered, and before the CLI's handler could make it the exit 0 that ``cat`` and ``grep`` give
(README, exit codes). Here the ``BrokenPipeError`` goes up to the CLI instead.
"""

from __future__ import annotations

import sys

from rich.console import Console


class PipeConsole(Console):
    """A ``rich.console.Console`` on ``sys.stdout`` (by default) whose broken pipe raises
    ``BrokenPipeError`` (caught by ``batchcrawl.cli``: exit 0, nothing more written)."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("file", sys.stdout)
        super().__init__(**kwargs)

    def on_broken_pipe(self) -> None:
        """Stop writing, and let the caller see the closed pipe."""
        self.quiet = True
        raise BrokenPipeError(32, "the reader of stdout closed the pipe")
