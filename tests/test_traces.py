"""Request traces: the three formats, time scale, sampling, the canvas an answer takes, and every
way a trace file can be wrong (one `TraceError` line naming the row and the column).

Expected numbers are worked out by hand in the comments, or by a brute-force loop over the rows.
"""

from __future__ import annotations

import csv
import importlib.util
import math
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from dlmcost import errors
from dlmcost.engine.schemes import REGISTRY
from dlmcost.errors import TraceError, UsageError, WorkloadError
from dlmcost.inputs import files
from dlmcost.serving import traces
from dlmcost.serving.traces import Decodes, canvas_for, read_trace

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "traces"


def write(tmp_path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", errors.DlmcostWarning)
        return read_trace(*args, **kwargs)


def fails(path, match: str, **kwargs) -> str:
    with pytest.raises(TraceError) as info:
        quietly(path, **kwargs)
    message = info.value.message
    assert match in message, message
    assert "\n" not in message and "\x1b" not in message
    return message


AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,4808,10
2023-11-16 18:15:46.6805901,3180,8
2023-11-16 18:15:47.0000000,110,27
2023-11-16 18:16:00.5,7433,14
2023-11-17 00:00:00,34,1
"""


# --- the formats ---------------------------------------------------------------------------------


def test_azure_arrival_times_by_hand(tmp_path):
    t = read_trace(write(tmp_path, "a.csv", AZURE))
    # 18:15:46.6805900 is the origin; .6805901 is 100 ns later; 47.0 is 0.3194100 s later;
    # 18:16:00.5 is 13.81941 s; midnight is 86400 - (18*3600 + 15*60 + 46.68059) = 20653.31941 s
    expected = [0.0, 1e-7, 0.31941, 13.81941, 20653.31941]
    assert t.arrival_s.tolist() == pytest.approx(expected, abs=1e-9)
    assert t.prompt_tokens.tolist() == [4808, 3180, 110, 7433, 34]
    assert t.answer_tokens.tolist() == [10, 8, 27, 14, 1]
    assert t.arrival_s.dtype == np.float64 and t.prompt_tokens.dtype == t.answer_tokens.dtype == np.int64
    assert (t.fmt, t.rows_read, t.rows_skipped, t.rows_kept, t.rows_reordered) == ("azure", 5, 0, 5, 0)
    assert t.notes == () and t.span_s == pytest.approx(20653.31941)
    assert t.source == str(tmp_path / "a.csv")


def test_azure_time_zones_and_short_fractions(tmp_path):
    text = ("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009+00:00,1,1\n"
            "2024-05-10T02:00:01Z,1,1\n2024-05-10 03:00:02.5+02:00,1,1\n")
    with pytest.warns(errors.DlmcostWarning, match="1 row arrived before the row above;"):
        t = read_trace(write(tmp_path, "a.csv", text))
    # 0.009 s; 2 h + 1 s = 7201 s; 03:00:02.5 at +02:00 is 01:00:02.5 UTC = 3602.5 s
    # (earlier than the row above: sorted) -> 0, 3602.5 - 0.009, 7201 - 0.009
    assert t.arrival_s.tolist() == pytest.approx([0.0, 3602.491, 7200.991], abs=1e-9)
    assert t.rows_reordered == 1


def test_the_multimodal_azure_trace_ignores_its_image_count(tmp_path):
    text = "TIMESTAMP,NumImages,ContextTokens,GeneratedTokens\n2025-01-01 00:00:00,2,900,12\n2025-01-01 00:00:03,0,50,3\n"
    t = read_trace(write(tmp_path, "mm.csv", text))
    assert t.fmt == "azure" and t.prompt_tokens.tolist() == [900, 50] and t.arrival_s.tolist() == [0.0, 3.0]


def test_mooncake_milliseconds_and_ignored_fields(tmp_path):
    lines = ['{"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2]}',
             '{"timestamp": 27, "input_length": 7319, "output_length": 490, "hash_ids": [[["deep"]]]}',
             "",
             '{"timestamp": 27.5, "input_length": 7234, "output_length": 794, "other": null}',
             '{"timestamp": 1000, "input_length": 2287, "output_length": 316}',
             '{"hash_ids": [], "output_length": 3, "timestamp": 61234, "input_length": 9013}']
    # row 2's hash_ids are not block ids: the trace is replayed without any, and says why (serve warns)
    t = read_trace(write(tmp_path, "m.jsonl", "\n".join(lines) + "\n"))
    assert t.cached_tokens is None and "row 2, column hash_ids" in t.hash_ids_unread
    assert t.fmt == "mooncake"
    assert t.arrival_s.tolist() == pytest.approx([0.0, 0.027, 0.0275, 1.0, 61.234])
    assert t.prompt_tokens.tolist() == [6755, 7319, 7234, 2287, 9013]
    assert t.answer_tokens.tolist() == [500, 490, 794, 316, 3]
    assert t.rows_read == 5


BURST = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,0,472,Conversation log
45,ChatGPT,1087,9,1096,Conversation log
45,GPT-4,417,373,790,API log
118,ChatGPT,1360,0,1360,Conversation log
120.5,ChatGPT,34,286,320,Conversation log
"""


def test_burstgpt_skips_failed_requests_and_counts_them(tmp_path):
    path = write(tmp_path, "b.csv", BURST)
    with pytest.warns(errors.DlmcostWarning, match="skipped 2 of 5 rows with 0 Response tokens"):
        t = read_trace(path)
    # the first row failed: time runs from the second (45 s): 0, 0, 75.5
    assert t.arrival_s.tolist() == [0.0, 0.0, 75.5]
    assert t.prompt_tokens.tolist() == [1087, 417, 34] and t.answer_tokens.tolist() == [9, 373, 286]
    assert (t.fmt, t.rows_read, t.rows_skipped, t.rows_kept) == ("burstgpt", 5, 2, 3)
    assert t.notes == (f"{path}: skipped 2 of 5 rows with 0 Response tokens (failed requests)",)
    assert t.describe() == f"{path}: BurstGPT trace (CSV), 3 requests of 5 rows over 75.5 s"


def test_burstgpt_with_session_columns_and_whitespace_in_the_header(tmp_path):
    text = " Timestamp , Session ID,Elapsed time,Model, Request tokens ,Response tokens,Total tokens,Log Type\r\n" \
           "1,s1,0.5,ChatGPT,10,20,30,Conversation log\r\n\r\n3,s1,0.7,ChatGPT,11,21,32,Conversation log\r\n"
    t = read_trace(write(tmp_path, "b.csv", text))
    assert t.fmt == "burstgpt" and t.arrival_s.tolist() == [0.0, 2.0] and t.answer_tokens.tolist() == [20, 21]


def test_zero_answers_are_skipped_in_every_format(tmp_path):
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,10,0\n2023-11-16 18:15:50,10,5\n"
    with pytest.warns(errors.DlmcostWarning, match=r"0 GeneratedTokens \(nothing to decode\)"):
        t = read_trace(write(tmp_path, "a.csv", text))
    assert t.rows_skipped == 1 and t.arrival_s.tolist() == [0.0]


def test_a_byte_order_mark_is_allowed(tmp_path):
    t = read_trace(write(tmp_path, "a.csv", b"\xef\xbb\xbf" + AZURE.encode()))
    assert t.fmt == "azure" and t.rows_read == 5


def test_detection_and_an_explicit_format(tmp_path):
    azure = write(tmp_path, "a.csv", AZURE)
    assert read_trace(azure, fmt="azure").fmt == "azure"
    fails(azure, "no column Request tokens in its header", fmt="burstgpt")
    fails(azure, "not valid JSON", fmt="mooncake")
    with pytest.raises(UsageError, match="not one of azure, mooncake, burstgpt"):
        read_trace(azure, fmt="sharegpt")
    unknown = write(tmp_path, "u.csv", "time,prompt,answer\n1,2,3\n")
    fails(unknown, "not a trace format dlmcost reads; its first line is 'time,prompt,answer'")


def test_timestamps_going_backwards_are_sorted_and_counted(tmp_path):
    rows = [(0, 1), (10, 2), (5, 3), (20, 4), (15, 5), (15, 6)]  # (s, prompt) ; 10->5 and 20->15 go back
    text = "Timestamp,Request tokens,Response tokens\n" + "".join(f"{s},{p},7\n" for s, p in rows)
    with pytest.warns(errors.DlmcostWarning, match="2 rows arrived before the row above;"):
        t = read_trace(write(tmp_path, "b.csv", text))
    assert t.rows_reordered == 2
    assert t.arrival_s.tolist() == [0, 5, 10, 15, 15, 20]
    assert t.prompt_tokens.tolist() == [1, 3, 2, 5, 6, 4]  # ties keep their order (stable)


def test_sorting_keeps_ties_in_file_order(tmp_path):
    rows = [((i * 37) % 11, i + 1) for i in range(300)]  # (s, prompt): many ties, many steps back
    text = "Timestamp,Request tokens,Response tokens\n" + "".join(f"{s},{p},7\n" for s, p in rows)
    t = quietly(write(tmp_path, "b.csv", text))
    expected = sorted(rows, key=lambda r: r[0])  # Python's sort is stable
    assert t.prompt_tokens.tolist() == [p for _, p in expected]
    assert t.rows_reordered == sum(rows[i][0] < rows[i - 1][0] for i in range(1, len(rows)))


# --- time scale and sampling ---------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.5, 2, 3.25])
def test_time_scale_multiplies_every_gap(tmp_path, scale):
    t = read_trace(write(tmp_path, "a.csv", AZURE), time_scale=scale)
    gaps = [1e-7, 0.31941 - 1e-7, 13.81941 - 0.31941, 20653.31941 - 13.81941]
    assert np.diff(t.arrival_s).tolist() == pytest.approx([g * scale for g in gaps], abs=1e-9)


@pytest.mark.parametrize("scale", [0, -1, float("nan"), float("inf"), True, "2"])
def test_a_bad_time_scale_is_a_usage_error(tmp_path, scale):
    with pytest.raises(UsageError, match="time scale"):
        read_trace(write(tmp_path, "a.csv", AZURE), time_scale=scale)


def ten_rows(tmp_path) -> Path:
    # arrivals 0, 1, 4, 9, ... (i*i s), prompt tokens 100+i name each row
    return write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens\n" +
                 "".join(f"{i * i},{100 + i},5\n" for i in range(10)))


