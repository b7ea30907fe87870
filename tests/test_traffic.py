"""The inputs of a load: the bounds of each load's settings, the lengths a spec parses to, the
length classes of a sample, and the arrays a replayed trace is normalised to.

Each test pins an edge found by a mutation run (a bound, a branch, a formula no other test reached);
expected values are worked out by hand in the comments.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

from dlmcost.errors import UsageError
from dlmcost.serving import loads, traffic
from dlmcost.serving.loads import BatchJob, ClosedLoop, OpenLoop, TraceReplay
from dlmcost.serving.traffic import LengthDist, Traffic, length_classes, parse_lengths, sample_requests

LENGTHS = LengthDist("fixed", (8.0,))


def refused(match: str, make, *args, **kwargs):
    with pytest.raises(UsageError, match=match):
        make(*args, **kwargs)


# --- the bounds of each load ----------------------------------------------------------------------


def test_closed_loop_bounds():
    assert ClosedLoop(100_000).users == 100_000 and ClosedLoop(1, 1e6).think_s == 1e6
    refused("concurrency must be a whole number of users in 1..100,000", ClosedLoop, 100_001)
    for think in (-1.0, 1e6 + 0.5, 1e300, math.inf, math.nan):  # finite but out of range, and not finite
        refused("^think time must be in 0..1,000,000 seconds, got", ClosedLoop, 1, think)


def test_open_loop_bounds():
    assert OpenLoop(1e7).rate == 1e7 and OpenLoop(1.0, "gamma", 100).cv == 100 and OpenLoop(1e-6).rate == 1e-6
    # 1e308 is not "a positive number" it lacks; 1e-300 put a million arrivals beyond the
    # float's resolution of a pass (latencies of 0, tokens/s per user of inf: exit 3)
    for rate, shown in ((0.0, "0.0"), (1e7 + 0.5, "10000000.5"), (1e308, "1e+308"), (1e-300, "1e-300"),
                        (9.9e-7, "9.9e-07")):
        refused(f"^the request rate must be in 0.000001..10,000,000 requests/s, got {re.escape(shown)}$", OpenLoop, rate)
    refused("--cv: .* must be in \\(0, 100\\], got 100.5", OpenLoop, 1.0, "gamma", 100.5)
    refused("^arrivals: choose one of poisson, constant, gamma, got 'uniform'$", OpenLoop, 1.0, "uniform")


def test_poisson_gaps_are_the_seeded_exponential_draws():
    """Same seed, same plan: the Poisson gaps are numpy's exponential draws at mean 1 / rate."""
    gaps = OpenLoop(4.0).gaps(np.random.default_rng(7), 5)
    assert gaps.tolist() == np.random.default_rng(7).exponential(0.25, 5).tolist()


def test_batch_job_bounds(monkeypatch):
    monkeypatch.setattr(loads, "MAX_REQUESTS", 10)
    assert BatchJob(1, 1).requests == 1 and BatchJob(10, 100_000).parallel == 100_000
    for n in (0, 11):
        refused("^--job: the number of requests must be in 1..10, got", BatchJob, n, 1)
    for p in (0, 100_001):
        refused("^--parallel must be a whole number in 1..100,000, got", BatchJob, 1, p)


# --- a replayed trace -----------------------------------------------------------------------------


def test_a_trace_replay_is_sorted_shifted_to_zero_and_rounded():
    # arrivals 5, 3, 3: sorted (stably) to rows 1, 2, 0 and shifted by 3 s: 0, 0, 2
    r = TraceReplay([5, 3, 3], [10.4, 20.6, 7], [0, 2.6, 3])
    assert r.arrival_s.tolist() == [0.0, 0.0, 2.0] and r.arrival_s.dtype == np.float64
    assert r.prompt_tokens.tolist() == [21.0, 7.0, 10.0]  # rounded
    assert r.answer_tokens.tolist() == [3.0, 3.0, 1.0]  # rounded, at least one token
    assert TraceReplay([2.0], [0], [1]).arrival_s.tolist() == [0.0]  # one request is a trace


def test_a_trace_replay_keeps_the_order_of_requests_that_arrive_together():
    rng = np.random.default_rng(3)
    arrivals = rng.integers(0, 5, 500).astype(float)  # many ties: an unstable sort would mix them
    r = TraceReplay(arrivals, np.arange(500.0), np.ones(500))
    expected = sorted(range(500), key=lambda i: arrivals[i])  # Python's sort is stable
    assert r.prompt_tokens.tolist() == expected


