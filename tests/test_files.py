"""The bounded reader: exactly `limit` bytes pass, one more is refused, whatever the stat said."""

import os
import sys

import pytest

from dlmcost.inputs import files
from dlmcost.errors import ConfigError


def read(path, limit):
    return files.read_bytes(path, limit=limit, error=ConfigError, what="config")


def test_a_file_of_exactly_the_limit_is_read_whole(tmp_path):
    f = tmp_path / "c.json"
    f.write_bytes(b"x" * 100)
    assert read(f, 100) == b"x" * 100
    with pytest.raises(ConfigError, match="100 bytes; the limit is"):
        read(f, 99)


def test_an_empty_file_reads_as_empty(tmp_path):
    f = tmp_path / "c.json"
    f.write_bytes(b"")
    assert read(f, 100) == b""


@pytest.fixture
def stat_says(monkeypatch):
    """os.stat reporting a smaller size than the file has: a file that grew between the stat
    and the read (or one of /proc's, which all report 0)."""
    real = os.stat

    def install(size):
        def fake(path, *a, **k):
            st = real(path, *a, **k)
            return os.stat_result((st.st_mode, st.st_ino, st.st_dev, st.st_nlink, st.st_uid, st.st_gid, size,
                                   st.st_atime, st.st_mtime, st.st_ctime))
        monkeypatch.setattr(files.os, "stat", fake)
    return install


@pytest.mark.parametrize("said", [0, 10, 99])
def test_a_file_that_grew_after_the_stat_is_read_to_its_end(tmp_path, stat_says, said):
    f = tmp_path / "c.json"
    f.write_bytes(bytes(range(100)))
    stat_says(said)
    assert read(f, 1000) == bytes(range(100))
    assert read(f, 100) == bytes(range(100))


@pytest.mark.parametrize("said", [0, 10, 49, 50])  # 49: the first read ends exactly at the limit
def test_a_file_that_grew_past_the_limit_after_the_stat_is_refused(tmp_path, stat_says, said):
    f = tmp_path / "c.json"
    f.write_bytes(b"x" * 100)
    stat_says(said)
    with pytest.raises(ConfigError, match="over the limit of"):
        read(f, 50)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_a_proc_file_which_stats_as_empty_is_read_whole():
    status = "/proc/self/status"
    assert os.stat(status).st_size == 0
    assert read(status, 1 << 20).startswith(b"Name:")
    with pytest.raises(ConfigError, match="over the limit of"):
        read(status, 16)


def test_a_small_file_under_a_large_limit_allocates_its_size_not_the_limit(tmp_path):
    """What the reader asks for is what the stat saw (plus one), not `limit + 1`, which a buffered
    read allocates whole before it shrinks it (16 MiB per config file)."""
    import tracemalloc

    f = tmp_path / "c.json"
    f.write_bytes(b"x" * 1000)
    tracemalloc.start()
    try:
        assert read(f, 16 << 20) == b"x" * 1000
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


# --- the YAML loader: a key written twice is refused; merge keys keep their YAML meaning --------


@pytest.fixture(params=["C", "python"])
def load_yaml(request, monkeypatch):
    """`yaml_loader.load_yaml` on PyYAML's C parser and on its pure-Python one."""
    import yaml

    from dlmcost.inputs import yaml_loader

    if request.param == "C" and not hasattr(yaml, "CSafeLoader"):
        pytest.skip("PyYAML without its C parser")
    if request.param == "python":
        monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    yaml_loader._strict_loader.cache_clear()
    yield yaml_loader.load_yaml
    yaml_loader._strict_loader.cache_clear()