@pytest.mark.parametrize("sample, kept", [(0.5, 5), (0.25, 3), (0.01, 1), (1.0, 10), (3, 3), (10, 10)])
def test_sampling_keeps_a_subset_in_order(tmp_path, sample, kept):
    t = read_trace(ten_rows(tmp_path), sample=sample, seed=7)
    # 0.25 x 10 = 2.5 rounds half up to 3; 0.01 x 10 rounds to 0, at least 1 is kept
    assert t.rows_kept == len(t.arrival_s) == kept and t.rows_read == 10
    rows = (t.prompt_tokens - 100).tolist()
    assert rows == sorted(set(rows)) and all(0 <= r < 10 for r in rows)
    # each kept row's arrival, from the first kept row: brute force over the rows' own i*i
    assert t.arrival_s.tolist() == [r * r - rows[0] * rows[0] for r in rows]


def test_sampling_is_deterministic_and_depends_on_the_seed(tmp_path):
    path = ten_rows(tmp_path)
    draws = {tuple(read_trace(path, sample=4, seed=s).prompt_tokens.tolist()) for s in range(6)}
    assert len(draws) > 1
    assert read_trace(path, sample=4, seed=3).prompt_tokens.tolist() == read_trace(path, sample=4, seed=3).prompt_tokens.tolist()
    expected = np.sort(np.random.default_rng(3).choice(10, size=4, replace=False)) + 100  # numpy's Generator(3)
    assert read_trace(path, sample=4, seed=3).prompt_tokens.tolist() == expected.tolist()


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_a_bad_seed_is_a_usage_error(tmp_path, seed):
    with pytest.raises(UsageError, match="seed must be a whole number"):
        read_trace(ten_rows(tmp_path), sample=3, seed=seed)


