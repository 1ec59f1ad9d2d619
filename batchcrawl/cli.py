"""The ``batchcrawl`` command line (docs/design.md §9): a thin layer over the library.

Every command takes ``--set section.key=value`` (repeatable). Configuration precedence, lowest
first: defaults < ``CRAWL/crawl.toml`` (``--config FILE`` at ``init``) < ``BATCHCRAWL_SECTION__KEY``
environment variables < ``--set`` < explicit flags (``--workers``, ``--keep`` ...). Logs go to
stderr (``-v`` INFO, ``-vv`` DEBUG); results go to stdout (JSON where a program reads them).

Exit codes
----------
==== =================================================================================
code meaning
==== =================================================================================
0    success
1    failure (an error during the step; see stderr)
2    bad input: config key or value, URL, SQL statement, command-line usage
3    crawl directory error: missing, not a crawl, already exists, not empty, malformed manifest or
     schema, cannot be written (read-only, full, a file in the way)
4    locked: another writer holds the crawl's lock, or committed first
5    a Dask worker was lost mid-round: nothing of it was committed; rerun
75   nothing due: the frontier has no URL to fetch (Airflow maps it to a skip)
130  stopped by SIGINT (Ctrl-C): the lock is released, committed rounds stay, the rest reruns
143  stopped by SIGTERM (Airflow, Kubernetes): the same
==== =================================================================================

Errors derived from :class:`~batchcrawl.errors.BatchcrawlError` print one line
``batchcrawl: error: MESSAGE`` on stderr and exit with their ``exit_code``.
"""

from __future__ import annotations

import sys

from batchcrawl.console.early import exit_before_start, exiting, finished

# first, when this is the program (python -m batchcrawl.cli, the batchcrawl script), not a module
# imported by another: a stop signal while the rest is imported (pyarrow, fsspec: a second on a
# busy machine) ends the process with one line, not a KeyboardInterrupt traceback (issue 34); the
# handlers of stop_on_signals take over in _Group.invoke
if (__name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] == "batchcrawl") and not any(
    "multiprocessing" in arg for arg in sys.orig_argv
):  # not in a Dask worker process started by spawn (it imports the parent's main script again,
    # with its argv: the handler there unblocked SIGINT, and a terminal's Ctrl-C killed the workers)
    exit_before_start()

import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Iterable, Mapping  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from batchcrawl import __version__  # noqa: E402
from batchcrawl.config import Config, load_config, to_toml  # noqa: E402
from batchcrawl.console.signals import (  # noqa: E402
    quiet_stop_races,
    stop_behind,
    stop_on_signals,
)
from batchcrawl.errors import BatchcrawlError, ConfigError, CrawlDirError, Stopped  # noqa: E402
from batchcrawl.records import REQUEUABLE_STATUSES, UrlStatus  # noqa: E402
from batchcrawl.store.crawldir import CONFIG_FILE, CrawlDir  # noqa: E402

log = logging.getLogger("batchcrawl")


# -- configuration ---------------------------------------------------------------------------
def _config_for_reading(crawl: CrawlDir, sets: Iterable[str], command: str) -> None:
    """Check the config layers of a command that only reads the crawl and uses no setting
    (``status``, ``sql``): a bad key or value is said as a warning and the command goes on (a
    fresh-user trial: a typo in ``crawl.toml`` or a stray ``BATCHCRAWL_FETCH__SHARDZ`` made
    ``status`` exit 2, so the crawl could not even be looked at); commands that write still
    refuse it, and so does this one for a bad ``--set`` given to it.

    Raises
    ------
    ConfigError
        A bad ``--set`` pair of this command line."""
    try:
        load_crawl_config(crawl, sets)
    except ConfigError as exc:
        if sets:
            load_crawl_config(crawl, sets, environ={})  # raises if a --set pair is the bad one
        click.echo(f"batchcrawl: warning: {exc} ({command} reads the crawl without it)", err=True)


