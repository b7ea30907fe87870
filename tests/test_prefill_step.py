"""A prefill forward's own dispatch (`ClassTable.prefill_step_s`: SGLang's eager prefill, where its
graphs cover decode only) is paid once by each iteration that prefills, however many prompts it
holds and however many requests run beside it; schedules worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from dlmcost.serving import behaviour
from dlmcost.serving.simulate import ClassTable, RequestPasses, simulate

pytestmark = pytest.mark.usefixtures("bundled_offline")

FLAT = [0.0, 1.0, 1.0]  # an iteration of 1 or 2 requests takes 1 s
WAIT = [0.0, 2.0, 2.0]  # a prefill forward's dispatch: 2 s, once an iteration


def _table(classes: int = 1) -> ClassTable:
    """NFE 3, the first token after the prefill pass (lead 1), whose work adds nothing beyond a
    decode's (first_pass_s = pass_s) but whose forward waits 2 s for its dispatch."""
    return ClassTable([3] * classes, [1] * classes, [0.0] * classes, [FLAT] * classes, [FLAT] * classes,
                      lead=[1] * classes, prefill_step_s=[WAIT] * classes)


@pytest.mark.parametrize("classes", [1, 2])  # one class: the in-order loop; two alike: the general one
def test_a_newcomer_beside_a_running_request_waits_the_whole_dispatch(classes):
    """Request 0 at 0, request 1 at 0.5. Iteration 1, request 0's prefill alone: 1 + 2 = 3 s, its
    first token at 3. Request 1 joins there: its prefill iteration 1 + 2 = 3 s (the whole 2 s, not
    2 / 2 for its share of a batch of two), its first token at 6; request 0's decodes end at 6 and 7
    (done), request 1's at 7 and 8."""
    r = simulate(_table(classes), np.array([0, classes - 1]), 2, arrivals_s=np.array([0.0, 0.5]))
    assert r.first_block_s.tolist() == pytest.approx([3.0, 6.0])
    assert r.done_s.tolist() == pytest.approx([7.0, 8.0])


@pytest.mark.parametrize("release, first", [("first-done", 3.0), ("synchronous", 5.0)])
def test_prompts_prefilled_together_share_one_dispatch(release, first):
    """Two requests at 0, both admitted: one prefill forward, 1 + 2 = 3 s (not 1 + 2 x 2), both
    first tokens at 3 (a synchronous round streams its block at its end, 5), their two decodes to 5."""
    r = simulate(_table(), np.array([0, 0]), 2, arrivals_s=np.array([0.0, 0.0]), release=release,
                 passes=None if release == "first-done" else _alike_passes(2))
    assert r.first_block_s.tolist() == pytest.approx([first, first])
    assert r.done_s.tolist() == pytest.approx([5.0, 5.0])


def _alike_passes(n: int) -> RequestPasses:
    """n requests of one prefill pass and one block of 2 passes each."""
    return RequestPasses.from_rows([1] * n, [[2]] * n)


def test_each_chunk_of_a_long_prompt_is_a_prefill_forward():
    """A 3,000-token prompt under a budget of 1,000 a step, its prefill work 9 s (first_pass_s[1] =
    1 + 9): three chunk iterations of 1 + 3 + 2 = 6 s each (the dispatch in every one), its first
    token at 18, two decodes to 20 (12 and 14 without the dispatch)."""
    table = ClassTable([3], [1], [0.0], [FLAT], [[0.0, 10.0, 19.0]], lead=[1], prefill_step_s=[WAIT])
    chunked = behaviour.prompt_in_token_chunks(table, [3000], 1000)
    assert chunked.prefill_step_s == [WAIT]
    r = simulate(chunked, np.array([0]), 2, arrivals_s=np.array([0.0]))
    assert r.first_block_s.tolist() == pytest.approx([18.0])
    assert r.done_s.tolist() == pytest.approx([20.0])