@pytest.mark.parametrize("sample", [0, -2, 0.0, 1.5, float("nan"), True, "0.5", 11])
def test_a_bad_sample_is_a_usage_error(tmp_path, sample):
    with pytest.raises(UsageError, match="sample|asked for 11 requests; it has 10"):
        read_trace(ten_rows(tmp_path), sample=sample)


# --- bad values: one line naming the row and the column --------------------------------------------


@pytest.mark.parametrize("value, problem", [
    ("abc", "'abc' is not a whole number"),
    ("-3", "'-3' is negative"),
    ("1.5", "'1.5' is not a whole number"),
    ("nan", "'nan' is not a finite number"),
    ("-inf", "'-inf' is not a finite number"),
    ("1e400", "'1e400' is not a finite number"),
    ("1_000", "'1_000' is not a whole number"),
    ("", "'' is not a whole number"),
    ("1000001", "'1000001' is over the limit of 1,000,000 tokens"),
    ("9" * 50, "is not a whole number"),
])
def test_a_bad_token_count_names_the_row_and_column(tmp_path, value, problem):
    text = AZURE.replace("110,27", f"{value},27")  # the third data row: row 4 of the file
    path = write(tmp_path, "trace.csv", text)
    assert fails(path, problem).startswith(f"trace {path} row 4, column ContextTokens: ")


def test_whole_numbers_written_as_decimals_are_accepted(tmp_path):
    t = read_trace(write(tmp_path, "a.csv", AZURE.replace("110,27", " 110.0 ,2.7e1")))
    assert t.prompt_tokens[2] == 110 and t.answer_tokens[2] == 27


@pytest.mark.parametrize("stamp, problem", [
    ("2023-11-16", "is not a date and time"),
    ("2023-02-30 10:00:00", "is not a date"),
    ("2023-11-16 25:00:00", "is not a time of day"),
    ("2023-11-16 18:15:46.1234567890", "is not a date and time"),
    ("yesterday", "'yesterday' is not a date and time"),
])
def test_a_bad_timestamp(tmp_path, stamp, problem):
    path = write(tmp_path, "a.csv", AZURE.replace("2023-11-16 18:16:00.5", stamp))
    assert fails(path, problem).startswith(f"trace {path} row 5, column TIMESTAMP: ")


@pytest.mark.parametrize("value, problem", [("-5", "'-5' is negative"), ("inf", "is not a finite number"),
                                            ("5s", "'5s' is not a number")])
def test_a_bad_burstgpt_timestamp(tmp_path, value, problem):
    path = write(tmp_path, "b.csv", BURST.replace("118,", f"{value},"))
    assert fails(path, problem).startswith(f"trace {path} row 5, column Timestamp: ")


def test_control_characters_in_a_value_are_escaped(tmp_path):
    path = write(tmp_path, "a.csv", AZURE.replace("110,27", "\x1b]0;pwned\x07,27"))
    assert "'\\x1b]0;pwned\\x07' is not a whole number" in fails(path, "row 4, column ContextTokens")


def test_control_characters_in_the_file_name_are_escaped(tmp_path):
    path = write(tmp_path, "bad\x1b[2J.csv", "")
    message = fails(path, "is empty")
    assert "bad\\x1b[2J.csv" in message
    assert read_trace(write(tmp_path, "ok\x1b.csv", AZURE)).source.endswith("ok\\x1b.csv")


def test_a_short_row_names_the_missing_column(tmp_path):
    path = write(tmp_path, "a.csv", AZURE.replace("110,27", "110"))
    fails(path, "row 4: no value for column GeneratedTokens (2 fields, the header has 3)")


def test_a_missing_column(tmp_path):
    fails(write(tmp_path, "a.csv", "TIMESTAMP,ContextTokens,Generated\n"), "not a trace format")
    fails(write(tmp_path, "a.csv", "Stamp,ContextTokens,GeneratedTokens\n"), "no column TIMESTAMP in its header")


