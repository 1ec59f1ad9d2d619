"""``WarcWriter.checkpoint`` (issue 35 item 2): after any sequence of fetches, rotations and
checkpoints, each checkpoint's ``open_end`` is the end of a whole gzip member; the first
``open_end`` bytes of the open file read as whole WARC records holding every location returned
before it; the CDXJ beside an open file indexes some of those records (at least 1/CDXJ_GROWTH of
them), none past ``open_end``, and that of a closed file exactly its records; cutting the file back to ``open_end``
after more writes (what a crash leaves) gives the same file. On a filesystem that cannot append in
place (``memory://``, like an object store), a checkpoint closes the file."""

from __future__ import annotations

import io
import os
import uuid

import fsspec
from hypothesis import given, settings
from hypothesis import strategies as st
from test_warc import fetch, writer
from warcio.archiveiterator import ArchiveIterator

from batchcrawl import cdxj
from batchcrawl.fetch.warc import CDXJ_GROWTH
from batchcrawl.store import paths


def _spans(data: bytes) -> dict[int, int]:
    spans: dict[int, int] = {}
    it = ArchiveIterator(io.BytesIO(data))
    for record in it:
        it.read_to_end(record)
        spans[it.get_record_offset()] = it.get_record_length()
    return spans


#: a run: each step is a fetch with a body of N bytes, or None for a checkpoint
STEPS = st.lists(st.one_of(st.none(), st.integers(0, 3000)), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None)
@given(steps=STEPS, rotate=st.sampled_from([1_500, 6_000, 10**9]))
def test_each_checkpoint_ends_on_a_record_and_a_cut_back_file_is_whole(tmp_path_factory, steps,
                                                                       rotate):  # fmt: skip
    base = tmp_path_factory.mktemp("w")
    w = writer(fsspec.filesystem("file"), str(base / "warc/round=1"), rotate=rotate,
               cdxj_name=paths.warc_cdxj)  # fmt: skip
    assert w.appends_in_place
    located: list = []
    committed: dict[str, int] = {}  # file -> committed end
    for i, step in enumerate(steps + [None]):
        if step is not None:
            loc = w.write_fetch(fetch(path=f"/p{i}", body=os.urandom(step)), outlinks=[])
            located.append(loc)
            continue
        point = w.checkpoint(str(base / f"warc/round={i + 2}"), f"shard=03-r{i + 2}")
        for name in point.closed:
            committed[name] = os.path.getsize(name)
        if point.open_file is not None:
            committed[point.open_file] = point.open_end
        for name, end in committed.items():
            with open(name, "rb") as fh:
                data = fh.read(end)
            spans = _spans(data)
            assert sum(spans.values()) == end  # whole members, nothing after the last
            for loc in (x for x in located if x.filename == name):
                assert spans.get(loc.offset) == loc.length
            expected = sorted(cdxj.cdxj_lines(io.BytesIO(data), os.path.basename(name)))
            if not os.path.exists(paths.warc_cdxj(name)):  # an open file not indexed yet
                assert name == point.open_file
                continue
            with open(paths.warc_cdxj(name), encoding="utf-8") as fh:
                index = fh.read().splitlines()
            if name == point.open_file:  # rewritten as it grows: never past the checkpoint
                assert index == sorted(index) and set(index) <= set(expected)
                assert len(index) * CDXJ_GROWTH >= len(expected)
            else:
                assert index == expected
    # a crash after more writes: cutting back to the last committed end restores that file
    open_name = w._file.name if w._file is not None else None
    w.write_fetch(fetch(path="/late", body=b"late"))
    w.close()
    if open_name is not None:
        before = committed[open_name]
        with open(open_name, "r+b") as fh:
            fh.truncate(before)
            fh.seek(0)
            assert sum(_spans(fh.read()).values()) == before


def test_a_checkpoint_closes_the_file_where_it_cannot_append_in_place():
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    w = writer(fs, f"{root}/warc/round=1", cdxj_name=paths.warc_cdxj)
    assert not w.appends_in_place
    first = w.write_fetch(fetch())
    point = w.checkpoint(f"{root}/warc/round=2", "shard=03-r2")
    assert point.closed == (first.filename,) and point.open_file is None
    second = w.write_fetch(fetch(path="/y"))
    assert second.filename.startswith(f"{root}/warc/round=2/shard=03-r2-")
    w.close()
    assert fs.exists(paths.warc_cdxj(first.filename))
    fs.rm(root, recursive=True)
