"""choose_decodings with decodings given (`--scheme`, `--block`, `--tpf`, `--steps`), called directly:
the decodings it returns and the warnings and errors it raises, each written out by hand. The
published numbers are LLaDA2.0-mini's threshold 0.95, block 32 row on HumanEval+ (arXiv 2602.08676,
Table 2: 5.16 tokens per forward), read with `--task humaneval-plus` so that no mix is averaged."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlmcost.analysis.published import default_decoding
from dlmcost.errors import DlmcostWarning, UsageError
from dlmcost.inputs.models import resolve_model
from dlmcost.serving.decodings import choose_decodings
from dlmcost.serving.steptime import Decoding

MINI = "inclusionAI/LLaDA2.0-mini"  # its config lists block (block 32) and ar
DREAM = "Dream-org/Dream-v0-Base-7B"  # mdm, prefix-cache, dual-cache; no published decoding
GEMMA = "google/gemma-2-9b"  # autoregressive only
LLADA = "GSAI-ML/LLaDA-8B-Instruct"  # sampler block 32; its default published decoding (EVAL.md) blocks of 8


def given(scheme=None, block=None, tpf=None, steps=None):
    return SimpleNamespace(scheme=scheme, block=block, tpf=tpf, steps=steps)


def chosen(model: str, decodings, **kw):
    """The decodings chosen and the (category, message) of every warning raised on the way."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = choose_decodings(resolve_model(model), decodings, **kw)
    return out, [(w.category, str(w.message)) for w in caught]


@pytest.mark.skipif("MUTANT_UNDER_TEST" in os.environ, reason="mutmut's trampolines add frames to the stack")
def test_the_warnings_point_at_the_caller():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        choose_decodings(resolve_model(GEMMA), [given("ar", block=8)])  # an ignored knob
        choose_decodings(resolve_model(DREAM), [given("mdm", tpf=0.5)])  # fewer tokens than passes
        choose_decodings(resolve_model(GEMMA), [given("mdm")])  # a foreign scheme
        choose_decodings(resolve_model(DREAM), [given("block", block=32)], side_by_side=True)  # its own instead
    assert [Path(w.filename).name for w in caught] == ["test_given_decodings.py"] * 4


def test_knobs_an_autoregressive_scheme_does_not_read_warn_once_and_it_runs_one_token_per_forward():
    out, warned = chosen(GEMMA, [given(block=32), given("ar", tpf=2.0)])
    assert out == [Decoding("ar", None, 1.0)]
    assert warned == [(DlmcostWarning, "--block, --tpf do nothing for the ar scheme (it reads none of them; "
                                       "`dlmcost schemes`)")]


def test_every_given_decoding_is_kept_in_order_and_foreign_schemes_are_named_once():
    out, warned = chosen(GEMMA, [given("ar"), given("mdm"), given("multi-block", tpf=2.0), given("mdm")])
    # mdm reads no block and the model publishes none: the whole answer, one token per forward;
    # multi-block takes its own default block of 32
    assert out == [Decoding("ar", None, 1.0), Decoding("mdm", None, 1.0), Decoding("multi-block", 32, 2.0)]
    assert warned == [(DlmcostWarning, f"{GEMMA} was not published with mdm, multi-block (its config lists ar): "
                                       "the answers' quality there is not known")]


def test_fewer_tokens_than_passes_warns_below_one_token_per_forward_only():
    out, warned = chosen(DREAM, [given("mdm", tpf=0.5)])
    assert out == [Decoding("mdm", None, 0.5)]
    assert warned == [(DlmcostWarning, "mdm at 0.5 tokens per forward: more passes than tokens, so some steps "
                                       "commit no token")]
    out, warned = chosen(DREAM, [given("mdm", tpf=1.0), given("mdm", tpf=1.5)])
    assert (out, warned) == ([Decoding("mdm", None, 1.0), Decoding("mdm", None, 1.5)], [])


