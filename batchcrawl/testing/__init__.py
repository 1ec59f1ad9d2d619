"""Loopback web servers and the sample web, used by the demo, the tests and the benchmarks (the
precedent is ``distributed.utils_test``). Nothing in the crawler proper imports this package."""
