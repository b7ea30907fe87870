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