def load_crawl_config(
    crawl: CrawlDir,
    sets: Iterable[str] = (),
    flags: Mapping[str, Mapping[str, Any]] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Config:
    """The effective config of ``crawl``: its ``crawl.toml`` (errors name it as ``FILE:LINE``) <
    ``BATCHCRAWL_*`` variables of ``environ`` (default ``os.environ``) < ``sets`` < ``flags``.

    Raises
    ------
    ConfigError
        A bad key or value in any layer; the message names its origin. Also a
        ``frontier.buckets`` set by a layer after ``crawl.toml`` to another count than the
        crawl's: the bucket count is fixed by ``init`` (every frontier file is one bucket).
    """
    files = [(crawl.full_url(CONFIG_FILE), crawl.config_text())]
    cfg = load_config(
        files=files,
        environ=os.environ if environ is None else environ,
        sets=sets,
        flags={
            s: {k: v for k, v in kv.items() if v is not None} for s, kv in (flags or {}).items()
        },
    )
    fixed = crawl.manifest().buckets
    asked = cfg.frontier.buckets
    if asked != fixed and asked != load_config(files=files, environ={}).frontier.buckets:
        raise ConfigError(
            f"frontier.buckets = {asked}: this crawl has {fixed} DRUM buckets, "
            "fixed when it was created (batchcrawl init); drop the setting"
        )
    return cfg


# -- plumbing --------------------------------------------------------------------------------
#: Commands that never write to the crawl: a stop says so, not "before it wrote anything" (it may
#: have printed half its output: issue 34, a fresh-user trial).
READ_ONLY_COMMANDS = frozenset({"status", "sql", "report", "export"})


class _Group(click.Group):
    """Maps :class:`BatchcrawlError` to one stderr line and its exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, **kwargs)
        except SystemExit as exc:  # the process's exit code (console.early: how it ends)
            exiting(exc.code)
            raise

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # --help and --version print while the arguments are parsed, before invoke
        try:
            return super().parse_args(ctx, args)
        except BrokenPipeError:
            _drop_stdout()
            ctx.exit(0)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with stop_on_signals():
                try:
                    result = super().invoke(ctx)
                except (BatchcrawlError, click.exceptions.ClickException, click.exceptions.Exit):
                    raise  # ours (a Stopped says more than a generic stop line) and click's
                except Exception as exc:
                    # a library that caught the stop's KeyboardInterrupt and raised its own
                    # error (DuckDB's "Query interrupted"): the stop it was
                    stop = stop_behind(exc)
                    if stop is None:
                        raise
                    raise stop from exc
            finished(0)
            return result
        except click.exceptions.Exit as exc:  # the command's own ctx.exit(code), after its result
            finished(exc.exit_code)
            raise
        except BatchcrawlError as exc:
            log.debug("error details", exc_info=True)
            label = f"{exc.label}: " if exc.label else ""
            click.echo(f"batchcrawl: {label}{exc}", err=True)
            ctx.exit(exc.exit_code)
        except FileNotFoundError as exc:
            # a data file named by a committed manifest is gone: the directory is damaged
            log.debug("error details", exc_info=True)
            click.echo(
                f"batchcrawl: error: missing file {exc.filename or exc}: a file named by the "
                "crawl's manifest is gone; restore it, or query an older generation "
                "(--generation N)",
                err=True,
            )
            ctx.exit(3)
        except BrokenPipeError:
            # the reader of our stdout went away (`batchcrawl sql ... | head`): what was asked
            # for was delivered as far as anyone reads it; every command prints its result after
            # its commit, so nothing is left half done. Quiet, like cat or grep.
            _drop_stdout()
            ctx.exit(0)
        except OSError as exc:
            # read-only or full file system, a file where a folder must be ...: the step did not
            # commit, so the crawl is as it was
            log.debug("error details", exc_info=True)
            where = exc.filename or "the crawl directory"
            click.echo(
                f"batchcrawl: error: {where}: {exc.strerror or exc}; the step did not commit and "
                "the last generation is intact: make the crawl directory writable (free space) "
                "and rerun",
                err=True,
            )
            ctx.exit(3)
        except KeyboardInterrupt as exc:
            name = getattr(exc, "signal_name", "SIGINT")
            command = ctx.invoked_subcommand
            lock = sys.modules.get("batchcrawl.store.lock")  # not imported: no lock taken
            publish = sys.modules.get("batchcrawl.store.publish")  # not imported: no commit
            committed = publish.committed_in_this_process() if publish else None
            if committed is not None:
                # the step's commit happened; only its summary was cut short
                msg = (f"stopped by {name} after `batchcrawl {command}` committed generation "
                       f"{committed[1]} of {committed[0]}: its result stands (`batchcrawl "
                       "status` shows it)")  # fmt: skip
            elif command != "init" and not (lock and lock.taken_in_this_process()):
                # before it took the crawl's lock (loading, the config, opening the crawl):
                # nothing was written (a fresh-user trial, issue 34: a round stopped at 0.5 s
                # was told "before the step finished; its commit did not happen")
                msg = (f"stopped by {name}: `batchcrawl {command}` only reads the crawl; nothing "
                       "was changed" if command in READ_ONLY_COMMANDS else
                       f"stopped by {name} before `batchcrawl {command}` changed the crawl: "
                       "nothing was changed")  # fmt: skip
            else:
                msg = (f"stopped by {name} before the step finished; its commit did not "
                       "happen, committed generations are intact; rerun it")  # fmt: skip
            click.echo(f"batchcrawl: {msg}", err=True)
            ctx.exit(getattr(exc, "exit_code", 130))


def _drop_stdout() -> None:
    """Point file descriptor 1 at /dev/null, so that the interpreter's flush of ``sys.stdout`` at
    exit does not fail a second time on a pipe whose reader is gone (the recipe of the Python
    docs, "Note on SIGPIPE" in the signal module)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _set_verbosity(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger("batchcrawl")
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.handlers[:] = [handler]
    root.setLevel(min(root.level or logging.WARNING, level))


def _verbose_after(ctx: click.Context, param: click.Parameter, value: int) -> None:
    if value:
        _set_verbosity(value)


def _sets(f):
    f = click.option(
        "-v",
        "--verbose",
        count=True,
        expose_value=False,
        callback=_verbose_after,
        help="Log more to stderr (-v INFO, -vv DEBUG); also accepted before the command.",
    )(f)
    return click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="SECTION.KEY=VALUE",
        help="Override a config setting (repeatable), e.g. --set fetch.shards=4.",
    )(f)


def _not_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise click.BadParameter("must not be empty")
    return value


def _crawl_arg(f):
    return click.argument("crawl_url", metavar="CRAWL", callback=_not_empty)(f)


def _echo_json(data: Any) -> None:
    """One JSON line on stdout. A reader of stdout that went away (``round CRAWL | true``, ``crawl
    CRAWL | head -1``) ends the JSON lines, not the command: its rounds go on and its closing
    summary still reaches stderr (a fresh-user trial, issue 34: the summary was lost)."""
    try:
        click.echo(json.dumps(data, sort_keys=False, default=str))
    except BrokenPipeError:
        _drop_stdout()


def _open(crawl_url: str) -> CrawlDir:
    return CrawlDir.open(crawl_url)


def _lock(crawl: CrawlDir, command: str):
    from batchcrawl.store.lock import WriterLock

    return WriterLock(crawl, owner=f"batchcrawl {command} (pid {os.getpid()})")


def _inject(
    crawl: CrawlDir, cfg: Config, stream: io.TextIOBase, source: str, refetch: bool = False
) -> dict:
    from batchcrawl.frontier.inject import inject  # lazy: pulls in URL handling

    with _lock(crawl, "inject"):
        summary = inject(
            crawl, cfg, (line.rstrip("\r\n") for line in stream), source=source, refetch=refetch
        )
    label = "error" if no_crawlable_seed(summary) else "warning"
    for line in seed_warnings(summary):
        click.echo(line if line.startswith(" ") else f"batchcrawl: {label}: {line}", err=True)
    return summary


def no_crawlable_seed(summary: Mapping[str, Any]) -> bool:
    """Whether an inject ``summary`` had bad seed lines and not one URL that can be crawled: bad
    input, exit 2 once its JSON summary is printed (issue 34: ``init`` with only bad seeds
    exited 0). A file of blank lines and comments only, or of known URLs, is not an error."""
    good = summary["lines"] - summary["skipped"] - summary["bad_lines"]
    return bool(summary["bad_lines"]) and good == 0


_BAD_LINES_SHOWN = 5  # bad and filtered seed lines shown on stderr; the JSON lists more


def _not_injected_parts(summary: Mapping[str, Any], dropped: str) -> list[str]:
    """Why the lines of an inject ``summary`` that did not become queued URLs (or, with
    ``--refetch``, known URLs made due again) did not, one part per kind (only the kinds there
    are); their counts add up to ``lines - queued - refetch``."""
    n_bad, n_skip = summary["bad_lines"], summary["skipped"]
    n_dup = summary.get("duplicates", 0)
    n_known = summary.get("seeds_known", 0) - summary.get("refetch", 0)
    return [
        part
        for n, part in (
            (n_bad, f"{n_bad:,} bad line{'s' * (n_bad != 1)}"),
            (dropped, dropped),
            (n_dup, f"{n_dup:,} duplicate{'s' * (n_dup != 1)} of an earlier line"),
            (n_known, f"{n_known:,} already in the crawl"),
            (n_skip, f"{n_skip:,} blank or comment line{'s' * (n_skip != 1)} skipped"),
        )
        if n
    ]


def _problem_lines(summary: Mapping[str, Any], source: str) -> list[str]:
    """The stderr lines naming the bad lines and the new seeds the URL filters dropped, by line
    number, at most :data:`_BAD_LINES_SHOWN` of them in all (each kind keeps a share when both
    are there), and a last line counting the rest."""
    bad = list(summary.get("bad_line_list") or [])
    filt = list(summary.get("filtered_line_list") or [])
    n_filtered = sum((summary.get("filtered") or {}).values())
    n_filt_shown = min(len(filt), max(_BAD_LINES_SHOWN - len(bad), _BAD_LINES_SHOWN // 2))
    n_bad_shown = min(len(bad), _BAD_LINES_SHOWN - n_filt_shown)
    shown = [(b["line"], b["reason"]) for b in bad[:n_bad_shown]] + [
        (f["line"], f"dropped by the URL filters ({f['reason']}); see [filters] in crawl.toml")
        for f in filt[:n_filt_shown]
    ]
    out = [f"  {source}:{line}: {reason}" for line, reason in sorted(shown)]
    more = summary["bad_lines"] + n_filtered - len(shown)
    if more > 0:
        out.append(
            f"  ... and {more:,} more (bad_line_list, filtered_line_list in the JSON summary)"
        )
    return out


def seed_warnings(summary: Mapping[str, Any]) -> list[str]:
    """Lines for stderr about an inject ``summary`` (:func:`batchcrawl.frontier.inject.inject`):
    the lines not injected (how many, and why, adding up: bad, dropped by the URL filters,
    duplicate, known, blank or comment), the first few bad and filtered lines with line number
    and reason, and an empty seed file."""
    from batchcrawl.console.progress import counted
    from batchcrawl.frontier.inject import filtered_text

    source = summary.get("source", "-")
    out = []
    dropped = filtered_text(summary)  # "1 dropped by the URL filters (url_length 1)" or ""
    if summary["bad_lines"]:
        refetch = summary.get("refetch", 0)
        not_injected = summary["lines"] - summary.get("queued", 0) - refetch
        out.append(
            f"{source}: {not_injected:,} of {summary['lines']:,} lines were not injected: "
            + ", ".join(_not_injected_parts(summary, dropped))
            + (
                f" ({counted(refetch, 'known URLs')} made due again by --refetch)"
                if refetch
                else ""
            )
            + "; "
            + (
                "fix them and inject the file again (the good lines are in, repeats are skipped)"
                if not no_crawlable_seed(summary)
                else "none of its lines is a URL that can be crawled: fix them and inject the file "
                "again (`batchcrawl inject CRAWL FILE`)"
            )
        )
        out += _problem_lines(summary, source)
    elif dropped:
        out.append(
            f"{source}: of {summary['seeds_new']} new seeds, {dropped}; those are in the "
            "frontier as filtered and are not crawled (see [filters] in crawl.toml)"
        )
        out += _problem_lines(summary, source)
    if summary["lines"] == summary["skipped"]:
        out.append(
            f"{source}: no seed URL in it ({summary['lines']} lines, all blank or # comments); "
            "nothing was injected"
        )
    elif summary.get("committed") is False and not no_crawlable_seed(summary):  # said above
        out.append(
            f"{source}: no new seed URL ({summary['seeds_known']} known, {summary['bad_lines']} "
            "bad); the frontier is unchanged and no generation was committed"
        )
    return out


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="Log more to stderr (-v INFO, -vv DEBUG).")
@click.version_option(__version__, prog_name="batchcrawl")
def main(verbose: int) -> None:
    """batchcrawl: a batch-cycle web crawler on Dask and Parquet."""
    # a Dask actor call cut short by Ctrl-C/SIGTERM leaves its result coroutine unawaited; the
    # interpreter's warning about it tells a user nothing (the stop message says what happened)
    warnings.filterwarnings(
        "ignore", r"coroutine 'ActorFuture\._result' was never awaited", RuntimeWarning
    )
    quiet_stop_races()  # distributed's AllExit after a stop signal closed the client
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("batchcrawl")
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    # progress lines are INFO but shown without -v: a long round must never be silent
    logging.getLogger("batchcrawl.console.progress").setLevel(logging.INFO)
    _set_verbosity(verbose)


# -- init / inject ---------------------------------------------------------------------------
@main.command()
@_crawl_arg
@click.option(
    "--seeds",
    type=click.File("r", encoding="utf-8-sig", errors="surrogateescape"),
    help="Seed URLs, one a line.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(exists=True, dir_okay=False),
    envvar="BATCHCRAWL_CONFIG",
    help="TOML config to start from (default: the built-in defaults).",
)
@_sets
def init(crawl_url: str, seeds: io.TextIOBase | None, config_file: str | None, sets) -> None:
    """Create the crawl CRAWL (never overwrites one) and optionally inject seeds.

    Writes CRAWL/crawl.toml with the effective configuration; the bucket count
    (frontier.buckets) is fixed from then on. Prints a JSON summary.
    """
    files = []
    if config_file:
        with open(config_file, "rb") as fh:
            raw = fh.read()
        try:
            files.append((config_file, raw.decode("utf-8")))
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{config_file}: not a UTF-8 TOML file ({exc})") from None
    cfg = load_config(files=files, environ=os.environ, sets=sets)
    try:
        crawl = CrawlDir.create(crawl_url, to_toml(cfg), buckets=cfg.frontier.buckets)
        out: dict[str, Any] = {"crawl": crawl.url, "generation": 0,
                               "buckets": cfg.frontier.buckets}  # fmt: skip
        if seeds is not None:
            out["inject"] = _inject(crawl, cfg, seeds, source=getattr(seeds, "name", "-"))
            out["generation"] = out["inject"]["generation"]
    except KeyboardInterrupt as exc:
        raise _init_stopped(crawl_url, seeds, exc) from None
    _echo_json(out)
    if seeds is not None and no_crawlable_seed(out["inject"]):
        click.echo(f"batchcrawl: the crawl {crawl.url} was created without seeds", err=True)
        click.get_current_context().exit(2)


def _init_stopped(crawl_url: str, seeds: io.TextIOBase | None, exc: BaseException) -> Stopped:
    """The :class:`Stopped` error for ``init`` stopped by ``exc``, saying what exists now (issue
    34, fresh-user trials: "rerun it" where a rerun is refused, "its result stands" where the
    seeds were not injected). Stopped before generation 0 was committed, the partial crawl this
    process wrote (only its own files: :func:`~batchcrawl.store.crawldir.created_in_this_process`)
    is removed, so that a rerun works."""
    from batchcrawl.store.crawldir import created_in_this_process
    from batchcrawl.store.publish import committed_in_this_process

    name = getattr(exc, "signal_name", "SIGINT")
    code = getattr(exc, "exit_code", 130)
    committed = committed_in_this_process()
    if committed is None:
        partial = created_in_this_process()
        if partial is not None:
            partial.remove_partial_creation()
        return Stopped(f"stopped by {name} before `batchcrawl init` created the crawl: nothing "
                       "was changed; rerun it", code)  # fmt: skip
    url, generation = committed
    if seeds is None:
        return Stopped(f"stopped by {name} after `batchcrawl init` created the crawl {url}: it "
                       "stands", code)  # fmt: skip
    if generation == 0:
        return Stopped(
            f"stopped by {name}: the crawl {url} was created, but its seeds were not injected; "
            f"add them with `batchcrawl inject {url} {getattr(seeds, 'name', 'FILE')}`",
            code,
        )
    return Stopped(f"stopped by {name} after `batchcrawl init` created the crawl {url} and "
                   f"injected its seeds (generation {generation}): it stands", code)  # fmt: skip


@main.command()
@_crawl_arg
@click.argument(
    "seeds", type=click.File("r", encoding="utf-8-sig", errors="surrogateescape"), metavar="FILE|-"
)
@click.option(
    "--refetch",
    is_flag=True,
    help="Also make the URLs of FILE already known due now (refetch), and queue again "
    "those the address policy or robots.txt kept from being fetched (their hosts' robots.txt "
    "is read again).",
)
@_sets
def inject(crawl_url: str, seeds: io.TextIOBase, refetch: bool, sets) -> None:
    """Add the seed URLs of FILE (one a line; - reads stdin) to CRAWL. Prints a JSON summary."""
    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets)
    summary = _inject(crawl, cfg, seeds, source=getattr(seeds, "name", "-"), refetch=refetch)
    _echo_json(summary)
    if no_crawlable_seed(summary):
        click.get_current_context().exit(2)


@main.command()
@_crawl_arg
@click.option(
    "--status",
    "statuses",
    type=click.Choice(REQUEUABLE_STATUSES),
    multiple=True,
    default=(UrlStatus.REFUSED.value,),
    show_default=True,
    help="Requeue the URLs in this status (repeat for several).",
)
@click.option(
    "--host",
    "hosts",
    multiple=True,
    metavar="HOST",
    help="Only the URLs of this host, as the frontier's host column has it (repeat for several); "
    "the URLs its hold gave back are due now too.",
)
@click.option(
    "--reason",
    "reasons",
    multiple=True,
    metavar="PREFIX",
    help="Only URLs whose reason starts with PREFIX, e.g. 404 or max_retries:connect (an "
    "outage's gone URLs; repeat for several).",
)
@_sets
def requeue(
    crawl_url: str, statuses: tuple[str, ...], hosts: tuple[str, ...], reasons: tuple[str, ...],
    sets,
) -> None:  # fmt: skip
    """Make the URLs of CRAWL that ended refused, robots_denied, gone or error due again, once
    what ended them is fixed (network.allow_networks widened, a site or its robots.txt repaired).
    Their reason and retries are cleared, the cached robots.txt of the hosts of robots_denied
    URLs expires (the next round reads it again, fetches them and checks again), and their hosts'
    holds (down, rate limited: see the held-hosts query) end. Prints a JSON summary."""
    from batchcrawl.frontier.requeue import requeue as requeue_urls

    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets)
    with _lock(crawl, "requeue"):
        summary = requeue_urls(crawl, cfg, statuses, hosts=hosts, reasons=reasons)
    _echo_json(summary)
    which = " or ".join(summary["statuses"]) + (
        f" of {', '.join(summary['hosts'])}" if summary["hosts"] else ""
    )
    if summary["reasons"]:
        which += f" with a reason starting {' or '.join(map(repr, summary['reasons']))}"
    if summary["committed"]:
        from batchcrawl.console.progress import counted

        former = ", ".join(
            [f"{k} {n:,}" for k, n in summary["by_status"].items()]
            + ([f"given back by a held host {summary['given_back']:,}"]
               if summary["given_back"] else [])
        )  # fmt: skip
        released = summary.get("holds_released", 0)
        ended = f"; the holds of {counted(released, 'hosts')} ended" if released else ""
        click.echo(f"batchcrawl: {counted(summary['requeued'], 'URLs')} queued again ({former}), "
                   f"due now: the next round fetches them (generation {summary['generation']})"
                   f"{ended}", err=True)  # fmt: skip
    else:
        click.echo(f"batchcrawl: no URL is {which}: nothing to requeue", err=True)