@pytest.mark.parametrize("text, message", [
    ("a: 1\nb: 2\na: 3\n", "key 'a' appears twice (lines 1 and 3)"),
    ("x:\n  - {y: 1}\n  - z: 1\n    y: 2\n    z: 3\n", "key 'z' appears twice (lines 3 and 5)"),  # in a list
    ("{a: 1, a: 2}\n", "key 'a' appears twice (line 1, columns 2 and 8)"),
    # keys compared as read, as the dict holding them would: these are one key
    ("1: a\n0x1: b\n", "key '0x1' at line 2 is the same key as '1' at line 1"),
    ("1: a\ntrue: b\n", "key 'true' at line 2 is the same key as '1' at line 1"),
    ("'a': 1\n\"a\": 2\n", "key 'a' appears twice (lines 1 and 2)"),
    ("{1: a, 1.0: b}\n", "key '1.0' at line 1 column 8 is the same key as '1' at column 2"),
    # `<<` twice: `<<: [*a, *b]` says the order plainly
    ("a: &a {x: 1}\nt: {<<: *a, <<: {x: 2}}\n", "key '<<' appears twice (line 2, columns 5 and 13)"),
    # a merged mapping is a mapping too
    ("a: &a {x: 1, x: 2}\nt: {<<: *a}\n", "key 'x' appears twice (line 1, columns 8 and 14)"),
    ("t: {<<: {x: 1, x: 2}}\n", "key 'x' appears twice (line 1, columns 10 and 16)"),
])
def test_a_key_written_twice_is_refused(load_yaml, text, message):
    from dlmcost.inputs.yaml_loader import RepeatedKeyError

    with pytest.raises(RepeatedKeyError) as info:
        load_yaml(text)
    assert info.value.message() == message


@pytest.mark.parametrize("text, data", [
    ("1: a\n'1': b\n", {1: "a", "1": "b"}),  # a number and a text: two keys
    ("a: {x: 1}\nb: {x: 2}\n", {"a": {"x": 1}, "b": {"x": 2}}),  # one key in two mappings
    ("- {a: 1}\n- {a: 2}\n", [{"a": 1}, {"a": 2}]),
    # yaml.org/type/merge: the mapping's own keys override the merged ones...
    ("b: &b {x: 1, y: 2}\nt: {<<: *b, x: 3}\n", {"b": {"x": 1, "y": 2}, "t": {"x": 3, "y": 2}}),
    # ...and of several merged mappings the first wins (PyYAML 6.0.4's own merge gave 2)
    ("a: &a {speed: 1}\nb: &b {speed: 2}\nt: {<<: [*a, *b]}\n",
     {"a": {"speed": 1}, "b": {"speed": 2}, "t": {"speed": 1}}),
    # a mapping merged in turn is what it reads as: m is {x: 2, y: 2}, so t is {x: 2, y: 5}
    # (PyYAML 6.0.4's own merge gave t x: 1, the value m overrides)
    ("b: &b {x: 1, y: 2}\nm: &m\n  <<: *b\n  x: 2\nt:\n  <<: *m\n  y: 5\n",
     {"b": {"x": 1, "y": 2}, "m": {"x": 2, "y": 2}, "t": {"x": 2, "y": 5}}),
])
def test_distinct_keys_and_merges_read_as_yaml_means(load_yaml, text, data):
    assert load_yaml(text) == data


def test_a_float_without_a_point_is_a_number(load_yaml):
    """YAML 1.2 reads `1e-3` as a float; PyYAML's YAML 1.1 rules read it as a string, which every
    strict field then refused as 'not a valid number' (a measurement of `ms_per_forward: 1e-3`).
    Quoted it stays a string; hex and words are what they were."""
    assert load_yaml("a: 1e-3\nb: 2E5\nc: -1e+3\nd: 1_000e2\ne: [1e2]\n") == dict(a=0.001, b=200000.0, c=-1000.0,
                                                                                 d=100000.0, e=[100.0])
    assert load_yaml("a: '1e-3'\nb: 1e\nc: 0x1e3\nd: x1e2\ne: 1.5e3\n") == dict(a="1e-3", b="1e", c=483, d="x1e2",
                                                                               e=1500.0)