def test_the_dispatch_of_prompts_of_several_classes_is_the_largest_of_theirs():
    """prefill_step: one lookup when every class has the same row, the largest of the prefilling
    classes' rows when they differ (rows by hand: class 0 adds 2 ms at b = 1, class 1 adds 3 ms)."""
    same = ClassTable([2, 2], [1, 1], [0.1, 0.1], [[0.0, 1.0]] * 2, prefill_step_s=[[0.0, 0.002]] * 2)
    assert same.common_prefill_step == [0.0, 0.002]
    assert same.prefill_step([0, 1], 1) == 0.002 and same.prefill_step([], 1) == 0.0
    mixed = ClassTable([2, 2], [1, 1], [0.1, 0.1], [[0.0, 1.0]] * 2, prefill_step_s=[[0.0, 0.002], [0.0, 0.003]])
    assert mixed.common_prefill_step is None
    assert mixed.prefill_step([0], 1) == 0.002 and mixed.prefill_step([0, 1], 1) == 0.003


def test_a_mixed_prefill_pays_its_largest_class_s_dispatch_at_its_batch():
    """Two classes at 0, admitted together (b = 2), class 0's dispatch 2 s alone and 3 s at b = 2,
    class 1's 1 s alone and 5 s at b = 2. Their one prefill forward: 1 + max(3, 5) = 6 s (not the
    smaller 3, nor class 0's, nor the lone rows' max(2, 1) = 2, nor 5 per prompt), both first tokens
    at 6, their two decodes to 8."""
    table = ClassTable([3, 3], [1, 1], [0.0, 0.0], [FLAT, FLAT], [FLAT, FLAT], lead=[1, 1],
                       prefill_step_s=[[0.0, 2.0, 3.0], [0.0, 1.0, 5.0]])
    r = simulate(table, np.array([0, 1]), 2, arrivals_s=np.array([0.0, 0.0]))
    assert r.first_block_s.tolist() == pytest.approx([6.0, 6.0])
    assert r.done_s.tolist() == pytest.approx([8.0, 8.0])


def test_one_class_prefilled_together_pays_its_dispatch_at_their_batch():
    """One class (the in-order loop), its dispatch 2 s alone and 3 s at b = 2: two requests at 0
    prefill in one forward of 1 + 3 = 4 s (not the lone 2 s), first tokens at 4, done at 6."""
    table = ClassTable([3], [1], [0.0], [FLAT], [FLAT], lead=[1], prefill_step_s=[[0.0, 2.0, 3.0]])
    r = simulate(table, np.array([0, 0]), 2, arrivals_s=np.array([0.0, 0.0]))
    assert r.first_block_s.tolist() == pytest.approx([4.0, 4.0])
    assert r.done_s.tolist() == pytest.approx([6.0, 6.0])


def test_short_prompts_in_one_budget_share_one_dispatch():
    """Two 300-token prompts at 0 under a budget of 1,000 a step: both whole in the first
    iteration, one prefill forward, 1 + 2 = 3 s (not 1 + 2 x 2 for its two pieces): first tokens
    at 3, two decodes to 5."""
    chunked = behaviour.prompt_in_token_chunks(_table(), [300], 1000)
    r = simulate(chunked, np.array([0, 0]), 2, arrivals_s=np.array([0.0, 0.0]))
    assert r.first_block_s.tolist() == pytest.approx([3.0, 3.0])
    assert r.done_s.tolist() == pytest.approx([5.0, 5.0])


def test_the_dispatch_scales_and_survives_block_chunks_with_the_table():
    """A table scaled by 2 (an error band) waits 4 s a prefill forward; cutting its prompt into
    block chunks keeps the dispatch rows."""
    from dlmcost.serving.simulate.tables import scaled

    assert scaled(_table(), 2.0).prefill_step_s == [[0.0, 4.0, 4.0]]
    assert behaviour.prompt_in_block_chunks(_table(), [64], 32).prefill_step_s == [WAIT]
