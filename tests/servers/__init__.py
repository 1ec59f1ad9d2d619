"""Loopback web servers and page sets only the tests and the benchmarks in ``scripts/`` use (the
installed package keeps what ``batchcrawl demo`` needs: :mod:`batchcrawl.testing.webserver` and
:mod:`batchcrawl.testing.sampleweb`). Tests import them as ``servers.*`` (pytest puts ``tests/`` on
``sys.path``); scripts put ``tests/`` on ``sys.path`` first."""