# -- inspection ------------------------------------------------------------------------------
@main.command("sql")
@_crawl_arg
@click.argument("statement", required=False, metavar='"SELECT ..."')
@click.option(
    "--query", "query_name", metavar="NAME", help="Run a named query from storage/queries."
)
@click.option("--list", "list_queries", is_flag=True, help="List the named queries and exit.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    help="Print at most N rows [table: 100; csv, json: all]; a last line counts the rest.",
)
@click.option("--all", "all_rows", is_flag=True, help="Print every row (no limit).")
@click.option("--generation", type=int, help="Query this committed generation (default current).")
@_sets
def sql_command(
    crawl_url, statement, query_name, list_queries, fmt, limit, all_rows, generation, sets
) -> None:
    """Run a read-only SQL statement over the views frontier, hosts, fetchlists, fetched, links,
    edges, content, domainlinks, indegree and text (their columns: storage/schema.sql), and
    page_text (text's newest capture with text of each URL).

    The table format prints the first 100 rows (--limit N, --all) and turns results wider than
    the terminal into one block per row; statements separated by ";" print one result each. Statements that write, INSTALL or LOAD extensions, ATTACH
    or SET are refused: the crawl stays as committed and no code is downloaded.
    """
    from batchcrawl.store import sql

    if list_queries:
        _list_queries(sql.named_query_descriptions())
        return
    if (statement is None) == (query_name is None):
        raise click.UsageError('give either a statement ("SELECT ...") or --query NAME')
    if all_rows and limit is not None:
        raise click.UsageError("give --limit N or --all, not both")
    crawl = _open(crawl_url)
    _config_for_reading(crawl, sets, "sql")  # SQL needs no setting yet
    text = statement if statement is not None else sql.named_query(query_name)
    if limit is None and not all_rows and fmt == "table":
        from batchcrawl.console.sql_view import DEFAULT_LIMIT

        limit = DEFAULT_LIMIT
    if fmt != "table" and len(sql.check_read_only(text)) > 1:
        raise click.UsageError(
            f"--format {fmt} prints one result: give one statement, or --format table "
            "(prints each statement's result)"
        )
    for i, table in enumerate(sql.query_each(crawl, text, generation)):
        if i:  # each statement's result, in order (issue 34: only the last one was printed)
            click.echo()
        _print_table(table, fmt, limit)