@pytest.mark.parametrize("header, problem", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens,GeneratedTokens", "column GeneratedTokens appears twice in its header "
                                                                "(fields 3 and 4)"),
    # names are matched without case or surrounding spaces, so these are one column too
    ("timestamp,ContextTokens, TIMESTAMP ,GeneratedTokens", "column TIMESTAMP appears twice in its header (fields 1 and 3)"),
    ("Timestamp,Request tokens,Response tokens,Model,response TOKENS", "column Response tokens appears twice in its "
                                                                       "header (fields 3 and 5)"),
])
def test_a_column_named_twice(tmp_path, header, problem):
    # the first was read without a word, whichever one held the numbers
    path = write(tmp_path, "a.csv", f"{header}\n")
    assert fails(path, problem) == f"trace {path}: {problem}"


def test_a_column_ignored_may_be_named_twice(tmp_path):
    text = "Timestamp,Model,Request tokens,Response tokens,Model\n1,a,10,20,b\n"
    assert read_trace(write(tmp_path, "b.csv", text)).answer_tokens.tolist() == [20]


def test_empty_files_and_files_without_requests(tmp_path):
    fails(write(tmp_path, "e.csv", ""), "is empty")
    fails(write(tmp_path, "e.csv", "\n  \n\n"), "is empty")
    fails(write(tmp_path, "h.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n\n"), "holds no requests (only a header)")
    fails(write(tmp_path, "f.csv", "Timestamp,Request tokens,Response tokens\n1,5,0\n2,5,0\n"),
          "every row has 0 Response tokens (failed requests)")


@pytest.mark.parametrize("line, problem", [
    ("[1, 2]", "row 2 is a JSON array, not an object"),
    ('"text"', "row 2 is a JSON string, not an object"),
    ("5", "row 2 is a JSON number, not an object"),
    ("null", "row 2 is a JSON null, not an object"),
    ('{"timestamp": 1, "input_length": 5', "row 2 is not valid JSON"),
    ('{"timestamp": 1, "input_length": 5}', "row 2: no field output_length"),
    ('{"timestamp": 1, "input_length": true, "output_length": 1}', "row 2, column input_length: a boolean, not a number"),
    ('{"timestamp": "1", "input_length": 5, "output_length": 1}', "row 2, column timestamp: a string, not a number"),
    ('{"timestamp": 1, "input_length": {}, "output_length": 1}', "row 2, column input_length: a object"),
    ('{"timestamp": NaN, "input_length": 5, "output_length": 1}', "column timestamp: 'nan' is not a finite number"),
    ('{"timestamp": 1, "input_length": 5.5, "output_length": 1}', "column input_length: '5.5' is not a whole number"),
    ('{"timestamp": -1, "input_length": 5, "output_length": 1}', "column timestamp: '-1' is negative"),
    ('{"timestamp": 1, "input_length": 1' + "0" * 30 + ', "output_length": 1}', "input_length: '1" + "0" * 30 + "' is too large"),
    ('{"timestamp": 1, "input_length": 1' + "0" * 5000 + ', "output_length": 1}', "more than 4,300 digits"),
    ('{"timestamp": 1, "hash_ids": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    # a field written twice: json keeps the last without a word (4000 tokens read, not 1)
    ('{"timestamp": 1, "input_length": 5, "output_length": 1, "output_length": 4000}',
     "row 2: field 'output_length' appears twice"),
    ('{"timestamp": 1, "input_length": 5, "output_length": 1, "hash_ids": [], "other": {"a": 1, "a": 2}}',
     "row 2: field 'a' appears twice"),
])
def test_bad_mooncake_lines(tmp_path, line, problem):
    path = write(tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 5, "output_length": 1}\n' + line + "\n")
    assert fails(path, problem).startswith(f"trace {path} row 2")


def test_a_huge_csv_field(tmp_path):
    path = write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens,Model\n1,2,3,\"" + "x" * 200_000 + "\"\n")
    fails(path, "row 2: field larger than field limit")


@pytest.mark.parametrize("fmt", [None, "azure", "burstgpt"])
def test_a_first_line_of_deep_json_or_a_huge_field(tmp_path, fmt):
    """A first line of 10^5 nested JSON arrays and objects (600,000 characters) is neither a
    Mooncake object nor a CSV header: not a format (detected), or one field too large for the
    csv module (a CSV format asked for), never the csv module's own error escaping."""
    path = write(tmp_path, "deep.jsonl", '[{"a":' * 100_000 + "\n")
    problem = "row 1: field larger than field limit (131072)" if fmt else "not a trace format dlmcost reads"
    fails(path, problem, fmt=fmt)


def test_a_line_over_the_line_limit(tmp_path):
    path = write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens,Model\n1,2,3," + "x" * (2 << 20) + "\n")
    fails(path, "row 2 is longer than 1,048,576 bytes")


def test_a_binary_file(tmp_path):
    fails(write(tmp_path, "z.csv", b"\x00" * 4096), "row 1 holds a NUL byte: a binary file, not a trace")
    fails(write(tmp_path, "png.csv", b"\x89PNG\r\n\x1a\n\x00\x00"), "row 1 is not UTF-8 text")
    fails(write(tmp_path, "late.csv", AZURE.encode() + b"\xff\xfe,1,1\n"), "row 7 is not UTF-8 text (byte 1 of the row")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_refused_without_waiting(tmp_path):
    fifo = tmp_path / "t.csv"
    os.mkfifo(fifo)
    fails(fifo, "is a named pipe (FIFO), not a regular file")


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_dev_zero_behind_a_link_and_a_folder_are_refused(tmp_path):
    link = tmp_path / "zero.csv"
    link.symlink_to("/dev/zero")
    fails(link, "is a character device, not a regular file")
    fails(tmp_path, "is a folder, not a regular file")
    fails(tmp_path / "missing.csv", "does not exist")


