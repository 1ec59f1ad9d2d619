"""Shared pytest fixtures.

* ``web`` — one loopback :class:`~batchcrawl.testing.webserver.MultiHostServer` for the whole session. Its
  ``web.app`` is a :class:`~batchcrawl.testing.webserver.RoutingApp`: register content with
  ``web.app.add(host, path, Response(...))``; unregistered paths fall back to the misbehaving
  routes of :class:`~batchcrawl.testing.webserver.MisbehavingApp`. Tests share the server, so each test
  should use its own host names (``host_name`` gives a fresh one).
* ``test_config`` — :func:`batchcrawl.config.loopback_test_config` with small delays and timeouts:
  only ``*.test`` resolves (to 127.0.0.1), no DNS is asked, only 127.0.0.0/8 may be contacted.
* ``s3_env`` — a moto S3 server on loopback (one per test module) with a bucket ``lake``; its endpoint and
  credentials are in the ``AWS_*`` environment while the session runs (skips without s3fs/moto).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from servers.apps import MisbehavingApp, RoutingApp

from batchcrawl.config import Config, loopback_test_config
from batchcrawl.testing.webserver import MultiHostServer

# Network rule: no test may reach a cloud metadata address. botocore asks 169.254.169.254 for
# credentials when none are configured; the S3 tests use moto on loopback with explicit ones.
os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")

#: ../shared/testdata beside the repository (never copied into it).
TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"

_host_numbers = itertools.count(1)


@pytest.fixture(scope="session")
def web() -> Iterator[MultiHostServer]:
    """A started MultiHostServer (session-wide) whose ``app`` is a RoutingApp over
    MisbehavingApp."""
    server = MultiHostServer(RoutingApp(fallback=MisbehavingApp()))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def host_name(request: pytest.FixtureRequest) -> str:
    """A host name under ``.test`` no other test uses, e.g. ``t17.test``."""
    return f"t{next(_host_numbers)}.test"


@pytest.fixture
def test_config() -> Config:
    """Loopback-only config with test-sized delays and timeouts (seconds)."""
    return loopback_test_config(
        politeness={"host_delay_s": 0.05, "ip_delay_s": 0.0, "max_crawl_delay_s": 1.0},
        fetch={
            "connect_timeout_s": 2.0,
            "read_timeout_s": 2.0,
            "total_timeout_s": 5.0,
            "max_body_bytes": 1_000_000,
            "threads": 4,
        },
        robots={"retry_after_s": 60.0},
    )


@pytest.fixture(scope="module")
def s3_env():
    """A moto S3 server on loopback; its endpoint and credentials in the AWS_* environment."""
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    environ = mock.patch.dict(os.environ, env)  # restores the caller's values, or their absence
    environ.start()
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    try:
        s3fs.S3FileSystem().mkdir("lake")
    except FileExistsError:  # moto keeps its buckets in the process, across servers
        pass
    try:
        yield env
    finally:
        environ.stop()
        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()
