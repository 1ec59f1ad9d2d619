"""Near-duplicate flags and trap suspicion against their definition, for any page sequence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch.neardup import NearDuplicates
from batchcrawl.fetch.simhash import hamming

# few hosts, keys and fingerprint bits, so that repeats and near matches are common
_page = st.tuples(
    st.sampled_from(["a", "b"]), st.integers(0, 6), st.integers(0, 2**8 - 1) | st.none()
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_page, max_size=60), st.integers(1, 6), st.integers(0, 4), st.integers(1, 5))
def test_observe_follows_the_definition(pages, window, max_hamming, trap_min_pages):
    nd = NearDuplicates(
        window, max_hamming, trap_min_pages=trap_min_pages, trap_near_share=0.5,
        trap_repeat_segments=99,
    )  # fmt: skip
    recent: dict[str, list[tuple[int, int, bool]]] = {}  # host -> [(fp, key, near)], oldest first
    trap: dict[str, str | None] = {}
    for host, key, fp in pages:
        got = nd.observe(host, key, "/", fp)
        if fp is None:
            assert got is None
            continue
        seen = recent.setdefault(host, [])
        near = next((k for f, k, _ in seen if k != key and hamming(f, fp) <= max_hamming), None)
        assert got == near
        seen.append((fp, key, near is not None))
        del seen[:-window]
        flags = [n for _, _, n in seen]
        if trap.get(host) is None and len(flags) >= trap_min_pages and sum(flags) >= len(flags) / 2:
            trap[host] = "near"
        assert nd.trap(host) == trap.get(host)