def test_a_bad_trace_replay(monkeypatch):
    refused("^trace: arrival, prompt and answer columns must have the same, non-zero length$",
            TraceReplay, [0.0, 1.0], [1.0], [1.0, 1.0])
    refused("same, non-zero length", TraceReplay, [], [], [])
    for column in range(3):
        for bad in (math.nan, math.inf):
            cols = [[0.0], [1.0], [1.0]]
            cols[column] = [bad]
            refused("^trace: arrival times and token counts must be finite numbers$", TraceReplay, *cols)
    refused("^trace: token counts must be >= 0$", TraceReplay, [0.0], [-1.0], [1.0])
    refused("^trace: token counts must be >= 0$", TraceReplay, [0.0], [1.0], [-1.0])
    monkeypatch.setattr(loads, "MAX_REQUESTS", 3)
    assert len(TraceReplay(np.zeros(3), np.ones(3), np.ones(3)).arrival_s) == 3
    refused("^trace: more than 3 requests; sample it$", TraceReplay, np.zeros(4), np.ones(4), np.ones(4))


# --- lengths --------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [12.5, -1, math.nan, math.inf, "12.5", "p50:-1", {"p50": 1.5}, "p50:1e9"])
def test_a_bad_length_names_the_option(spec):
    refused("^--prompt: ", parse_lengths, spec, "--prompt")


def test_length_edges():
    assert parse_lengths(1_000_000, "x").values == (1_000_000.0,)
    assert parse_lengths(0, "x").values == (0.0,)
    refused("^x: expected a token count, percentiles or a file, got True$", parse_lengths, True, "x")
    refused("^x: expected a token count, percentiles or a file, got list$", parse_lengths, [1], "x")
    refused("^x: '1:2' is not a number$", parse_lengths, "p50:1:2", "x")  # the value is all after the first ':'
    refused("^x: no percentiles given$", parse_lengths, {}, "x")
    for key in ("50", "x50", "pfoo", "p-1", "p100.5"):
        refused(f"^x: percentile keys look like p50 or p99.9, got '{key}'$", parse_lengths, {key: 1}, "x")
    # p0 and p100 are percentiles; so is p0.5; equal values at two percentiles do not decrease
    assert parse_lengths("p0:1,p0.5:2,p100:3", "x").quantiles == (0.0, 0.0, 0.005, 1.0, 1.0)
    assert parse_lengths("p50:100,p90:100", "x").values == (100.0, 100.0, 100.0, 100.0)


def test_an_answer_is_at_least_one_token(tmp_path):
    """A request generates a token at least: an answer length of 0, given as a count, a percentile
    or a file's value, is refused (it was costed as one token without a word); a prompt may be empty."""
    said = "^answer lengths: {}lengths must be whole token counts in 1..1,000,000, got 0$"
    refused(said.format(""), parse_lengths, 0, "answer lengths", 1)
    refused(said.format(""), parse_lengths, "0", "answer lengths", 1)
    refused(said.format(""), parse_lengths, "p10:0,p90:8", "answer lengths", 1)
    f = tmp_path / "answers.txt"
    f.write_text("5\n0\n")
    refused(said.format(f"lengths file {re.escape(str(f))}, value 2: "), parse_lengths, f"@{f}", "answer lengths", 1)
    assert parse_lengths(1, "answer lengths", 1).values == (1.0,)
    assert parse_lengths("p10:1,p90:8", "answer lengths", 1).values[0] == 1.0
    assert parse_lengths(0, "prompt lengths").values == (0.0,)


def test_percentiles_interpolate_between_the_points_and_hold_outside_them():
    d = parse_lengths("p10:10,p50:50,p90:90", "x")
    assert d.kind == "percentiles"
    assert d.quantiles == (0.0, 0.1, 0.5, 0.9, 1.0) and d.values == (10.0, 10.0, 50.0, 90.0, 90.0)
    u = np.random.default_rng(5).random(2000)  # the draws sample() makes from the same seed

    def by_hand(x):  # 10 up to p10; 10 + 100 (x - 0.1) up to p90 (slope 40 / 0.4); 90 above
        return 10.0 if x <= 0.1 else 90.0 if x >= 0.9 else 10.0 + 100.0 * (x - 0.1)

    got = d.sample(np.random.default_rng(5), 2000)
    assert got.tolist() == [float(round(by_hand(x))) for x in u]
    assert got.max() == 90 and (got == 90).sum() == sum(x >= 0.895 for x in u)