def _list_queries(listed: Mapping[str, str]) -> None:
    """Print ``sql --list``: each name, then its description word-wrapped to the terminal's width
    (80 columns when stdout is not a terminal; issue 34: lines ran to 127), continued under the
    description's first column."""
    import shutil
    import textwrap

    pad = max((len(n) for n in listed), default=0)
    width = shutil.get_terminal_size((80, 24)).columns if sys.stdout.isatty() else 80
    for name, about in listed.items():
        click.echo(textwrap.fill(about, width=max(width, pad + 22),
                                 initial_indent=f"{name.ljust(pad)}  ",
                                 subsequent_indent=" " * (pad + 2),
                                 break_on_hyphens=False))  # fmt: skip


def _print_table(table, fmt: str, limit: int | None = None) -> None:
    from batchcrawl.console.sql_view import cell, more_rows_line, table_width, vertical_lines

    total = table.num_rows
    if limit is not None:
        table = table.slice(0, limit)
    more = more_rows_line(table.num_rows, total)
    if more is not None and fmt != "table":  # a program reads stdout: the note goes to stderr
        click.echo(f"batchcrawl: {more}", err=True)
    if fmt == "json":
        click.echo(json.dumps(table.to_pylist(), default=str, indent=None))
    elif fmt == "csv":
        click.echo(_csv_text(table), nl=False)
    else:
        from batchcrawl.console.pipe import PipeConsole

        rows = [[cell(v) for v in r.values()] for r in table.to_pylist()]
        if table_width(table.column_names, rows) > PipeConsole().width:
            click.echo("\n".join(vertical_lines(table.column_names, rows)))
        else:
            _render(_rows_table(None, table.column_names, rows))
        if more is not None:
            click.echo(more)