def test_the_byte_limit(tmp_path, monkeypatch):
    path = write(tmp_path, "a.csv", AZURE)
    monkeypatch.setattr(files, "TRACE_LIMIT", len(AZURE) - 1)
    fails(path, f"is {len(AZURE)} bytes; the limit is")
    monkeypatch.setattr(files, "TRACE_LIMIT", len(AZURE))
    assert read_trace(path).rows_read == 5


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_bounded_stream_stops_a_file_larger_than_its_stat():
    with files.open_bounded("/proc/self/status", limit=16, error=TraceError, what="trace") as stream:
        with pytest.raises(TraceError, match="over the limit of 0 KiB"):
            stream.read()


def test_the_row_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 4)
    path = write(tmp_path, "a.csv", AZURE)  # a header and 5 rows
    fails(path, "has more than 4 rows; cut it")
    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 5)
    assert read_trace(path).rows_read == 5
    jsonl = write(tmp_path, "m.jsonl", '{"timestamp": 0, "input_length": 1, "output_length": 1}\n' * 6)
    fails(jsonl, "has more than 5 rows")  # no header: the sixth line is the sixth row
    monkeypatch.setattr(traces, "MAX_TRACE_ROWS", 6)
    assert read_trace(jsonl).rows_read == 6


def test_the_span_limit(tmp_path):
    path = write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens\n0,1,1\n2e9,1,1\n")
    fails(path, "spans 2e+09 s from its first request to its last (after the time scale); at most 1e+09 s")
    assert read_trace(path, time_scale=0.25).span_s == 5e8


def test_trace_error_has_its_own_documented_exit_code():
    codes = {c.exit_code for c in errors.DlmcostError.__subclasses__() if c is not TraceError}
    assert TraceError.exit_code == 16 and 16 not in codes
    assert "| 16 |" in (ROOT / "README.md").read_text()


# --- from an answer to the canvas ----------------------------------------------------------------


ANSWERS = [0, 1, 31, 32, 33, 100]


def test_block_diffusion_decodes_whole_blocks():
    c = canvas_for(ANSWERS, 32)
    # ceil(a/32): 0, 1, 1, 1, 2, 4 blocks of 32
    assert c.blocks.tolist() == [0, 1, 1, 1, 2, 4]
    assert c.decoded.tolist() == [0, 32, 32, 32, 64, 128]
    assert c.useful.tolist() == ANSWERS and c.truncated == 0


def test_block_diffusion_within_a_generation_length():
    c = canvas_for(ANSWERS, 32, gen=64)
    assert c.useful.tolist() == [0, 1, 31, 32, 33, 64]  # 100 is cut to 64
    assert c.blocks.tolist() == [0, 1, 1, 1, 2, 2]
    assert c.decoded.tolist() == [0, 32, 32, 32, 64, 64]
    assert c.truncated == 1


def test_a_fixed_canvas_decodes_all_of_it():
    c = canvas_for(ANSWERS, 32, gen=64, decodes=Decodes.CANVAS)
    assert c.decoded.tolist() == [64] * 6 and c.blocks.tolist() == [2] * 6
    assert c.useful.tolist() == [0, 1, 31, 32, 33, 64] and c.truncated == 1
    with pytest.raises(UsageError, match="^canvas: a scheme that runs its whole canvas needs the generation length$"):
        canvas_for(ANSWERS, 32, decodes=Decodes.CANVAS)
    with pytest.raises(WorkloadError, match="does not divide the generation length 100"):
        canvas_for(ANSWERS, 32, gen=100, decodes=Decodes.CANVAS)


def test_token_by_token_decodes_the_answer():
    c = canvas_for(ANSWERS, 32, gen=64, decodes=Decodes.TOKENS)
    assert c.decoded.tolist() == c.useful.tolist() == c.blocks.tolist() == [0, 1, 31, 32, 33, 64]


@pytest.mark.parametrize("block, gen", [(0, None), (-4, None), (2.5, None), (True, None), (4, 0)])
def test_bad_canvas_settings(block, gen):
    with pytest.raises(UsageError):
        canvas_for([1, 2], block, gen)
    with pytest.raises(UsageError, match="^canvas: answer lengths cannot be negative$"):
        canvas_for([-1], 4)
    with pytest.raises(UsageError, match="^canvas: answer lengths must be whole numbers$"):
        canvas_for([2.5], 4)
    with pytest.raises(UsageError, match="whole numbers"):
        canvas_for(["3"], 4)
    assert canvas_for(np.array([3.0]), 4).decoded.tolist() == [4]
    with pytest.raises(UsageError, match="a Decodes"):
        canvas_for([1], 4, 8, decodes="never")


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_the_mapping_agrees_with_every_scheme_in_the_registry(name):
    scheme = REGISTRY[name]
    block, gen = 8, 64
    c = canvas_for(range(0, 80), block, gen, decodes=Decodes(scheme.stops))
    for a in range(0, 80):  # brute force: the positions the scheme's own rule computes
        answer = min(a, gen)
        if scheme.stops == "token":
            want = answer
        elif scheme.stops == "block":
            want = next(n for n in range(0, gen + block, block) if n >= answer)
        else:
            want = gen
        assert c.decoded[a] == want == float(np.ravel(scheme.tokens_run(np.array([answer]), gen, block))[0]), (name, a)
        assert c.useful[a] == answer


