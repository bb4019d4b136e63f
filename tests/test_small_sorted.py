"""The GIL-holding sorted look-ups equal numpy's on either side of the small/large cut."""

from __future__ import annotations

import numpy as np
import pytest

from arag.small_sorted import SMALL, best_first, distinct, mapped, members, position, positions, unique

SIZES = [0, 1, 2, SMALL, SMALL + 1, 500]


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint64])
@pytest.mark.parametrize("n", SIZES)
def test_positions_equal_searchsorted(dtype, n):
    rng = np.random.default_rng(n)
    high = 2**63 + 2**40 if dtype == np.uint64 else 1000  # uint64 hashes above int64's range
    hay = np.sort(rng.integers(0, high, size=300, dtype=np.uint64 if dtype == np.uint64 else np.int64).astype(dtype))
    hay = np.concatenate([hay, hay[:20]]).astype(dtype)  # repeats: left and right differ
    hay.sort()
    values = np.concatenate([rng.choice(hay, size=n // 2), rng.integers(0, 1000, size=n - n // 2).astype(dtype)]) if n else np.zeros(0, dtype)
    for side in ("left", "right"):
        got = positions(hay, values, side=side)
        assert got.dtype == np.intp
        np.testing.assert_array_equal(got, np.searchsorted(hay, values, side=side))
        for v in values[:5].tolist():
            assert position(hay, v, side=side) == int(np.searchsorted(hay, v, side=side))


def test_positions_on_an_empty_array_and_lists():
    assert positions(np.zeros(0, np.int64), [3, 1]).tolist() == [0, 0]
    assert positions(np.array([1, 3, 3, 7]), [3, 0, 8], side="right").tolist() == [3, 0, 4]


@pytest.mark.parametrize("n", SIZES)
def test_distinct_and_members_equal_numpy(n):
    rng = np.random.default_rng(7 + n)
    values = rng.integers(0, 40, size=n)
    assert distinct(values) == np.unique(values).tolist()
    for dtype in (np.int64, np.uint64):
        got = unique(values.astype(dtype))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, np.unique(values.astype(dtype)))
    hay = np.unique(rng.integers(0, 40, size=25))
    np.testing.assert_array_equal(members(hay, values), np.isin(values, hay))
    np.testing.assert_array_equal(members(np.zeros(0, np.int64), values), np.zeros(n, dtype=bool))


@pytest.mark.parametrize("n", SIZES)
def test_best_first_equals_lexsort_with_ties(n):
    rng = np.random.default_rng(11 + n)
    scores = rng.integers(0, 5, size=n).astype(np.float32) / 4  # many equal scores
    ids = rng.permutation(10 * n + 1)[:n].astype(np.int64)
    np.testing.assert_array_equal(best_first(scores, ids), np.lexsort((ids, -scores)))
    int_scores = rng.integers(0, 3, size=n)
    np.testing.assert_array_equal(best_first(int_scores, ids), np.lexsort((ids, -int_scores)))


def test_mapped_is_a_plain_view_of_the_file(tmp_path):
    data = np.arange(10, dtype=np.int64)
    np.save(tmp_path / "a.npy", data)
    got = mapped(tmp_path / "a.npy")
    assert type(got) is np.ndarray and not got.flags.writeable
    np.testing.assert_array_equal(got, data)
