"""The atomic write (batchcrawl.store.atomic.open_whole), through its users: CrawlDir.open_output,
CrawlDir.write_table and the export's Destination, on the local filesystem, on a real S3 API (moto's
server on loopback, multipart uploads included) and on fsspec's memory filesystem (the temp-then-move
path). A write that fails midway is produced by a file wrapper that raises after N bytes, under
pyarrow's Parquet writer.
"""

from __future__ import annotations

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from batchcrawl.export.lake import Destination
from batchcrawl.store import atomic
from batchcrawl.store.crawldir import CrawlDir

MIB = 1 << 20


class FailAfter:
    """A writable file that passes ``limit`` bytes to ``fh``, then raises OSError (a disk or network
    failure in the middle of a write)."""

    def __init__(self, fh, limit: int) -> None:
        self.fh, self.left = fh, limit
        self.closed = False

    def write(self, data) -> int:
        data = bytes(data)
        if len(data) > self.left:
            self.fh.write(data[: self.left])
            self.left = 0
            raise OSError("injected failure: connection reset in the middle of a write")
        self.left -= len(data)
        return self.fh.write(data)

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        self.fh.flush()

    def tell(self) -> int:
        return self.fh.tell()

    def close(self) -> None:
        self.closed = True


def big_table(rows: int = 40_000) -> pa.Table:
    """Incompressible rows (~2.6 MB as Parquet) so a write spans several flushes."""
    import os

    return pa.table({"blob": [os.urandom(64) for _ in range(rows)]})


def names(fs, folder: str) -> list[str]:
    fs.invalidate_cache()
    return sorted(p.rsplit("/", 1)[-1] for p in fs.find(folder))


# -- local --------------------------------------------------------------------------------------
def test_local_success_publishes_whole_file_and_leaves_no_temp(tmp_path):
    fs = fsspec.filesystem("file")
    final = str(tmp_path / "a" / "b.bin")
    with atomic.open_whole(fs, final) as fh:
        fh.write(b"x" * 1000)
        assert not fs.exists(final)  # not visible while writing
    assert open(final, "rb").read() == b"x" * 1000
    assert names(fs, str(tmp_path)) == ["b.bin"]


@pytest.mark.parametrize("limit", [0, 10, 100_000, 1_500_000])
def test_local_parquet_write_failing_midway_leaves_nothing(tmp_path, limit):
    crawl = CrawlDir.create(str(tmp_path / "crawl"), "", buckets=1)
    rel = "fetched/round=1/shard=00.parquet"
    with pytest.raises(OSError, match="injected failure"):
        with crawl.open_output(rel) as fh:
            pq.write_table(big_table(), FailAfter(fh, limit))
    assert not crawl.fs.exists(crawl.path(rel))
    assert names(crawl.fs, crawl.path("fetched")) == []  # the temp file is gone too


def test_local_existing_file_survives_a_failed_overwrite(tmp_path):
    fs = fsspec.filesystem("file")
    final = str(tmp_path / "f.bin")
    with atomic.open_whole(fs, final) as fh:
        fh.write(b"old")
    with pytest.raises(RuntimeError):
        with atomic.open_whole(fs, final) as fh:
            fh.write(b"new, but partial")
            raise RuntimeError("the caller fails")
    assert open(final, "rb").read() == b"old"
    assert names(fs, str(tmp_path)) == ["f.bin"]


# -- other fsspec filesystems (temp name, then move) ----------------------------------------------
def test_memory_filesystem_uses_a_temp_name_and_discards_on_error():
    fs = fsspec.filesystem("memory")
    folder = "/atomic-test"
    with pytest.raises(OSError):
        with atomic.open_whole(fs, f"{folder}/x.bin") as fh:
            FailAfter(fh, 5).write(b"0123456789")
    assert not fs.exists(f"{folder}/x.bin") and names(fs, folder) == []
    with atomic.open_whole(fs, f"{folder}/x.bin") as fh:
        fh.write(b"whole")
    assert fs.cat_file(f"{folder}/x.bin") == b"whole" and names(fs, folder) == ["x.bin"]
    fs.rm(folder, recursive=True)


# -- S3 (moto server on loopback) ---------------------------------------------------------------
def s3():
    import s3fs

    return s3fs.S3FileSystem()  # endpoint and keys from the AWS_* environment (s3_env)


def open_uploads(fs, bucket: str = "lake") -> list[str]:
    """Keys of multipart uploads started and neither completed nor aborted."""
    reply = fs.call_s3("list_multipart_uploads", Bucket=bucket)
    return [u["Key"] for u in reply.get("Uploads", [])]


def test_s3_crawl_table_write_failing_midway_publishes_nothing(s3_env):
    crawl = CrawlDir.create("s3://lake/atomic-crawl", "", buckets=1)
    rel = "fetched/round=1/shard=00.parquet"
    with pytest.raises(OSError, match="injected failure"):
        with crawl.open_output(rel) as fh:
            pq.write_table(big_table(), FailAfter(fh, 1_000_000))
    assert not s3().exists(f"lake/atomic-crawl/{rel}")
    crawl.write_table("links", "links/round=1/shard=00.parquet", {})  # and success still works
    assert s3().exists("lake/atomic-crawl/links/round=1/shard=00.parquet")


def test_s3_multipart_upload_failing_midway_is_aborted(s3_env):
    fs = s3()
    final = "lake/atomic/multipart.bin"
    with pytest.raises(OSError, match="injected failure"):
        with atomic.open_whole(fs, final, block_size=5 * MIB) as fh:
            out = FailAfter(fh, 12 * MIB)
            for _ in range(16):  # two 5 MiB parts are uploaded before the failure
                out.write(b"p" * MIB)
    assert fh.parts and len(fh.parts) >= 2  # the failure really came in the middle of an upload
    assert not fs.exists(final)
    assert open_uploads(fs) == []  # aborted, not left to be billed or completed later
    with atomic.open_whole(fs, final, block_size=5 * MIB) as fh:
        for _ in range(11):
            fh.write(b"q" * MIB)
    fs.invalidate_cache()
    assert fs.size(final) == 11 * MIB and open_uploads(fs) == []


def test_s3_export_destination_failing_midway_publishes_nothing(s3_env):
    dest = Destination("s3://lake/atomic-export")
    with pytest.raises(OSError, match="injected failure"):
        with dest.open_write("index/crawl=c/round=1/part-00.parquet") as fh:
            pq.write_table(big_table(), FailAfter(fh, 200_000))
    assert not s3().exists("lake/atomic-export/index/crawl=c/round=1/part-00.parquet")
    dest.put("x/marker.json", b"{}")
    assert dest.read_json("x/marker.json") == {}