def test_a_drafter_scheme_below_one_accepted_token_is_an_error():
    with pytest.raises(UsageError) as raised, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # draft-verify is foreign to Dream: its warning is not the point
        choose_decodings(resolve_model(DREAM), [given("draft-verify", tpf=0.5)])
    assert str(raised.value) == ("decoding: 0.5 accepted tokens per iteration is fewer than the one every "
                                 "iteration of draft-verify accepts (the verifier's own token)")


@pytest.mark.parametrize("decoding, message", [
    (given("mdm", tpf=2.0, steps=64), "decoding: give steps or tpf, not both"),
    (given(block=4, tpf=5.0), "decoding: 5 tokens per forward exceeds the block of 4 (at least one step per block)"),
    (given("nope"), "decoding: unknown scheme 'nope'; choose from: ar, mdm, prefix-cache, dual-cache, block, "
                    "multi-block, windowed-refresh, draft-verify, diffgemma"),
])
def test_given_decodings_that_cannot_run_are_usage_errors(decoding, message):
    model = resolve_model(MINI if decoding.block else DREAM)
    with pytest.raises(UsageError) as raised:
        choose_decodings(model, [decoding], median_answer=256)
    assert str(raised.value) == message


def test_tokens_per_forward_equal_to_the_block_is_allowed():
    assert chosen(MINI, [given(block=4, tpf=4.0)]) == ([Decoding("block", 4, 4.0)], [])


def test_a_scheme_alone_takes_the_published_decoding_on_the_task():
    (d,), warned = chosen(MINI, [given()], task="humaneval-plus")
    assert (d, d.published.setting, warned) == (Decoding("block", 32, 5.16, 0.0), "t0.95-b32", [])
    (d,), _ = chosen(MINI, [given(block=16)], task="humaneval-plus")  # another block: the published rate, not the row
    assert (d, d.published) == (Decoding("block", 16, 5.16), None)
    (d,), _ = chosen(MINI, [given()])  # the general mix: its spread between tasks comes with it
    assert d.spread == default_decoding(resolve_model(MINI), "block", None).spread > 0
    # the published block, not the sampler's 32: 256 steps for 256 tokens in blocks of 8 on GSM8K
    (d,), _ = chosen(LLADA, [given()])
    assert (d, d.published.setting) == (Decoding("mdm", 8, 1.0), "eval-g256-b8")


def test_steps_give_median_answer_over_steps_and_no_published_decoding():
    (d,), _ = chosen(MINI, [given(steps=64)], median_answer=256, task="humaneval-plus")
    assert (d, d.spread, d.published) == (Decoding("block", 32, 256 / 64), 0.0, None)


def test_a_foreign_scheme_that_reads_no_block_gets_none():
    (d,), _ = chosen(MINI, [given("mdm", tpf=2.0)])
    assert d == Decoding("mdm", None, 2.0)


def test_side_by_side_a_foreign_scheme_is_left_out_and_only_foreign_runs_the_models_own():
    assert chosen(MINI, [given("mdm"), given(tpf=3.0)], side_by_side=True) == ([Decoding("block", 32, 3.0)], [])
    (d,), warned = chosen(MINI, [given("mdm"), given("dual-cache")], side_by_side=True, task="humaneval-plus")
    assert (d, d.published.setting) == (Decoding("block", 32, 5.16), "t0.95-b32")
    assert warned == [(DlmcostWarning, f"{MINI} was not published with mdm, dual-cache: it runs its own (block)")]


def test_side_by_side_a_model_listing_none_of_the_given_schemes_names_all_its_own():
    out, warned = chosen(DREAM, [given("block", block=32, tpf=2.0)], side_by_side=True)
    assert [d.scheme for d in out] == ["mdm", "prefix-cache", "dual-cache"]
    assert warned == [(DlmcostWarning, f"{DREAM} was not published with block: it runs its own "
                                       "(mdm, prefix-cache, dual-cache)")]