def _csv_text(table) -> str:
    """``table`` as CSV (RFC 4180): a header line, then one line per row; a field is quoted only
    when it holds a comma, a quote or a line break (Python's ``csv.QUOTE_MINIMAL``), so a URL
    copied out of it is the URL (issue 34: pyarrow's writer quotes every string, and a copied
    ``"http://..."`` was refused by inject). Nested values are JSON (:func:`_csv_ready`), nulls
    empty, booleans ``true``/``false``."""
    import csv

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    table = _csv_ready(table)
    writer.writerow(table.column_names)
    for row in table.to_pylist():
        writer.writerow(
            ["" if v is None else ("true" if v else "false") if isinstance(v, bool) else v
             for v in row.values()]
        )  # fmt: skip
    return buf.getvalue()


def _csv_ready(table):
    """``table`` with every nested column (list, struct, map) as JSON text, which CSV can hold."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        if pa.types.is_nested(field.type):
            text = [
                None if v is None else json.dumps(v, default=str)
                for v in table.column(i).to_pylist()
            ]
            table = table.set_column(
                i, pa.field(field.name, pa.string()), pa.array(text, pa.string())
            )
    return table


def _rows_table(title: str | None, columns: list[str], rows: Iterable[Iterable[Any]]):
    from rich.table import Table

    out = Table(title=title, title_justify="left")
    for name in columns:
        out.add_column(name)
    for row in rows:
        out.add_row(*("" if v is None else str(v) for v in row))
    return out


def _render(*tables) -> None:
    from batchcrawl.console.pipe import PipeConsole

    console = PipeConsole(soft_wrap=False)
    for t in tables:
        console.print(t)


def _status_tables(st: dict[str, Any]) -> list:
    from batchcrawl.console.status_view import status_tables

    return status_tables(st)


@main.command()
@_crawl_arg
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option("--generation", type=int, help="Show this committed generation (default current).")
@_sets
def status(crawl_url: str, fmt: str, generation: int | None, sets) -> None:
    """URLs by status, hosts, depths, fetch outcomes and rounds of CRAWL (like Nutch readdb -stats)."""
    from batchcrawl.store.status import crawl_status

    crawl = _open(crawl_url)
    _config_for_reading(crawl, sets, "status")
    result = crawl_status(crawl, generation)
    if fmt == "json":
        _echo_json(result)
    else:
        _render(*_status_tables(result))


@main.command()
@_crawl_arg
@click.option(
    "--out",
    default="report.html",
    show_default=True,
    help="HTML file to write (path or fsspec URL).",
)
@click.option("--generation", type=int, help="Report this committed generation (default current).")
@_sets
def report(crawl_url: str, out: str, generation: int | None, sets) -> None:
    """Write a self-contained HTML report of CRAWL with plots (rounds, frontier, responses, hosts,
    depth, politeness, robots.txt, bytes stored). Prints a JSON summary."""
    from batchcrawl.report import write_report

    crawl = _open(crawl_url)
    _echo_json(write_report(crawl, load_crawl_config(crawl, sets), out, generation))


@main.command()
@_crawl_arg
@click.option(
    "--keep", type=click.IntRange(min=1), help="Generations to keep [crawl.keep_generations]."
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@_sets
def gc(crawl_url: str, keep: int | None, dry_run: bool, sets) -> None:
    """Delete generations older than the last N and every file they alone used, and what rounds
    that died left behind (files no generation lists, temporary files of unfinished writes).
    Prints JSON."""
    from batchcrawl.store.gc import gc as run_gc

    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets, flags={"crawl": {"keep_generations": keep}})
    if dry_run:  # deletes nothing: no write lock needed (works on a read-only crawl)
        _echo_json(run_gc(crawl, cfg.crawl.keep_generations, dry_run=True))
        return
    with _lock(crawl, "gc"):
        _echo_json(run_gc(crawl, cfg.crawl.keep_generations, dry_run=dry_run))


@main.command()
@_crawl_arg
@click.option(
    "--all",
    "force",
    is_flag=True,
    help="Compact every bucket that has delta runs (default: only those past frontier.max_runs "
    "or frontier.compact_run_ratio, as rounds do).",
)
@_sets
def compact(crawl_url: str, force: bool, sets) -> None:
    """Merge the frontier's delta runs into new bucket bases and commit. Prints JSON."""
    from batchcrawl.frontier.runs import compact as run_compact

    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets)
    with _lock(crawl, "compact"):
        _echo_json(run_compact(crawl, cfg, force=force))


# -- graph: the link graph (docs/design.md §8b) -------------------------------------------------
@main.command("graph", context_settings={"ignore_unknown_options": False})
@click.argument(
    "words", nargs=-1, required=True, metavar="build CRAWL | CRAWL inlinks|outlinks URL"
)
@click.option("--generation", type=int, help="Use this generation's graph [newest built].")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of one URL per line.")
@click.option("--scheduler", metavar="ADDRESS", help="build: run on this Dask scheduler.")
@click.option("--workers", type=click.IntRange(min=1), help="build: LocalCluster processes.")
@_sets
def graph_command(words, generation, as_json, scheduler, workers, sets) -> None:
    """The link graph: `graph build CRAWL` builds it from a generation's edges (prints JSON);
    `graph CRAWL inlinks URL` / `outlinks URL` list the pages linking to / linked from URL."""
    from batchcrawl.graph import LinkGraph, build_graph
    from batchcrawl.urls import canonicalize, url_key

    if len(words) == 2 and words[0] == "build":
        from batchcrawl.engine.cluster import cluster_url, dask_client

        crawl = _open(words[1])
        cfg = load_crawl_config(crawl, sets, _round_flags(scheduler, workers, None, None))
        with _lock(crawl, "graph build"), dask_client(cfg) as client:
            _echo_json(graph_summary(build_graph(CrawlDir(cluster_url(crawl.url)), client,
                                                 generation)))  # fmt: skip
        return
    if len(words) != 3 or words[1] not in ("inlinks", "outlinks"):
        raise click.UsageError("expected `graph build CRAWL` or `graph CRAWL inlinks|outlinks URL`")
    crawl_url, which, url = words
    graph = LinkGraph.open(_open(crawl_url), generation)
    node_key = url_key(canonicalize(url))
    known = graph.node_id(node_key) is not None
    links = (graph.inlinks_of_key if which == "inlinks" else graph.outlinks_of_key)(node_key)
    if as_json:
        rows = [{"url_key": k, "url": u} for k, u in links]
        _echo_json({"generation": graph.generation, "in_graph": known, which: rows,
                    "count": len(rows)})  # fmt: skip
        return
    if not known:  # stdout stays empty, as for a page without links; stderr says which
        click.echo(f"batchcrawl: {url} is not in the link graph of generation "
                   f"{graph.generation}", err=True)  # fmt: skip
    for key, link_url in links:
        click.echo(link_url if link_url is not None else f"url_key={key}")


#: What ``graph build`` prints of the graph's manifest (README: nodes, arcs and bytes); the file
#: list and partition offsets (7 KB of JSON for a small crawl, issue 34) stay in graph.json.
GRAPH_SUMMARY_KEYS = ("generation", "nodes", "edges", "arcs", "bytes", "parts")