# --- the example traces --------------------------------------------------------------------------


def _script():
    spec = importlib.util.spec_from_file_location("make_traces", ROOT / "scripts" / "make_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_example_traces_are_what_the_script_writes():
    texts = _script().generate()
    assert sorted(texts) == sorted(p.name for p in EXAMPLES.iterdir())
    for name, text in texts.items():
        assert (EXAMPLES / name).read_text(encoding="utf-8") == text, f"run python scripts/make_traces.py ({name})"


@pytest.mark.parametrize("name, fmt", [("azure-conv.csv", "azure"), ("mooncake.jsonl", "mooncake"),
                                       ("burstgpt.csv", "burstgpt")])
def test_the_example_traces_read_back(name, fmt):
    path = EXAMPLES / name
    t = quietly(path)
    assert t.fmt == fmt and t.rows_read == 300 and t.rows_reordered == 0
    if fmt == "burstgpt":  # the failed requests, counted with the csv module
        failed = sum(row["Response tokens"] == "0" for row in csv.DictReader(path.open()))
        assert failed > 0 and t.rows_skipped == failed and t.rows_kept == 300 - failed
    gaps = np.diff(t.arrival_s)
    assert gaps.min() >= 0 and gaps.std() / gaps.mean() > 2  # bursty: a Poisson process has CV 1
    assert 30 < np.median(t.answer_tokens) < 1000 and np.median(t.prompt_tokens) > 100
    assert math.isclose(t.arrival_s[0], 0.0)


# --- edges found by a mutation run (each pins a bound or a branch no other test reached) ----------


def test_azure_times_across_a_new_year_a_leap_day_and_utc_offsets_by_hand(tmp_path):
    rows = ["2023-12-31 23:59:59Z",        # the origin
            "2024-01-01 00:00:00",         # 1 s later, in the next year
            "2024-01-01 05:30:02+05:30",   # 00:00:02 UTC: 3 s
            "2023-12-31 20:30:03-03:30",   # 00:00:03 UTC the next day: 4 s
            "2024-02-28 23:00:00",         # 31 + 27 days and 23 h from 1 Jan: 58 * 86400 + 82800 + 1
            "2024-03-01 00:00:00"]         # 2024 is a leap year: 29 Feb lies between, 60 days after 1 Jan
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{r},1,1\n" for r in rows)
    t = read_trace(write(tmp_path, "a.csv", text))
    assert t.arrival_s.tolist() == pytest.approx([0, 1, 3, 4, 58 * 86400 + 82800 + 1, 60 * 86400 + 1], abs=1e-9)


@pytest.mark.parametrize("stamp, problem", [("2023-01-01 23:59:59", None), ("2023-01-01 23:00:00", None),
                                            ("2023-01-01 24:00:00", "is not a time of day"),
                                            ("2023-01-01 00:60:00", "is not a time of day"),
                                            ("2023-01-01 00:00:60", "is not a time of day"),
                                            ("2023-02-29 00:00:00", "is not a date"),
                                            ("2023-13-01 00:00:00", "is not a date"),
                                            ("2023-00-10 00:00:00", "is not a date"),
                                            ("2023-01-00 00:00:00", "is not a date"),
                                            ("0000-01-01 00:00:00", "is not a date"),
                                            # a UTC offset is under 24 hours, its minutes under 60
                                            ("2023-01-01 00:00:00+23:59", None),
                                            ("2023-01-01 00:00:00-23:59", None),
                                            ("2023-01-01 00:00:00+99:99", "has no such UTC offset (-23:59 to +23:59)"),
                                            ("2023-01-01 00:00:00+24:00", "has no such UTC offset (-23:59 to +23:59)"),
                                            ("2023-01-01 00:00:00-24:00", "has no such UTC offset (-23:59 to +23:59)"),
                                            ("2023-01-01 00:00:00+00:60", "has no such UTC offset (-23:59 to +23:59)"),
                                            ("2023-01-01 00:00:00+0075", "has no such UTC offset (-23:59 to +23:59)")])
def test_the_edges_of_a_date_and_a_time_of_day(tmp_path, stamp, problem):
    path = write(tmp_path, "a.csv", f"TIMESTAMP,ContextTokens,GeneratedTokens\n{stamp},1,1\n")
    if problem is None:
        assert read_trace(path).rows_kept == 1
    else:
        assert fails(path, problem).endswith(f"column TIMESTAMP: '{stamp}' {problem}")


def test_the_largest_utc_offsets_by_hand(tmp_path):
    rows = ["2024-01-01 00:00:00Z",        # the origin
            "2024-01-02 00:00:00+23:59",   # 2024-01-02 00:00 - 23:59 = 2024-01-01 00:01 UTC: 60 s
            "2023-12-31 00:02:00-23:59"]   # 2023-12-31 00:02 + 23:59 = 2024-01-01 00:01 UTC: 60 s
    text = "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{r},1,1\n" for r in rows)
    assert read_trace(write(tmp_path, "a.csv", text)).arrival_s.tolist() == [0.0, 60.0, 60.0]


