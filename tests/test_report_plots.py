"""The report's plots as issue 34 found them in a headless Chromium screenshot: a stream's 23
micro-batches drawn as 23 lines in 10 repeating colours, MIME types with a few responses invisible
beside one with a thousand, the politeness legend over the tallest bar. Each checked on the drawn
matplotlib figure, with a control that shows the check can fail."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.backends.backend_agg import FigureCanvasAgg
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.console.signals import StopRequest
from batchcrawl.report import plots
from batchcrawl.report.crawl_plots import (
    MAX_TIMELINE_LINES,
    round_groups,
    rounds,
    storage,
    stream_windows,
    timeline,
)
from batchcrawl.report.data import ReportData, read_report_data
from batchcrawl.report.host_plots import politeness, responses, robots
from batchcrawl.store import sql
from batchcrawl.stream import run_stream


def _data(**tables) -> ReportData:
    return ReportData(crawl="c", generation=9, round=23, created="2026-01-01T00:00:00Z",
                      host_delay_s=0.2, max_crawl_delay_s=5.0, tables=tables)  # fmt: skip


@given(st.lists(st.integers(1, 10_000), unique=True, max_size=200), st.integers(1, 12))
def test_round_groups_are_consecutive_cover_every_round_and_are_few(rounds, most):
    rounds.sort()
    groups = round_groups(rounds, most)
    assert [r for g in groups for r in g] == rounds
    assert len(groups) == min(len(rounds), most)
    if groups:
        assert max(map(len, groups)) - min(map(len, groups)) <= 1


def _timeline_rows(n_rounds: int, seconds: int = 5) -> list[dict]:
    """Rounds end to end in wall time, each ``seconds`` long (a stream's micro-batches)."""
    return [{"round": r, "second": s, "crawl_second": (r - 1) * seconds + s, "attempts": 10 + r,
             "failed": s % 2} for r in range(1, n_rounds + 1) for s in range(seconds)]  # fmt: skip


def test_many_micro_batches_are_grouped_into_few_lines():
    with plots.style():
        many = timeline(_data(**{"fetch-timeline": _timeline_rows(23)})).axes[0]
        few = timeline(_data(**{"fetch-timeline": _timeline_rows(3)})).axes[0]
    labels = [t.get_text() for t in many.get_legend().get_texts()]
    assert len(labels) == MAX_TIMELINE_LINES and labels[0] == "rounds 1-3"
    assert labels[-1] == "rounds 22-23"  # 23 = 7 x 3 + 2
    colors = [ln.get_color() for ln in many.get_lines() if ln.get_linestyle() == "-"]
    assert len(set(colors)) == len(colors) == MAX_TIMELINE_LINES  # no repeated colour
    # the control: three rounds are three lines, one a round
    assert [t.get_text() for t in few.get_legend().get_texts()] == ["round 1", "round 2",
                                                                    "round 3"]  # fmt: skip


def _line_xs(ax) -> list[list[float]]:
    return [[x for x in ln.get_xdata() if x == x] for ln in ax.get_lines()
            if ln.get_linestyle() == "-"]  # fmt: skip


def test_micro_batches_lie_end_to_end_in_wall_time():
    """A stream's 1 s micro-batches on their own clocks were dots at x = 0 (issue 34, 2nd trial):
    grouped, they are drawn against the crawl's wall time, each group after the one before."""
    with plots.style():
        many = timeline(_data(**{"fetch-timeline": _timeline_rows(40, seconds=2)})).axes[0]
        few = timeline(_data(**{"fetch-timeline": _timeline_rows(3)})).axes[0]
    groups = _line_xs(many)
    assert len(groups) == MAX_TIMELINE_LINES
    assert min(groups[0]) == 0 and max(groups[-1]) == 79  # the whole 80 s of the crawl
    for before, after in zip(groups, groups[1:], strict=False):
        assert max(before) < min(after)
    assert "crawl's first request" in many.get_xlabel()
    assert max(many.get_lines()[0].get_ydata()) == 10 + 5  # summed per second, not a mean
    # the control: few rounds each start at 0 on their own clock
    assert [min(xs) for xs in _line_xs(few)] == [0, 0, 0]
    assert "round's first request" in few.get_xlabel()


def test_a_line_breaks_where_no_request_was_made():
    rows = _timeline_rows(11, seconds=2)  # in groups [1, 2], [3, 4], [5, 6], [7], ...
    for r in rows:  # rounds 6-11 start an hour later
        r["crawl_second"] += 3600 if r["round"] > 5 else 0
    with plots.style():
        ax = timeline(_data(**{"fetch-timeline": rows})).axes[0]
    assert "min since" in ax.get_xlabel()
    ydata = [list(ln.get_ydata()) for ln in ax.get_lines() if ln.get_linestyle() == "-"]
    joined = [ys for ys in ydata if any(y != y for y in ys)]  # a NaN: the group spans the gap
    assert len(joined) == 1


def test_small_counts_stay_visible_on_a_log_scale_with_their_numbers():
    mimes = [{"mime_type": "text/html", "responses": 1268},
             {"mime_type": "application/pdf", "responses": 2}]  # fmt: skip
    codes = [{"fetch_status": 200, "attempts": 1257}, {"fetch_status": 301, "attempts": 3}]
    with plots.style():
        ax1, ax2 = responses(_data(**{"mime-types": mimes, "http-status": codes})).axes
        even = responses(_data(**{"mime-types": [{"mime_type": "a", "responses": 5},
                                                 {"mime_type": "b", "responses": 4}],
                                  "http-status": codes[:1]})).axes[1]  # fmt: skip
    assert ax2.get_xscale() == "log" and ax1.get_yscale() == "log"
    assert {t.get_text() for t in ax2.texts} == {"1,268", "2"}
    assert even.get_xscale() == "linear"  # the control: similar counts stay linear


def test_the_politeness_legend_is_above_the_bars():
    hosts = [{"host": f"h{i}.test", "median_gap_s": 3.0 if i == 0 else 0.2, "min_gap_s": 0.2,
              "host_delay_s": 0.2} for i in range(20)]  # fmt: skip
    with plots.style():
        fig = politeness(_data(**{"host-intervals": hosts}))
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        ax = fig.axes[0]
        legend_box = ax.get_legend().get_window_extent(canvas.get_renderer())
        axes_box = ax.get_window_extent(canvas.get_renderer())
    assert legend_box.y0 >= axes_box.y1 - 1  # wholly above the plotting area


def _legend_overlaps_a_bar(fig, ax) -> bool:
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    legend_box = ax.get_legend().get_window_extent(canvas.get_renderer())
    return any(bar.get_window_extent(canvas.get_renderer()).overlaps(legend_box)
               for bar in ax.patches if bar.get_height() > 0)  # fmt: skip


def test_the_failed_attempts_legend_covers_no_bar():
    """The second trial's screenshot: the legend of "failed attempts per round" (upper left, over
    the axes) hid the top of round 5's bar, the tallest."""
    manifests = [{"round": r, "responses": 100, "seconds_by_step": {"fetch": 5.0}}
                 for r in range(1, 15)]  # fmt: skip
    counts = [3, 17, 14, 36, 8, 21, 8, 7, 5, 7, 3, 2, 2, 1]
    outcomes = [{"round": r, "outcome": "robots_denied", "attempts": n}
                for r, n in enumerate(counts, start=1)]  # fmt: skip
    outcomes += [{"round": 1, "outcome": "robots_unavailable", "attempts": 1},
                 {"round": 5, "outcome": "gone", "attempts": 2}]  # fmt: skip
    rows = [{"round": r, "attempts": 100, "span_s": 5.0} for r in range(1, 15)]
    data = ReportData(crawl="c", generation=15, round=14, created="2026-01-01T00:00:00Z",
                      host_delay_s=0.2, max_crawl_delay_s=5.0, rounds=manifests,
                      tables={"outcomes-by-round": outcomes, "rounds": rows})  # fmt: skip
    with plots.style():
        fig = rounds(data)
        ax = fig.axes[1]
        assert not _legend_overlaps_a_bar(fig, ax)
        ax.legend(fontsize=7, loc="upper left")  # the control: where it was, over the axes
        assert _legend_overlaps_a_bar(fig, ax)


def test_robots_counts_far_apart_stay_visible_on_a_log_scale():
    """The second trial's screenshot: 1 URL with robots.txt unavailable beside 131 denied drew no
    visible bar on a linear scale."""
    rows = [{"counted": "urls", "outcome": "robots_denied", "n": 131},
            {"counted": "urls", "outcome": "robots_unavailable", "n": 1},
            {"counted": "hosts", "outcome": "2xx: rules parsed", "n": 7},
            {"counted": "hosts", "outcome": "5xx: disallow all", "n": 1}]  # fmt: skip
    with plots.style():
        hosts_ax, urls_ax = robots(_data(**{"robots-outcomes": rows})).axes
    assert urls_ax.get_xscale() == "log" and urls_ax.get_title().endswith("(log scale)")
    assert {t.get_text() for t in urls_ax.texts} == {"131", "1"}
    assert hosts_ax.get_xscale() == "linear"  # the control: 7 and 1 stay linear


def test_the_tallest_bars_leave_room_below_the_frame():
    """A fresh-user trial (issue 34): the integer tick locator ended "failed attempts per round"
    at its tallest bar, which looked clipped; the bytes-stored legend covered its tallest bar."""
    manifests = [{"round": r, "responses": 10 * r, "seconds_by_step": {"fetch": 1.0}}
                 for r in (1, 2, 3)]  # fmt: skip
    outcomes = [{"round": r, "outcome": "robots_denied", "attempts": n}
                for r, n in ((1, 1), (2, 33), (3, 54))]  # fmt: skip
    stored = [{"round": r, "content_bytes": b, "warc_bytes": b // 3, "warc_bytes_total": t}
              for r, b, t in ((1, 10 << 20, 3 << 20), (2, 35 << 20, 15 << 20),
                              (3, 9 << 20, 18 << 20))]  # fmt: skip
    data = ReportData(crawl="c", generation=4, round=3, created="2026-01-01T00:00:00Z",
                      host_delay_s=0.2, max_crawl_delay_s=5.0, rounds=manifests,
                      tables={"outcomes-by-round": outcomes, "bytes-by-round": stored,
                              "rounds": []})  # fmt: skip
    with plots.style():
        fig = rounds(data)
        for ax in fig.axes[:2]:
            tallest = max(bar.get_y() + bar.get_height() for bar in ax.patches)
            assert ax.get_ylim()[1] >= 1.07 * tallest  # matplotlib's own margin is 5 %
        fig = storage(data)
        ax = fig.axes[0]
        assert ax.get_ylim()[1] >= 1.07 * max(bar.get_height() for bar in ax.patches)
        assert not _legend_overlaps_a_bar(fig, ax)


#: The stream's start, epoch seconds, in the micro-batches below.
_T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()


def _micro_batch(rnd: int, start_s: float, responses: int, **extra) -> dict:
    """The manifest summary of stream micro-batch ``rnd`` (generation ``rnd + 1``) taken
    ``start_s`` seconds after :data:`_T0` and committed 0.1 s later, its WARC files left open."""
    created = dt.datetime.fromtimestamp(_T0 + start_s + 0.1, dt.UTC)
    return {"step": "round", "mode": "stream", "round": rnd, "generation": rnd + 1,
            "created": created.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "elapsed_s": 0.1, "responses": responses, "attempts": responses,
            "seconds_by_step": {"take": 0.01, "update": 0.09, "compact": 0.0},
            "warc_open": {"0": ["warc/round=1/c-00001-00.warc.gz", 1000]}, **extra}  # fmt: skip


def _bar_heights(d: ReportData) -> tuple[dict[int, float], float]:
    """The "pages/s per round" bars of ``d`` by round, and the top of their y axis."""
    with plots.style():
        ax = rounds(d).axes[0]
    bars = {round(b.get_x() + b.get_width() / 2): b.get_height() for b in ax.patches}
    return bars, ax.get_ylim()[1]


def test_a_stream_micro_batch_is_drawn_over_its_wall_time_not_its_request_span():
    """A user's trial: micro-batch 1 made 4 requests 3 ms apart (``span_s`` 0.003), drawn at
    1,333 pages/s on an axis to 1,350 beside the real ~17/s. A micro-batch's rate is its pages
    over the time from the stream's previous micro-batch to it (the flush interval for the first)."""
    rows = [{"round": 1, "attempts": 4, "span_s": 0.003}]
    rows += [{"round": r, "attempts": 85, "span_s": 4.5} for r in (2, 3, 4)]
    batches = [_micro_batch(1, 5.0, 4)]
    batches += [_micro_batch(r, 5.0 * r + dt_s, 85) for r, dt_s in ((2, 0.0), (3, 0.3), (4, 0.0))]
    d = ReportData(crawl="c", generation=5, round=4, created="2026-01-01T00:00:20Z",
                   host_delay_s=0.2, max_crawl_delay_s=5.0, rounds=batches, flush_interval_s=5.0,
                   tables={"rounds": rows, "outcomes-by-round": []})  # fmt: skip
    bars, top = _bar_heights(d)
    assert bars[1] == pytest.approx(4 / 5.0)  # the first: over the flush interval
    assert bars[2] == pytest.approx(85 / 5.0, rel=1e-3)
    assert bars[3] == pytest.approx(85 / 5.3, rel=1e-3)  # its micro-batch started 0.3 s late
    assert bars[4] == pytest.approx(85 / 4.7, rel=1e-3)
    assert top < 20
    # the control: the same rows as batch rounds whose manifests expired (they have fetch
    # lists) keep the rate over their request span
    batch = ReportData(crawl="c", generation=5, round=4, created="2026-01-01T00:00:20Z",
                       host_delay_s=0.2, max_crawl_delay_s=5.0, fetchlist_rounds=frozenset(
                           {1, 2, 3, 4}), tables={"rounds": rows, "outcomes-by-round": []})  # fmt: skip
    bars, top = _bar_heights(batch)
    assert bars[1] == pytest.approx(4 / 0.003) and top > 1333


def test_a_new_stream_and_an_expired_manifest_give_the_flush_interval_not_the_gap():
    """The time since the generation before is a micro-batch's only after a micro-batch of the
    same stream: not after one that closed its WARC files (a stream's last) or when it reran a
    crashed one (a new stream) -- the hours between two streams are no micro-batch's. A
    micro-batch whose manifest expired (no fetch list: not a batch round) gets the interval too,
    or its request span if longer."""
    rows = [{"round": r, "attempts": 10, "span_s": 0.5} for r in (1, 2, 3, 4)]
    rows.append({"round": 5, "attempts": 10, "span_s": 8.0})
    batches = [_micro_batch(2, 0.0, 10, warc_open={}),  # a clean stop: WARC files closed
               _micro_batch(3, 7200.0, 10),  # a new stream two hours later
               _micro_batch(4, 9000.0, 10, rerun_after_crash=True)]  # fmt: skip
    d = ReportData(crawl="c", generation=5, round=5, created="2026-01-01T03:00:00Z",
                   host_delay_s=0.2, max_crawl_delay_s=5.0, rounds=batches, flush_interval_s=2.0,
                   tables={"rounds": rows})  # fmt: skip
    assert stream_windows(d) == {1: 2.0, 2: 2.0, 3: 2.0, 4: 2.0, 5: 8.0}
    # the control: a micro-batch after one that left its WARC files open is timed from it
    batches[0]["warc_open"] = {"1": ["warc/round=2/c-00002-01.warc.gz", 10]}
    assert stream_windows(d)[3] == pytest.approx(7200.0)


def test_a_real_stream_draws_no_micro_batch_faster_than_its_pages_over_the_flush_interval(
    tmp_path,
):
    """A stream on a loopback sample web, its report's data read back: no micro-batch is drawn
    faster than its responses over most of one flush interval (each started one interval after
    the one before: no early flushes at this interval), while the rates over their request spans
    (the plot before) of some were faster."""
    web = sample_web(pages=40)
    flush = 0.5
    cfg = round_config(stream={"flush_interval_s": flush})
    with serve(web):
        crawl = new_crawl(tmp_path / "c", cfg, web.seeds())
        summary = run_stream(crawl.url, cfg, StopRequest(), max_seconds=120)
    assert summary["stopped_by"] == "nothing_due", summary
    d = read_report_data(crawl, cfg)
    assert d.fetchlist_rounds == frozenset() and d.flush_interval_s == flush
    bound = {s["round"]: s["responses"] / (0.7 * flush) for s in d.rounds}
    bars, _ = _bar_heights(d)
    assert set(bars) == {r["round"] for r in d.tables["rounds"]} and len(bars) >= 3
    for rnd, rate in bars.items():
        assert rate <= bound[rnd], (rnd, rate, bound[rnd])
    # the control: over its request span (``batchcrawl sql --query rounds``) one was faster
    spans = sql.query(crawl, sql.named_query("rounds")).to_pylist()
    assert any(r["span_s"] and r["attempts"] / r["span_s"] > bound[r["round"]]
               for r in spans), spans  # fmt: skip


def _legend_and_axes_boxes(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    ax = fig.axes[0]
    renderer = canvas.get_renderer()
    return ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)


@pytest.mark.parametrize("n_rounds", [3, 9, 23])
def test_the_timeline_legend_is_outside_the_axes(n_rounds):
    """A stream's report: the legend ("line: attempts, x: failed", rounds 1-2 ... 9) sat over the
    axes at about 14-24 s, and the rising lines of the last rounds ran behind it."""
    with plots.style():
        fig = timeline(_data(**{"fetch-timeline": _timeline_rows(n_rounds, seconds=30)}))
        legend_box, axes_box = _legend_and_axes_boxes(fig)
        assert not legend_box.overlaps(axes_box)
        fig.axes[0].legend(fontsize=7, ncols=4)  # the control: where it was, over the axes
        legend_box, axes_box = _legend_and_axes_boxes(fig)
        assert legend_box.overlaps(axes_box)


def test_the_cards_and_heading_name_a_streams_micro_batches():
    """The report's cards counted a stream's 4 micro-batches as "4 rounds" and its heading said
    "round 4" (issue 34): micro-batches and batch rounds are counted apart, and the last one is
    named for what it is. The control: the same rows as batch rounds (fetch lists kept)."""
    from batchcrawl.report.page import _cards, _last

    rows = [{"round": r, "attempts": 10, "ok": 9, "failed": 1, "span_s": 1.0} for r in (1, 2, 3, 4)]
    tables = {"rounds": rows, "status-counts": [{"status": "queued", "urls": 7}],
              "bytes-by-round": [{"warc_bytes": 100}]}  # fmt: skip
    common = dict(crawl="c", generation=5, round=4, created="2026-01-01T00:00:20Z",
                  host_delay_s=0.2, max_crawl_delay_s=5.0, tables=tables)  # fmt: skip
    stream = ReportData(**common, rounds=[_micro_batch(r, 5.0 * r, 9) for r in (1, 2, 3, 4)])
    cards = dict(_cards(stream))
    assert cards["stream micro-batches"] == "4" and "rounds" not in cards
    assert _last(stream) == "micro-batch 4"
    batch = ReportData(**common, fetchlist_rounds=frozenset({1, 2, 3, 4}))
    cards = dict(_cards(batch))
    assert cards["rounds"] == "4" and "stream micro-batches" not in cards
    assert _last(batch) == "round 4"
    mixed = ReportData(**common, fetchlist_rounds=frozenset({1, 2}),
                       rounds=[_micro_batch(r, 5.0 * r, 9) for r in (3, 4)])  # fmt: skip
    assert (dict(_cards(mixed))["rounds"], dict(_cards(mixed))["stream micro-batches"]) == (
        "2",
        "2",
    )
