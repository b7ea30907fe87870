"""Grid columns: a constant column of a large grid is a stride-0 view (no copy), equal to the
copy it replaces, and stays one when rows are taken; small grids and varying columns copy."""

import numpy as np
import pytest

from dlmcost.engine.columns import SHARE_FROM, column, take


@pytest.mark.parametrize("n", [1, SHARE_FROM - 1, SHARE_FROM, 5 * SHARE_FROM])
def test_a_constant_column_equals_its_copy_and_is_a_view_when_large(n):
    c = column(2.5, n, float)
    assert c.shape == (n,) and c.dtype == float and np.all(c == 2.5)
    assert (c.strides == (0,)) == (n >= SHARE_FROM)
    rows = np.arange(0, n, 2)
    t = take(c, rows)
    assert t.shape == rows.shape and np.all(t == 2.5)
    assert (t.strides == (0,)) == (rows.size >= SHARE_FROM)
    mask = np.zeros(n, bool)
    mask[::3] = True
    assert take(c, mask).shape == (mask.sum(),) and np.all(take(c, mask) == 2.5)
    assert take(c, slice(1, 4)).shape == (min(n, 4) - min(n, 1),)


def test_a_varying_column_is_copied_and_taken_by_index():
    src = np.arange(5.0)
    c = column(src, 5)
    src[0] = 99.0  # the grid owns its column
    assert c.tolist() == [0, 1, 2, 3, 4]
    assert take(c, [4, 0]).tolist() == [4.0, 0.0]
    assert column(True, 3, bool).dtype == bool


def test_take_accepts_what_indexing_accepts_and_refuses_what_it_refuses():
    """take replaced a[rows] in Grid, Knobs, PassFamily and Rates: an empty list takes nothing
    (numpy reads [] as floats, which np.take alone refuses), and a mask of the wrong length is
    an error rather than the rows of its True entries."""
    for c in (np.arange(5.0), column(1.0, SHARE_FROM + 1), np.zeros((3, 5))):
        assert take(c, []).shape == c.shape[:-1] + (0,)
        assert take(c, np.array([], int)).shape == c.shape[:-1] + (0,)
        with pytest.raises(IndexError):
            take(c, [True, False, True])
    assert take(np.arange(6.0).reshape(2, 3), [False, True, True]).tolist() == [[1, 2], [4, 5]]


@pytest.mark.parametrize("model, options", [
    ("inclusionAI/LLaDA2.0-mini", dict(schemes=["prefix-cache", "block", "mdm"], blocks=[4, 8], stack="sglang")),
    ("inclusionAI/LLaDA2.0-mini", dict(schemes=["prefix-cache", "dual-cache"], blocks=[8], stack="none", eps=[1, 2],
                                       tps=[2])),
    ("deepseek-ai/DeepSeek-V3", dict(schemes=["ar", "block"], blocks=[8], stack="none")),  # MLA, both forms
    ("google/gemma-3-1b-it", dict(schemes=["ar", "block"], blocks=[8], gens=[64, 640], stack="sglang")),  # sliding
    ("Qwen/Qwen3-8B", dict(schemes=["draft-verify"], blocks=[4], tpf=2, drafter="Qwen/Qwen3-30B-A3B")),
])
def test_a_sweep_with_every_constant_column_a_view_prints_the_same_rows(monkeypatch, model, options):
    """Constant columns are views only from SHARE_FROM configurations on, which the other tests'
    small grids never reach: here every constant column and every take of one is a read-only view,
    so an in-place write to one anywhere in the engine raises, and any other difference shows."""
    from dlmcost import api
    from dlmcost.engine import columns

    options = dict(dict(gpus="h100,h200", prompts=[16], gens=[64], batches=[1, 3]), **options)
    copied = [r.plain() for r in api.sweep(model, **options).rows]
    monkeypatch.setattr(columns, "SHARE_FROM", 1)
    viewed = [r.plain() for r in api.sweep(model, **options).rows]
    assert len(copied) >= 4 and viewed == copied


def test_taking_rows_of_a_constant_column_gives_a_view_from_share_from_rows_on():
    c = column(7.0, 2 * SHARE_FROM, float)
    for size in (SHARE_FROM - 1, SHARE_FROM):
        t = take(c, np.arange(size))
        assert t.shape == (size,) and np.all(t == 7.0)
        assert (t.strides == (0,)) == (size >= SHARE_FROM)
