"""pywb 2.10, the Webrecorder replay tool, replays an exported crawl from the crawler's own CDXJ.

pywb lives in its own virtualenv (``bash scripts/pywb_test.sh`` creates ``.venv-pywb``); without it
these tests skip. A real crawl (tests/archive_helpers.py) is exported; a standard collection is
made with pywb's ``wb-manager init``, the exported WARC files are copied into its ``archive/``
folder and the export's ``.cdxj`` files (not pywb's indexer) become its ``indexes/index.cdxj``.
pywb's own app then serves it on 127.0.0.1 (tests/pywb_server.py) and pages, a redirect and a
revisit are replayed in identity mode (``TIMESTAMPid_``: the archived bytes, unrewritten) and
compared byte for byte with the payload stored in the WARC record.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import requests
from archive_helpers import archive_crawl, captures

from batchcrawl.cdxj import timestamp14
from batchcrawl.export.lake import export_crawl

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("PYWB_TEST_VENV", REPO / ".venv-pywb"))
PYTHON = VENV / "bin" / "python"
COLL = "crawl"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (VENV / "bin" / "wb-manager").exists(),
        reason=f"no pywb virtualenv at {VENV}: run `bash scripts/pywb_test.sh` to create it",
    ),
]


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    crawl, _ = archive_crawl(tmp_path_factory.mktemp("pywb") / "crawl")
    return crawl


@pytest.fixture(scope="module")
def pywb(crawl, tmp_path_factory):
    """A pywb collection of the exported crawl, served on loopback: yields its base URL."""
    dest = tmp_path_factory.mktemp("lake")
    export_crawl(crawl, str(dest), tables="warc")
    root = tmp_path_factory.mktemp("pywbroot")
    subprocess.run([str(VENV / "bin" / "wb-manager"), "init", COLL], cwd=root, check=True,
                   capture_output=True)  # fmt: skip
    (root / "config.yaml").write_text("framed_replay: false\n")  # pywb's defaults otherwise
    coll = root / "collections" / COLL
    lines = []
    for warc in sorted(dest.glob("warc/crawl=*/round=*/*.warc.gz")):
        shutil.copy(warc, coll / "archive" / warc.name)
        lines += warc.with_name(warc.name.replace(".warc.gz", ".cdxj")).read_text().splitlines()
    (coll / "indexes" / "index.cdxj").write_text("".join(f"{x}\n" for x in sorted(lines)))
    proc = subprocess.Popen([str(PYTHON), str(REPO / "tests" / "pywb_server.py"), str(root)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        first = proc.stdout.readline()
        if not first.startswith("PORT "):
            proc.kill()
            pytest.fail(f"pywb did not start: {first!r} {proc.stderr.read()[-3000:]}")
        yield f"http://127.0.0.1:{int(first.split()[1])}/{COLL}"
    finally:
        proc.kill()
        proc.wait(timeout=30)


def replay(base: str, capture: dict) -> requests.Response:
    stamp = timestamp14(dict(capture["record"].rec_headers)["WARC-Date"])
    return requests.get(f"{base}/{stamp}id_/{capture['url']}", allow_redirects=False, timeout=30)


def test_pages_replay_byte_for_byte(crawl, pywb):
    pages = [c for c in captures(crawl)
             if c["record"].rec_type == "response" and c["fetch_status"] == 200]  # fmt: skip
    assert len(pages) > 20
    for c in pages:
        got = replay(pywb, c)
        assert got.status_code == 200, (c["url"], got.status_code, got.text[:300])
        assert got.content == c["record"].payload, c["url"]
        assert got.headers["Content-Type"].split(";")[0] == c["content_mime_type"]


def test_redirect_replays_as_a_redirect(crawl, pywb):
    redirects = [c for c in captures(crawl) if c["fetch_status"] in (301, 302)]
    assert redirects
    for c in redirects:
        got = replay(pywb, c)
        assert got.status_code == c["fetch_status"], c["url"]
        assert got.headers["Location"].endswith(c["fetch_redirect"].split("/", 3)[3]), c["url"]


def test_revisit_replays_the_original_payload(crawl, pywb):
    """A revisit record has HTTP headers only; pywb finds the original by the CDXJ digest (the
    ``sha1:`` digest, as cdxj-indexer writes it) and serves its payload."""
    all_caps = captures(crawl)
    revisits = [c for c in all_caps if c["record"].rec_type == "revisit"]
    assert revisits
    originals = {c["content_digest"]: c for c in all_caps if c["record"].rec_type == "response"}
    for c in revisits:
        assert c["record"].payload == b""
        original = originals[c["content_digest"]]
        got = replay(pywb, c)
        assert got.status_code == 200, (c["url"], got.status_code, got.text[:300])
        assert got.content == original["record"].payload, c["url"]


def test_the_collection_index_is_the_crawlers_own(pywb, crawl):
    """pywb's CDX API answers from our CDXJ: same digest form, bare WARC names."""
    page = next(c for c in captures(crawl) if c["record"].rec_type == "response")
    got = requests.get(f"{pywb}/cdx", params={"url": page["url"], "output": "json"}, timeout=30)
    rows = [json.loads(line) for line in got.text.splitlines()]
    assert rows and all(r["digest"].startswith("sha1:") and "/" not in r["filename"]
                        for r in rows)  # fmt: skip