def graph_summary(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of :data:`GRAPH_SUMMARY_KEYS` of a graph manifest ``doc``
    (:func:`batchcrawl.graph.build_graph`), in that order."""
    return {k: doc[k] for k in GRAPH_SUMMARY_KEYS if k in doc}


@main.command("extract")
@_crawl_arg
@click.option(
    "--rounds", "rounds_range", metavar="A..B", help="Rounds to extract (default every committed)."
)
@click.option("--scheduler", metavar="ADDRESS", help="Run on this Dask scheduler.")
@click.option("--workers", type=click.IntRange(min=1), help="LocalCluster processes.")
@_sets
def extract_command(crawl_url, rounds_range, scheduler, workers, sets) -> None:
    """Derive text, languages and page metadata from CRAWL's committed WARC files (no refetch):
    the `text` table and a WET file beside each WARC file, committed as a generation. WARC files
    extracted before are skipped; a damaged one is named on stderr and the others still done.
    Prints a JSON summary."""
    from batchcrawl.engine.cluster import cluster_url, dask_client
    from batchcrawl.extract import extract_crawl

    rounds = _parse_rounds(rounds_range) if rounds_range is not None else None
    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets, _round_flags(scheduler, workers, None, None))
    with _lock(crawl, "extract"), dask_client(cfg) as client:
        summary = extract_crawl(
            CrawlDir(cluster_url(crawl.url)), client, rounds,
            on_damaged=lambda line: click.echo(f"batchcrawl: {line}", err=True),
        )  # fmt: skip
    _echo_json(summary)


# -- round and crawl -------------------------------------------------------------------------------
def _round_flags(scheduler, workers, time_limit, max_pages) -> dict[str, dict[str, Any]]:
    return {
        "round": {"scheduler": scheduler, "workers": workers},
        "fetch": {"time_limit_s": time_limit},
        "generate": {"max_urls_per_round": max_pages},
    }


def _round_options(f):
    f = click.option(
        "--max-pages",
        type=click.IntRange(min=1),
        help="Most URLs fetched in one round [generate.max_urls_per_round].",
    )(f)
    f = click.option(
        "--time-limit",
        type=click.FloatRange(min=0, min_open=True),
        help="Longest fetch phase, seconds (more than 0) [fetch.time_limit_s].",
    )(f)
    f = click.option(
        "--workers",
        type=click.IntRange(min=1),
        help="Worker processes of the embedded LocalCluster [round.workers].",
    )(f)
    f = click.option(
        "--scheduler",
        metavar="ADDRESS",
        help="Run on an existing Dask scheduler, e.g. tcp://host:8786 [round.scheduler].",
    )(f)
    return f


@main.command("round")
@_crawl_arg
@_round_options
@_sets
def round_command(crawl_url, scheduler, workers, time_limit, max_pages, sets) -> None:
    """Run one round (generate, fetch, update, commit); print its JSON summary.

    Exits 75 when no URL is due.
    """
    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets, _round_flags(scheduler, workers, time_limit, max_pages))
    _before_cluster(crawl, cfg, "batchcrawl round")
    _run_rounds(crawl, cfg, 1, known=False, pipeline=False)  # one round per process: sequential;
    # its progress says "round 4", not "round 4 of 4" (issue 34)


def _before_cluster(crawl: CrawlDir, cfg: Config, command: str) -> None:
    """What ``round`` and ``crawl`` do before they start or reach a Dask cluster (issue 34): take
    the crawl's lock for the whole command (a second writer is told at once who holds it, not
    after a cluster start; the locks this process takes name ``command``), and check an existing
    scheduler's address (:func:`batchcrawl.console.reach.probe_scheduler`)."""
    from batchcrawl.store.lock import WriterLock, name_command

    name_command(command)
    # held until the command ends (its steps' own locks nest in it): a second writer started a
    # moment later is refused at once, before it starts a cluster of its own
    click.get_current_context().with_resource(WriterLock(crawl, owner=command, nest=True))
    if cfg.round.scheduler:
        from batchcrawl.console.reach import probe_scheduler

        try:
            probe_scheduler(cfg.round.scheduler, cfg.round.connect_timeout_s,
                            lambda line: click.echo(line, err=True))  # fmt: skip
        except KeyboardInterrupt as exc:  # "before round N began", as a stop in the client's wait
            raise stopped(crawl, crawl.manifest(), exc) from None


def _raise_if_nothing_due(crawl: CrawlDir) -> None:
    """Raise :class:`~batchcrawl.errors.NothingDue` (exit 75, the next due time in its message)
    when the due-time index shows no URL due now (:func:`batchcrawl.engine.duecheck.
    nothing_due_now`): before the driver and Dask are imported, so rounds and streams with nothing
    to do start no cluster (a stream idled ~8 s, then exited 0 after one empty micro-batch)."""
    import time

    from batchcrawl.engine.duecheck import nothing_due_now

    idle = nothing_due_now(crawl, time.time())
    if idle is not None:
        raise idle


def _run_rounds(
    crawl: CrawlDir,
    cfg: Config,
    rounds: int,
    known: bool,
    pipeline: bool | None = None,
    max_seconds: float | None = None,
    reload: Callable[[], Config] | None = None,
) -> list[dict]:
    """Run up to ``rounds`` rounds (``known``: shown as "round N of M"; ``pipeline``: default
    ``round.pipeline``; ``max_seconds``: the run's deadline) with progress on stderr
    (:mod:`batchcrawl.console.progress`); print each round's JSON summary on stdout and a human summary
    on stderr at the end. A signal (Ctrl-C, SIGTERM) becomes :class:`Stopped`, saying what was
    committed. ``reload``: reads the config again before each round (its ``[politeness]``)."""
    import time

    _raise_if_nothing_due(crawl)
    from batchcrawl.console.progress import RoundProgress, closing_summary, fetch_hint
    from batchcrawl.round import run_rounds

    before = crawl.manifest()
    started = time.monotonic()
    try:
        with RoundProgress(enabled=sys.stderr.isatty(), interval_s=cfg.progress.interval_s,
                           rounds=rounds if known else None,
                           first_round=before.round + 1) as progress:  # fmt: skip
            summaries = run_rounds(
                crawl.url, cfg, rounds, progress=progress.update, pipeline=pipeline,
                max_seconds=max_seconds, reload=reload, due_checked=True,
                on_round=lambda summary: (progress.done(summary), _echo_json(summary)),
            )  # fmt: skip
    except KeyboardInterrupt as exc:
        raise stopped(crawl, before, exc, rounds) from None
    except Exception as exc:  # a lost worker, a full disk: one line saying the crawl is safe
        from batchcrawl.console.faults import round_fault

        fault = round_fault(crawl, before, exc)
        if fault is None:
            raise
        log.debug("error details", exc_info=True)
        raise fault from None
    elapsed_s = time.monotonic() - started
    due = None
    if len(summaries) > 1:  # what is left now, as `status` counts it (README: summary numbers)
        from batchcrawl.store.status import due_counts

        due = due_counts(crawl)
    for line in closing_summary(summaries, elapsed_s, due):
        click.echo(line, err=True)
    hint = fetch_hint(summaries, crawl.url)
    if hint is not None:
        click.echo(hint, err=True)
    return summaries


#: Seconds a stream stopped by a signal gives the due count of its closing summary (a scan of
#: the frontier: seconds at tens of millions of URLs); the summary goes without it after that.
DUE_COUNT_STOP_TIMEOUT_S = 0.5