def test_a_lengths_file(tmp_path, monkeypatch):
    path = tmp_path / "l.txt"
    path.write_text("3, 4\n5")
    assert parse_lengths(f"@{path}", "x").values == (3.0, 4.0, 5.0)
    assert parse_lengths({"file": str(path)}, "x").kind == "file"
    (tmp_path / "bad.txt").write_text("3 4.5")
    where = f"^--answer: lengths file {tmp_path / 'bad.txt'}, value 2: lengths must be whole token counts"
    refused(where, parse_lengths, f"@{tmp_path / 'bad.txt'}", "--answer")
    refused(where, parse_lengths, {"file": str(tmp_path / "bad.txt")}, "--answer")
    (tmp_path / "empty.txt").write_text(" ,\n")
    refused("^x: lengths file .* holds no numbers$", parse_lengths, f"@{tmp_path / 'empty.txt'}", "x")
    monkeypatch.setattr(traffic, "MAX_FILE_VALUES", 3)
    assert len(parse_lengths(f"@{path}", "x").values) == 3
    path.write_text(",1 ,2\t3\n\n4,")  # four values, however they are separated
    refused("^x: lengths file .* is too large \\(more than 3 values\\)$", parse_lengths, f"@{path}", "x")


def test_a_lengths_file_may_start_with_a_byte_order_mark(tmp_path):
    # as every other file dlmcost reads; it was "value 1: '\ufeff10' is not a number", the mark unseen
    path = tmp_path / "l.txt"
    path.write_bytes(b"\xef\xbb\xbf10 20")
    assert parse_lengths(f"@{path}", "x").values == (10.0, 20.0)


@pytest.mark.parametrize("text, message", [
    # the text is not quoted (the file may be any file a scenario names: a token file's token)
    ("1 2 ten 4", "value 3 is not a number \\(a lengths file holds token counts separated by whitespace or commas\\)"),
    ("1 2 \x1b[2J 4", "value 3 is not a number \\(a lengths file holds token counts separated by whitespace or commas\\)"),
    ("5 nan", "value 2: lengths must be whole token counts in 0..1,000,000, got nan"),
    ("5 1e400", "value 2: lengths must be whole token counts in 0..1,000,000, got 1e400"),
    ("1000001", "value 1: lengths must be whole token counts in 0..1,000,000, got 1000001"),
    ("7 -1", "value 2: lengths must be whole token counts in 0..1,000,000, got -1"),
    # a 5,000-digit count was quoted whole (the line cut only at the terminal's message limit)
    ("1" * 5000, "value 1: lengths must be whole token counts in 0..1,000,000, got 1{40}\\.\\.\\. \\(5,000 characters\\)"),
])
def test_a_bad_value_in_a_lengths_file_is_named_by_its_position(tmp_path, text, message):
    path = tmp_path / "l.txt"
    path.write_text(text)
    refused(f"^x: lengths file .*l.txt, {message}$", parse_lengths, f"@{path}", "x")


def test_a_lengths_file_is_read_only_if_it_is_a_regular_file_within_the_limits(tmp_path, monkeypatch):
    """What the bounded reader refuses, before it opens anything (a FIFO without a writer would
    block an open for reading: this test would then hang until its timeout)."""
    import os

    fifo, zero, folder = tmp_path / "fifo", tmp_path / "zero", tmp_path / "folder"
    os.mkfifo(fifo)
    zero.symlink_to("/dev/zero")
    folder.mkdir()
    refused("^x: lengths file .*fifo is a named pipe \\(FIFO\\), not a regular file$", parse_lengths, f"@{fifo}", "x")
    refused("^x: lengths file .*zero is a character device, not a regular file$", parse_lengths, f"@{zero}", "x")
    refused("^x: lengths file .*folder is a folder, not a regular file$", parse_lengths, f"@{folder}", "x")
    refused("^x: lengths file .*none.txt: does not exist$", parse_lengths, f"@{tmp_path / 'none.txt'}", "x")
    assert traffic.LENGTHS_FILE_BYTES == 16 << 20 and traffic.MAX_FILE_VALUES == 1_000_000  # docs/limits.md
    big = tmp_path / "big.txt"
    big.write_text("1 " * 10)  # 20 bytes
    monkeypatch.setattr(traffic, "LENGTHS_FILE_BYTES", 19)
    refused("^x: lengths file .*big.txt is 20 bytes; the limit is 0 KiB$", parse_lengths, f"@{big}", "x")


# --- traffic and its sample -----------------------------------------------------------------------