def test_rows_that_are_blank_or_hold_only_spaces_are_skipped_and_a_lone_value_is_not(tmp_path):
    text = AZURE.replace("\n2023-11-16 18:15:47", "\n   \n\n\t\n2023-11-16 18:15:47")
    t = read_trace(write(tmp_path, "a.csv", text))
    assert t.rows_read == 5 and t.prompt_tokens.tolist() == [4808, 3180, 110, 7433, 34]
    path = write(tmp_path, "b.csv", AZURE.replace("2023-11-16 18:15:47.0000000,110,27", "5"))
    fails(path, "row 4: no value for column ContextTokens (1 fields, the header has 3)")


def test_an_answer_column_error_names_its_row_and_column(tmp_path):
    path = write(tmp_path, "a.csv", AZURE.replace("110,27", "110,2x"))
    assert fails(path, "'2x' is not a whole number").startswith(f"trace {path} row 4, column GeneratedTokens: ")


def test_format_detection_needs_both_length_columns(tmp_path):
    fails(write(tmp_path, "a.csv", "TIMESTAMP,GeneratedTokens\nx,1\n"), "not a trace format")
    # both length columns and no timestamp: an Azure trace whose header lacks TIMESTAMP
    fails(write(tmp_path, "b.csv", "ContextTokens,GeneratedTokens\n1,1\n"),
          "no column TIMESTAMP in its header (the Azure LLM inference trace (CSV) format has TIMESTAMP, ContextTokens, "
          "GeneratedTokens)")
    line = '  {"timestamp": 0, "input_length": 3, "output_length": 2}\n'  # JSON after leading spaces
    assert read_trace(write(tmp_path, "m.jsonl", line)).fmt == "mooncake"


def test_an_unknown_first_line_is_shown_cut_to_80_characters(tmp_path):
    first = "y" * 100
    message = fails(write(tmp_path, "a.csv", first + "\n"), "not a trace format")
    assert f"its first line is '{'y' * 80}... (100 characters)'," in message


def test_a_json_line_that_is_not_an_object_names_the_fields(tmp_path):
    first = '{"timestamp": 0, "input_length": 3, "output_length": 2}\n'
    fails(write(tmp_path, "m.jsonl", first + "[1, 2]\n"),
          "row 2 is a JSON array, not an object with timestamp, input_length, output_length")


@pytest.mark.parametrize("stamp, ok", [(2 ** 63 - 1, True), (2 ** 62, True), (2 ** 63, False)])
def test_the_largest_json_integer(tmp_path, stamp, ok):
    path = write(tmp_path, "m.jsonl", f'{{"timestamp": {stamp}, "input_length": 1, "output_length": 1}}\n')
    if ok:
        assert read_trace(path).rows_kept == 1
    else:
        fails(path, f"row 1, column timestamp: '{stamp}' is too large")
    big = "9" * 100  # the value is echoed cut to 40 characters
    fails(write(tmp_path, "n.jsonl", f'{{"timestamp": {big}, "input_length": 1, "output_length": 1}}\n'),
          f"column timestamp: '{'9' * 40}... (100 characters)' is too large")


@pytest.mark.parametrize("value, problem", [
    ("1000000", None),                           # MAX_LENGTH itself is allowed
    ("0" * 39 + "7", None),                      # 40 characters: still read
    ("0" * 40 + "7", "is not a whole number"),   # 41: refused before it is parsed
    ("xnan", "'xnan' is not a whole number"),    # not a spelling of NaN
    ("+" * 100 + "inf", f"'{'+' * 40}... (103 characters)' is not a finite number"),
    ("7" * 100, f"'{'7' * 40}... (100 characters)' is not a whole number"),
])
def test_token_count_edges(tmp_path, value, problem):
    path = write(tmp_path, "a.csv", AZURE.replace("110,27", f"{value},27"))
    if problem is None:
        assert read_trace(path).prompt_tokens[2] == int(value)
    else:
        assert fails(path, problem).startswith(f"trace {path} row 4, column ContextTokens: ")


def test_a_burstgpt_timestamp_too_large_for_an_integer(tmp_path):
    path = write(tmp_path, "b.csv", BURST.replace("118,", f"{10 ** 20},"))  # 21 digits: over 2^63
    fails(path, f"row 5, column Timestamp: '{10 ** 20}' is too large")


def test_an_unparsable_timestamp_is_shown_cut_to_40_characters(tmp_path):
    path = write(tmp_path, "a.csv", AZURE.replace("2023-11-16 18:16:00.5", "z" * 100))
    fails(path, f"'{'z' * 40}... (100 characters)' is not a date and time")


def test_the_span_limit_is_inclusive_and_names_the_last_arrival(tmp_path):
    assert read_trace(write(tmp_path, "a.csv", "Timestamp,Request tokens,Response tokens\n0,1,1\n1e9,1,1\n")).span_s == 1e9
    path = write(tmp_path, "b.csv", "Timestamp,Request tokens,Response tokens\n0,1,1\n1,1,1\n3e9,1,1\n")
    fails(path, "spans 3e+09 s from its first request")


def test_sampling_one_request_and_the_default_seed(tmp_path):
    path = ten_rows(tmp_path)
    assert read_trace(path, sample=1).rows_kept == 1
    assert read_trace(path, sample=4).arrival_s.tolist() == read_trace(path, sample=4, seed=0).arrival_s.tolist()
    with pytest.raises(UsageError) as info:
        read_trace(path, sample=11)
    assert info.value.message == f"trace {path}: asked for 11 requests; it has 10"