def _run_stream(
    crawl: CrawlDir,
    cfg: Config,
    max_seconds: float | None,
    reload: Callable[[], Config] | None = None,
) -> dict:
    """Stream the crawl (:func:`batchcrawl.stream.run_stream`) until nothing is due,
    ``max_seconds``, SIGINT or SIGTERM (each takes a last checkpoint) and print its JSON summary.
    A lost worker or a full disk ends in one line, as for rounds
    (:func:`batchcrawl.console.faults.round_fault`): the last checkpoint is intact."""
    _raise_if_nothing_due(crawl)
    from batchcrawl.console.progress import StreamProgress, fetch_hint, stream_closing_summary
    from batchcrawl.console.signals import stop_requested
    from batchcrawl.stream import run_stream

    before = crawl.manifest()
    try:
        with (stop_requested() as stop,
              StreamProgress(sys.stderr.isatty(), cfg.progress.interval_s) as progress):  # fmt: skip
            summary = run_stream(crawl.url, cfg, stop, max_seconds=max_seconds,
                                 progress=progress.update, reload=reload)  # fmt: skip
    except KeyboardInterrupt as exc:  # before the stream's first poll: nothing to checkpoint
        raise stopped(crawl, before, exc, stream=True) from None
    except Exception as exc:
        from batchcrawl.console.faults import round_fault

        fault = round_fault(crawl, before, exc, stream=True)
        if fault is None:
            raise
        log.debug("error details", exc_info=True)
        raise fault from None
    if summary["stopped_by"] == "nothing_due" and not summary["attempts"] + summary["checkpoints"]:
        import time  # a stream that found nothing to fetch is skipped, as a round is (exit 75)

        from batchcrawl.console.nothing_due import nothing_due

        raise nothing_due(crawl, crawl.manifest(), time.time())
    _echo_json(summary)
    from batchcrawl.store.status import due_counts

    # after a stop signal the count (a scan of the frontier) gets what is left of the 2 s
    stopped_by_signal = summary["stopped_by"] in ("SIGINT", "SIGTERM")
    due = due_counts(crawl, timeout_s=DUE_COUNT_STOP_TIMEOUT_S if stopped_by_signal else None)
    for line in stream_closing_summary(summary, due):
        click.echo(line, err=True)
    # a stream's site that went down: as for rounds; not after a stop signal, whose own cuts of
    # the fetches in flight are the errors then (and a stop says at most three lines, issue 34)
    hint = None if stopped_by_signal else fetch_hint([summary], crawl.url)
    if hint is not None:
        click.echo(hint, err=True)
    return summary


def stopped(
    crawl: CrawlDir, before, exc: BaseException, rounds: int | None = None, stream: bool = False
) -> Stopped:
    """The :class:`Stopped` error for rounds interrupted by ``exc`` (a KeyboardInterrupt or
    :class:`~batchcrawl.console.signals.Interrupted`): what this run committed since manifest ``before``
    (the last generation) and which round was not committed. ``rounds``: how many the run was
    asked for; when all of them were committed (the stop came while the cluster closed) nothing
    is left to rerun (a fresh-user trial: a ``round`` stopped after its commit said "round 4 was
    not committed: rerun to do it again"), and a round that wrote no file yet (the stop came
    while the run waited for its scheduler or cluster) has nothing to clean up. ``stream``: the
    rounds are a stream's micro-batches, and the message calls them so."""
    unit = "micro-batch" if stream else "round"
    now = crawl.manifest()
    name = getattr(exc, "signal_name", "SIGINT")
    code = getattr(exc, "exit_code", 130)
    if now.round > before.round:
        done = (
            f"committed {_rounds(before.round + 1, now.round, unit)} (last generation "
            f"{now.generation})"
        )
        if rounds is not None and now.round - before.round >= rounds:
            return Stopped(
                f"stopped by {name} after this run {done}: nothing is left to rerun", code
            )
    else:
        done = (
            f"nothing committed by this run (last generation {now.generation}, {unit} {now.round})"
        )
    from batchcrawl.store.orphans import uncommitted_rounds

    if not uncommitted_rounds(crawl, now.round + 1):  # stopped before the round wrote a file
        # (waiting for a --scheduler, the cluster's start): nothing to rerun or clean up
        return Stopped(f"stopped by {name} before {unit} {now.round + 1} began: {done}", code)
    return Stopped(
        f"stopped by {name}: {done}; {unit} {now.round + 1} was not committed: rerun to do it "
        "again (`batchcrawl gc` removes its partial files)",
        code,
    )


def _rounds(first: int, last: int, unit: str = "round") -> str:
    """``round 3`` or ``rounds 3-5`` (``micro-batches 3-5`` for ``unit="micro-batch"``): the
    rounds ``first`` to ``last`` (inclusive) in a message."""
    if first == last:
        return f"{unit} {first}"
    return f"{'micro-batches' if unit == 'micro-batch' else unit + 's'} {first}-{last}"


def demo_stopped(crawl_url: str | None, exc: BaseException) -> Stopped:
    """The :class:`Stopped` error for a demo interrupted by ``exc`` (a KeyboardInterrupt or
    :class:`~batchcrawl.console.signals.Interrupted`): which rounds of the demo crawl
    ``crawl_url`` (a path) were committed and where to look at them. "Rerun it", said for a
    ``round``, is wrong here: the demo's sample web ended with this process, so the crawl cannot be
    continued, and ``batchcrawl demo`` creates a new crawl beside it."""
    name = getattr(exc, "signal_name", "SIGINT")
    code = getattr(exc, "exit_code", 130)
    if crawl_url is None:  # its name not even chosen yet
        return Stopped(f"stopped by {name} before the demo crawl was created: nothing was changed",
                       code)  # fmt: skip
    try:
        crawl = CrawlDir.open(crawl_url)
    except CrawlDirError:
        return Stopped(f"stopped by {name} before the demo crawl {crawl_url} was created", code)
    m = crawl.manifest()
    if m.round == 0:
        kept = f"the demo crawl {crawl_url} has no committed round (remove it: rm -r {crawl_url})"
    else:
        kept = (
            f"the demo crawl {crawl_url} keeps {_rounds(1, m.round)} (last generation {m.generation}): "
            f"batchcrawl status {crawl_url}"
        )
    return Stopped(
        f"stopped by {name}: {kept}; its sample web ended with the demo, so `batchcrawl demo` "
        "starts a new crawl rather than continuing this one",
        code,
    )


@main.command("crawl")
@_crawl_arg
@click.option("--rounds", type=click.IntRange(min=1), help="Stop after this many rounds.")
@click.option(
    "--stream",
    is_flag=True,
    help="Keep the fetch workers running; merge and checkpoint every stream.flush_interval_s.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(min=0, min_open=True),
    help="Stop after this many seconds: rounds end their fetch by then and commit, a stream takes "
    "its last checkpoint.",
)
@_round_options
@_sets
def crawl_command(
    crawl_url, rounds, stream, max_seconds, scheduler, workers, time_limit, max_pages, sets
):
    """Run rounds until nothing is due (or --rounds N), or stream with --stream.

    With round.pipeline = true (--set round.pipeline=true) each round is fetched while the round
    before it is updated and committed.

    --max-seconds T ends the run by T: the round fetching then stops its fetch at T and commits,
    and no round starts after it (the crawl itself, not a signal, keeps the deadline).
    --stream runs until nothing is due, --max-seconds, Ctrl-C or SIGTERM; each of them takes a
    last checkpoint, releases the lock, prints the JSON summary and exits 0 (75, as rounds, when
    nothing was due at its start).
    """
    if (rounds is not None or time_limit is not None) and stream:
        raise click.UsageError("--rounds and --time-limit are for rounds, not --stream")
    crawl = _open(crawl_url)
    flags = _round_flags(scheduler, workers, time_limit, max_pages)
    cfg = load_crawl_config(crawl, sets, flags)
    _before_cluster(crawl, cfg, "batchcrawl crawl --stream" if stream else "batchcrawl crawl")

    def reload() -> Config:  # crawl.toml's [politeness] is taken up between rounds/micro-batches
        return load_crawl_config(crawl, sets, flags)

    if stream:
        _run_stream(crawl, cfg, max_seconds, reload)
        return
    _run_rounds(crawl, cfg, rounds or 1_000_000, known=rounds is not None, max_seconds=max_seconds,
                reload=reload)  # fmt: skip