def test_traffic_bounds():
    assert Traffic(LENGTHS, LENGTHS, rate=1e7).rate == 1e7
    assert Traffic(LENGTHS, LENGTHS, users=1).users == 1 and Traffic(LENGTHS, LENGTHS, users=10_000_000).closed_loop
    assert Traffic(LENGTHS, LENGTHS, users=1, think_s=1e6).think_s == 1e6
    # an open loop sends at its rate: a think time beside it would be ignored without a word
    refused("^traffic: a think time goes with concurrent users", Traffic, LENGTHS, LENGTHS, rate=1.0, think_s=2.0)
    refused("^traffic: give a request rate .* not both$", Traffic, LENGTHS, LENGTHS, rate=1.0, users=1)
    for rate in (0.0, -1.0, 1e7 + 0.5, 1e308, 1e-300):
        refused("^traffic: the request rate must be in 0.000001..10,000,000 requests/s, got", Traffic, LENGTHS, LENGTHS,
                rate=rate)
    for users in (0, 10_000_001):
        refused("^traffic: users must be a whole number in 1..10,000,000", Traffic, LENGTHS, LENGTHS, users=users)
    for think in (-1.0, 1e6 + 0.5, 1e300):
        refused("^traffic: think time must be in 0..1,000,000 seconds", Traffic, LENGTHS, LENGTHS, rate=1.0,
                think_s=think)


def test_an_answer_has_at_least_one_token():
    for n in (0, 1):
        t = Traffic(LENGTHS, LengthDist("fixed", (float(n),)), rate=1.0)
        assert sample_requests(t, 4, 0).answer_values.tolist() == [1.0]


def test_length_classes_by_hand():
    # 1..7: the tertile edges of numpy's linear quantile are 3 and 5; a value at an edge goes up
    # (side="right"): {1, 2}, {3, 4}, {5, 6, 7}, each shown by its mean rounded up: 2, 4, 6
    s = length_classes([1, 2, 3, 4, 5, 6, 7], [9] * 7)
    assert s.prompt_values.tolist() == [2.0, 4.0, 6.0] and s.prompt_class.tolist() == [0, 0, 1, 1, 2, 2, 2]
    assert s.answer_values.tolist() == [9.0] and s.answer_class.tolist() == [0] * 7
    assert s.class_share.tolist() == pytest.approx([2 / 7, 2 / 7, 3 / 7])
    assert s.unit_gaps.tolist() == [0.0] * 7  # no gaps given: none


def test_three_distinct_lengths_are_three_classes_and_an_empty_bin_is_no_class():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning about the mean of an empty bin
        # three values: a class each, however lopsided their counts
        s = length_classes([1, 1, 1, 1, 2, 3], [4, 4, 4, 4, 4, 5])
        assert s.prompt_values.tolist() == [1.0, 2.0, 3.0] and s.answer_values.tolist() == [4.0, 5.0]
        # shares of (prompt, answer) flattened as prompt * 2 + answer: (1,4) x4, (2,4), (3,5)
        assert s.class_share.tolist() == pytest.approx([4 / 6, 0, 1 / 6, 0, 0, 1 / 6])
        # 1, 1, 1, 1, 1, 2, 3, 9: the tertile edges are 1 and 1.67, so the first bin (below 1) is empty
        # and the rest fall in {1 x5} and {2, 3, 9} (mean 4.67, rounded up: 5)
        # a share for every (prompt, answer) pair, the last one too when no request has it
        assert length_classes([1, 2], [2, 1]).class_share.tolist() == [0.0, 0.5, 0.5, 0.0]
        s = length_classes([1, 1, 1, 1, 1, 2, 3, 9], [1] * 8)
        assert s.prompt_values.tolist() == [1.0, 5.0] and s.prompt_class.tolist() == [0] * 5 + [1] * 3


@pytest.mark.parametrize("spec, key", [
    ("p50:5,p50:6", "p50"),  # the last one was read without a word
    ("p50:5,P50:6", "P50"),
    ("p50:5,p50.0:6", "p50.0"),
    ({"p50": 5, "p50.0": 6}, "p50.0"),  # a scenario's mapping: two keys, one percentile
])
def test_a_percentile_given_twice_is_refused(spec, key):
    refused(f"^x: percentile '{re.escape(key)}' is given twice$", parse_lengths, spec, "x")


@pytest.mark.parametrize("path, shown_as", [("5", "5"), ("null", "None"), ("[a.txt]", "['a.txt']"), ("true", "True")])
def test_a_lengths_file_path_that_is_not_a_string_is_refused(run, tmp_path, path, shown_as):
    """`{file: 5}` in a scenario was read as the file named "5" (and said it did not exist)."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"traffic: {{rate: 1, prompt: {{file: {path}}}}}\n")
    rc, out, err = run("plan", "--scenario", scenario)
    assert (rc, out) == (2, "")
    assert err == f"error: prompt lengths: 'file' takes a path (a string), got {shown_as}\n"