def test_the_arrays_of_a_trace_are_read_only(tmp_path):
    t = read_trace(write(tmp_path, "a.csv", AZURE))
    for a in (t.arrival_s, t.prompt_tokens, t.answer_tokens):
        assert not a.flags.writeable
        with pytest.raises(ValueError):
            a[0] = 1


@pytest.mark.skipif("MUTANT_UNDER_TEST" in os.environ, reason="mutmut's trampolines add frames to the stack")
def test_the_warnings_point_at_the_caller(tmp_path):
    with pytest.warns(errors.DlmcostWarning) as caught:
        read_trace(write(tmp_path, "b.csv", BURST))
    assert [Path(w.filename).name for w in caught] == ["test_traces.py"]


def test_describe_without_skipped_rows(tmp_path):
    path = write(tmp_path, "a.csv", AZURE)
    assert read_trace(path).describe() == f"{path}: Azure LLM inference trace (CSV), 5 requests over 2.065e+04 s"


def test_every_message_names_the_trace(tmp_path):
    """The label reaches the reader of lines, the detection, the empty check and the file checks."""
    bad = write(tmp_path, "nul.csv", AZURE.encode() + b"1\x00\n")
    assert fails(bad, "holds a NUL byte").startswith(f"trace {bad} row 7 ")
    odd = write(tmp_path, "odd.csv", "a,b\n")
    assert fails(odd, "not a trace format").startswith(f"trace {odd}: ")
    only = write(tmp_path, "only.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n")
    assert fails(only, "holds no requests") == f"trace {only} holds no requests (only a header)"
    assert fails(tmp_path, "is a folder").startswith(f"trace {tmp_path} is a folder")
    with pytest.raises(UsageError, match="trace format 'xml' is not one of azure, mooncake, burstgpt"):
        read_trace(only, fmt="xml")


def test_the_line_limit_is_inclusive_and_reads_no_further(monkeypatch):
    import io

    monkeypatch.setattr(traces, "MAX_LINE_BYTES", 40)
    stream = io.BytesIO(b"a" * 39 + b"\n" + b"b" * 100 + b"\n" + b"c" * 100)
    lines = traces._Lines(stream, "t")
    assert next(lines) == "a" * 39 + "\n"  # 40 bytes with its newline: at the limit
    with pytest.raises(TraceError, match="^t row 2 is longer than 40 bytes$"):
        next(lines)
    assert stream.tell() == 40 + 41  # one byte past the limit read, never the rest of the line


@pytest.mark.parametrize("call", [
    lambda v: read_trace("x.csv", time_scale=v),
    lambda v: read_trace("x.csv", sample=v),
    lambda v: read_trace("x.csv", seed=v),
    lambda v: canvas_for([1], 4, decodes=v),
    lambda v: canvas_for([1], v),
])
def test_a_bad_argument_is_echoed_cut_to_40_characters(call):
    with pytest.raises(UsageError) as info:
        call("q" * 100)
    assert info.value.message.endswith(f"'{'q' * 39}... (102 characters)")  # the repr: 102 characters


def test_canvas_edges():
    one = canvas_for([5], 1)
    assert one.blocks.tolist() == [5] and one.decoded.tolist() == [5]  # a block of one token
    whole = canvas_for([5], 8, gen=8, decodes=Decodes.CANVAS)  # a single block as long as the canvas
    assert whole.blocks.tolist() == [1] and whole.decoded.tolist() == [8]
    at = canvas_for([8], 4, gen=8)
    assert at.truncated == 0 and at.useful.tolist() == [8]  # an answer as long as the canvas is not cut
    capped = canvas_for([5], 4, gen=6)  # two blocks of 4 would pass the canvas of 6: it ends there
    assert capped.blocks.tolist() == [2] and capped.decoded.tolist() == [6]
    for decodes in Decodes:
        c = canvas_for(np.array([3.0]), 4, 8, decodes=decodes)
        assert c.blocks.dtype == c.decoded.dtype == c.useful.dtype == np.int64
    with pytest.raises(UsageError, match="^canvas: block length must be a positive whole number, not 0$"):
        canvas_for([1], 0)
    with pytest.raises(UsageError, match="^canvas: generation length must be a positive whole number, not 0$"):
        canvas_for([1], 4, 0)


def test_a_trace_whose_prompts_fit_in_no_memory_says_so(run, tmp_path):
    """A million-token prompt: LLaDA-8B's 16 GB of weights fit an H100, one request's K/V cache does
    not (32 layers x K and V x 4096 x 2 bytes = 512 KiB a token: 524 GB). It was put down to the
    precision, the layout or the weights."""
    trace = tmp_path / "long.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 1000000, "output_length": 16}\n')
    rc, out, err = run("serve", "--trace", trace, "--gpu", "h100")
    assert (rc, out) == (WorkloadError.exit_code, "")
    assert err == ("error: GSAI-ML/LLaDA-8B-Instruct cannot run on H100 SXM at tp 1, ep 1, bf16 with mdm/1: one "
                   "request of 1,000,000 prompt tokens and its answer does not fit in 90% of its memory beside the "
                   "weights; shorten the prompts, or give it more memory (--tp, --kv-dtype fp8, --mem-fraction)\n")
    # weights that do not fit (60 GB on a 24 GB card) are still said as before, whatever the prompt
    rc, _, err = run("serve", "Qwen/Qwen3-30B-A3B", "-c", "1", "--gpu", "rtx4090", "--requests", "100")
    assert rc == WorkloadError.exit_code and "weights that do not fit in 90% of its memory" in err, err
