"""Files a command writes are checked before any work: a path that cannot be written fails with
one line, exit 2, nothing on stdout and nothing left behind; and a `--plot FILE` that fails while
it is drawn leaves stdout empty too (the table waits for the picture)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dlmcost.cli import main
from dlmcost.cli.output_paths import check_output_file
from dlmcost.errors import UsageError

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forkrun  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _bad_paths(root: Path) -> dict[str, tuple[Path, str]]:
    """name -> (path, what the message says). As root, permission bits stop nothing: the
    'read-only folder' is a file where the folder should be."""
    (root / "pipe.png").parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(root / "pipe.png")
    (root / "folder.png").mkdir()
    (root / "a-file").write_text("x")
    (root / "dangling.png").symlink_to(root / "nowhere")
    return {
        "300-character name": (root / ("a" * 300 + ".png"), "too long"),
        "named pipe": (root / "pipe.png", "named pipe"),
        "folder": (root / "folder.png", "a folder"),
        "missing folder": (root / "missing" / "r.png", "does not exist"),
        "under a file": (root / "a-file" / "r.png", "is not a folder"),
        "device": (Path("/dev/null"), "character device"),
        "dangling link": (root / "dangling.png", "symbolic link to nothing"),
    }


NAMES = ["300-character name", "named pipe", "folder", "missing folder", "under a file", "device", "dangling link"]
PLOT_NAMES = [n for n in NAMES if n != "device"]  # /dev/null is refused by --plot for its suffix first


@pytest.mark.parametrize("name", NAMES)
def test_check_refuses_what_cannot_be_written(tmp_path, name):
    path, needle = _bad_paths(tmp_path)[name]
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(UsageError) as caught:
        check_output_file(str(path), "--out")
    message = caught.value.message
    assert message.startswith("--out: ") and needle in message and "\n" not in message, message
    assert sorted(tmp_path.rglob("*")) == before  # nothing created, nothing removed


def test_check_leaves_a_writable_path_as_it_was(tmp_path):
    new, old = tmp_path / "new.png", tmp_path / "old.png"
    old.write_bytes(b"keep")
    check_output_file(str(new), "--plot")
    check_output_file(str(old), "--plot")
    assert not new.exists() and old.read_bytes() == b"keep"


@pytest.mark.parametrize("name", PLOT_NAMES)
@pytest.mark.parametrize("command", [["analyze", "--gpu", "h100"], ["sweep", "--gpu", "h100", "--block", "8,32"]],
                         ids=lambda c: c[0])
def test_plot_to_an_unwritable_path_fails_before_the_table(capsys, tmp_path, name, command):
    path, needle = _bad_paths(tmp_path)[name]
    rc = main([*command, "--plot", str(path)])
    out, err = capsys.readouterr()
    assert rc == 2, err
    assert out == "", out[:200]
    assert err.count("\n") == 1 and err.startswith("error: --plot: ") and needle in err, err


def test_a_plot_that_fails_while_drawn_leaves_stdout_empty(capsys, tmp_path, monkeypatch):
    """The path passed the check, then writing failed (a full disk, say): the table is not printed."""
    pytest.importorskip("matplotlib")
    from dlmcost.render import plot

    def full_disk(chart, path):
        raise UsageError(f"--plot: cannot write '{path}': No space left on device")

    monkeypatch.setattr(plot, "save", full_disk)
    for command in (["analyze", "--gpu", "h100"], ["sweep", "--gpu", "h100", "--block", "8,32"],
                    ["plan", "--gpu", "h100", "--rate", "1"]):
        rc = main([*command, "--plot", str(tmp_path / "r.png")])
        out, err = capsys.readouterr()
        assert (rc, out) == (2, ""), (command, out[:200])
        assert "No space left" in err
    rc = main(["analyze", "--gpu", "h100", "--plot", "-"])  # the terminal chart: written as it goes
    assert rc == 0 and "H100" in capsys.readouterr().out


def test_calibrate_and_measure_check_their_out_files_first(tmp_path):
    """In processes of their own under a timeout (forked at once from one interpreter,
    tests/forkrun.py): unchecked, measure would time its passes first, then wait on the pipe for a
    reader."""
    os.mkfifo(tmp_path / "pipe.yaml")
    runs = [["calibrate", str(tmp_path / "no-such-points.yaml"), "--out", str(tmp_path / "pipe.yaml")],
            ["measure", str(EXAMPLES / "tiny-dlm.yaml"), "--gpu", "h100", "--out", str(tmp_path / "pipe.yaml")],
            ["measure", str(EXAMPLES / "tiny-dlm.yaml"), "--gpu", "h100",
             "--profile-out", str(tmp_path / "missing" / "s.yaml")]]
    results = forkrun.run({str(i): forkrun.case(args) for i, args in enumerate(runs)},
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, limit_s=20)
    for i, args in enumerate(runs):
        assert results[str(i)] is not None, f"{args}: still running after 20 s"
        code, stdout, err = results[str(i)]
        assert code == 2 and stdout == "", err
        assert err.count("\n") == 1 and ("named pipe" in err or "does not exist" in err), err
