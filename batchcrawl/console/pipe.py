"""A rich console for stdout that leaves a closed pipe to the CLI (``batchcrawl status CRAWL |
head -2``).

rich's own handling of a reader that went away prints nothing and raises ``SystemExit(1)``
(``Console.on_broken_pipe``): the command exited 1 although everything the reader asked for was
delivered, and before the CLI's handler could make it the exit 0 that ``cat`` and ``grep`` give
(README, exit codes). Here the ``BrokenPipeError`` goes up to the CLI instead.

rich pads every table cell and title to its column's width, so each line of a table ended in
spaces (a fresh-user trial saw them in ``batchcrawl status | cat -A``). Written to a pipe or a
file, lines lose their trailing blanks (:class:`LineEndWriter`); a terminal shows no difference.
"""

from __future__ import annotations

import re
import sys
from typing import IO, Any

from rich.console import Console

_TRAILING_BLANKS = re.compile(r"[ \t]+(?=\n)")


class LineEndWriter:
    """A text stream that writes ``stream``'s text without the blanks (spaces, tabs) before each
    line break of a chunk; everything else (``flush``, ``encoding``, ``fileno``, ``isatty``) is
    ``stream``'s. Blanks at the very end of a chunk stay: they may be inside a line."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` (str) without its blanks before line breaks; return its length as
        given, as a text stream's ``write`` does for what it accepted."""
        self._stream.write(_TRAILING_BLANKS.sub("", text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class PipeConsole(Console):
    """A ``rich.console.Console`` on ``sys.stdout`` (by default) whose broken pipe raises
    ``BrokenPipeError`` (caught by ``batchcrawl.cli``: exit 0, nothing more written), and whose
    lines end without blanks when the stream is not a terminal (:class:`LineEndWriter`)."""

    def __init__(self, **kwargs) -> None:
        stream = kwargs.get("file") or sys.stdout
        isatty = getattr(stream, "isatty", None)
        kwargs["file"] = stream if isatty is not None and isatty() else LineEndWriter(stream)
        super().__init__(**kwargs)

    def on_broken_pipe(self) -> None:
        """Stop writing, and let the caller see the closed pipe."""
        self.quiet = True
        raise BrokenPipeError(32, "the reader of stdout closed the pipe")