@main.command()
@_crawl_arg
@click.argument("dest", callback=_not_empty)
@click.option(
    "--rounds", "rounds_range", metavar="A..B", help="Rounds to export (default every committed)."
)
@click.option(
    "--tables",
    default="fetched,links,index,warc",
    show_default=True,
    help="Comma-separated: fetched, links, fetchlists, index (Common Crawl-compatible), "
    "warc (the WARC files, each with a .cdxj index beside it), text and wet (batchcrawl extract's "
    "table and WET files).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["parquet"]),
    default="parquet",
    show_default=True,
    help="File format of the tables.",
)
@click.option(
    "--exclude-signal",
    "exclude_signals",
    multiple=True,
    metavar="NAME=yes|no",
    help="Leave out every row of the hosts whose robots.txt Content-Signal holds this pair "
    "(e.g. ai-train=no; repeatable). Needs --tables without warc and wet. The index table "
    "carries each host's signal either way (content_signal).",
)
@_sets
def export(crawl_url, dest, rounds_range, tables, fmt, sets, exclude_signals) -> None:
    """Copy the committed rounds of CRAWL to DEST (a path or fsspec URL, e.g. s3://bucket/lake).

    Writes Hive-partitioned Parquet (DEST/TABLE/crawl=NAME/round=N/part-SS.parquet), the WARC
    files with CDXJ indexes, and last, per round, DEST/_batchcrawl_export/crawl=NAME/round=N.json.
    Rounds already exported are skipped. Credentials come from the environment (AWS_* variables,
    fsspec config), never from the command line. Prints a JSON summary.
    """
    from batchcrawl.export.lake import export_crawl, parse_tables
    from batchcrawl.export.signals import parse_signal_filter

    rounds = _parse_rounds(rounds_range) if rounds_range is not None else None
    wanted = parse_tables(tables)
    exclude = parse_signal_filter(exclude_signals)
    crawl = _open(crawl_url)
    cfg = load_crawl_config(crawl, sets)
    last = crawl.manifest().round
    if rounds is not None and rounds[1] > last:
        missing = f"{max(rounds[0], last + 1)}..{rounds[1]}"
        raise ConfigError(
            f"--rounds {rounds_range}: rounds {missing} do not exist; {crawl.url} has committed "
            f"rounds 1..{last}"
            if last
            else f"--rounds {rounds_range}: {crawl.url} has no committed round yet"
        )
    try:
        summary = export_crawl(crawl, dest, crawl_name=cfg.crawl.name, rounds=rounds,
                               tables=wanted, exclude_signals=exclude)  # fmt: skip
    except BatchcrawlError:
        raise
    except (OSError, ValueError, ImportError) as exc:  # bad destination: protocol, path, access
        raise ConfigError(f"export destination {dest!r}: {type(exc).__name__}: {exc}") from None
    _echo_json(summary)


def _parse_rounds(text: str) -> tuple[int, int]:
    """``"3..7"`` -> (3, 7); a single ``"4"`` -> (4, 4)."""
    a, sep, b = text.partition("..")
    try:
        lo, hi = int(a), int(b if sep else a)
    except ValueError:
        raise ConfigError(f"--rounds {text!r}: expected A..B, e.g. 3..7") from None
    if lo < 0 or hi < lo:
        raise ConfigError(f"--rounds {text!r}: expected 0 <= A <= B")
    return lo, hi


@main.command()
@click.argument("crawl_url", metavar="[CRAWL]", required=False)
@click.option("--hosts", type=click.IntRange(min=2), default=20, show_default=True)
@click.option("--pages", type=click.IntRange(min=2), default=800, show_default=True)
@click.option("--rounds", type=click.IntRange(min=1), default=4, show_default=True)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print each round's JSON summary (as `crawl` does) instead of one line.",
)
@_sets
def demo(crawl_url, hosts, pages, rounds, as_json, sets) -> None:
    """Crawl a local multi-host sample web on loopback and show the result.

    Starts a sample web (robots.txt variants, redirects, dead links, duplicates, a spider trap) on
    127.0.0.1, creates the crawl CRAWL (default ./batchcrawl-demo, or -2, -3 ... if taken; never
    overwritten), runs up to
    --rounds rounds on a local Dask cluster (one line each), then shows status counts, top hosts
    and fetch errors through `batchcrawl sql`. Nothing leaves this machine.
    """

    def on_round(summary: dict[str, Any]) -> None:
        progress.done(summary, log_line=False)  # its line is on stdout, not twice on a terminal
        if as_json:
            _echo_json(summary)
        else:
            click.echo(round_line(summary))

    try:  # from the first import on: a stop before the crawl exists is said as such
        from batchcrawl.console.progress import RoundProgress, round_line
        from batchcrawl.demo import fresh_demo_dir, headline, run_demo

        crawl_url = crawl_url or fresh_demo_dir()
        with RoundProgress(enabled=sys.stderr.isatty(), rounds=rounds) as progress:
            result = run_demo(
                crawl_url, hosts=hosts, pages=pages, rounds=rounds, sets=sets,
                progress=progress.update, on_round=on_round,
            )  # fmt: skip
    except KeyboardInterrupt as exc:
        raise demo_stopped(crawl_url, exc) from None
    from rich.text import Text

    from batchcrawl.console.pipe import PipeConsole

    # titles and the headline are word-wrapped by rich to the terminal's width (80 in a pipe); a
    # table's own title would wrap inside the table's (narrow) width instead
    console = PipeConsole(soft_wrap=False)
    for name, table in result["queries"].items():
        console.print(Text(f"batchcrawl sql {crawl_url} --query {name}", style="italic"),
                      soft_wrap=True)  # a command to copy: whole however long the path  # fmt: skip
        console.print(_rows_table(None, table.column_names,
                                  [list(r.values()) for r in table.to_pylist()]))  # fmt: skip
    console.print()
    console.print(Text(headline(result)))
    click.echo(  # the crawl's path whole on its line, as the commands to copy below it
        f"The crawl is in {crawl_url}. Explore it with:\n"
        f"  batchcrawl status {crawl_url}\n"
        f'  batchcrawl sql {crawl_url} "SELECT host, count(*) FROM frontier GROUP BY 1"\n'
        f"  duckdb {crawl_url}/crawl.duckdb   # with the DuckDB shell, if installed"
    )


if __name__ == "__main__":
    main()
