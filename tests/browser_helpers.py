"""Test helpers: render an HTML file in headless Chromium (Debian package ``chromium``), read where
its figures are and what went wrong while loading, take a screenshot, and find blank figures in it.

Chromium runs with the flags of the project rules (no sandbox, no GPU, no QUIC, no background
networking, a fresh profile) and ``--host-resolver-rules=MAP * ~NOTFOUND``, so no name resolves:
a page that tried to load anything from a network would fail, and the probe would report it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from html import unescape
from pathlib import Path

#: Width of the browser window, CSS pixels (device scale factor 1: one CSS pixel, one image pixel).
WINDOW_WIDTH = 1000
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-proxy-server",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
    "--enable-logging=stderr",
    "--v=0",
)
#: Chromium logs every console message of the page on stderr as ``...:CONSOLE:LINE] "text", source: ...``.
_CONSOLE_RE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)$", re.MULTILINE)

#: Injected first into <head>: records load errors (resources and scripts) and console.error/warn,
#: and at ``load`` writes the figures' boxes (page coordinates), the page size, the errors and every
#: resource the page fetched into ``<html data-probe="JSON">``.
PROBE = """<script>(function () {
  var errs = [];
  window.addEventListener("error", function (e) {
    var t = e.target;
    errs.push(t && t !== window ? "resource: " + (t.src || t.href || t.tagName) : "script: " + e.message);
  }, true);
  ["error", "warn"].forEach(function (k) {
    var f = console[k];
    console[k] = function () { errs.push(k + ": " + [].join.call(arguments, " ")); return f.apply(console, arguments); };
  });
  window.addEventListener("load", function () {
    var figs = [].map.call(document.querySelectorAll("section.plot"), function (s) {
      var svg = s.querySelector("svg"), r = (svg || s).getBoundingClientRect();
      return {id: s.id, svg: !!svg, x: r.left + scrollX, y: r.top + scrollY, w: r.width, h: r.height};
    });
    var res = performance.getEntriesByType("resource").map(function (e) { return e.name; });
    document.documentElement.setAttribute("data-probe", JSON.stringify({
      width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
      figures: figs, errors: errs, resources: res}));
  });
})();</script>"""


def chromium() -> str | None:
    """Path of the ``chromium`` executable, or None when it is not installed."""
    return shutil.which("chromium")


@dataclass(frozen=True)
class Probe:
    """What the probe saw: page size (CSS px), figure boxes, load errors, resources fetched, and
    console lines Chromium logged."""

    width: int
    height: int
    figures: list[dict]
    errors: list[str]
    resources: list[str]
    console: list[str]


def _run(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    exe = chromium()
    assert exe, "chromium is not installed"
    return subprocess.run(
        [exe, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def probe(html: Path, workdir: Path) -> Probe:
    """Load a copy of ``html`` with :data:`PROBE` injected, in a window :data:`WINDOW_WIDTH` wide,
    and return what it recorded (``--dump-dom`` prints the DOM after the load event)."""
    text = html.read_text(encoding="utf-8")
    probed = workdir / f"{html.stem}.probe.html"
    probed.write_text(text.replace("<head>", "<head>" + PROBE, 1), encoding="utf-8")
    done = _run(
        [f"--window-size={WINDOW_WIDTH},800", "--dump-dom", probed.as_uri()],
        workdir / "profile-probe",
    )
    m = re.search(r'<html[^>]*\sdata-probe="([^"]*)"', done.stdout)
    assert m, f"probe found no data-probe attribute; stderr:\n{done.stderr[-2000:]}"
    data = json.loads(unescape(m.group(1)))
    return Probe(
        width=data["width"],
        height=data["height"],
        figures=data["figures"],
        errors=data["errors"],
        resources=data["resources"],
        console=_CONSOLE_RE.findall(done.stderr),
    )


def screenshot(html: Path, png: Path, height: int, workdir: Path) -> list[str]:
    """Screenshot ``html`` (unmodified) into ``png``, :data:`WINDOW_WIDTH` x ``height`` px.

    Returns the console lines Chromium logged for the page.
    """
    done = _run(
        [f"--window-size={WINDOW_WIDTH},{height}", f"--screenshot={png}", html.as_uri()],
        workdir / "profile-shot",
    )
    assert png.is_file(), f"no screenshot written; stderr:\n{done.stderr[-2000:]}"
    return _CONSOLE_RE.findall(done.stderr)


def ink(png: Path, box: dict) -> float:
    """Share of the pixels in ``box`` (page CSS px) drawn in colour: saturation and value above a
    third. The report draws its data in colour and its axes and text in grey, so an empty plot or
    a bare set of axes has about 0."""
    import numpy as np
    from PIL import Image

    with Image.open(png) as im:
        x0, y0 = round(box["x"]), round(box["y"])
        region = im.convert("RGB").crop((x0, y0, x0 + round(box["w"]), y0 + round(box["h"])))
        hsv = np.asarray(region.convert("HSV"), dtype=np.int16)
    if hsv.size == 0:
        return 0.0
    coloured = (hsv[..., 1] > 85) & (hsv[..., 2] > 85)
    return float(coloured.mean())
