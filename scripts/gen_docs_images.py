"""Regenerate the pictures in docs/img/ with the commands docs/plots.md shows.

    python scripts/gen_docs_images.py [OUT_DIR]     (default: docs/img)

Each picture is drawn by running the documented `dlmcost` command line, so
the docs' examples are checked whenever the pictures are remade (tests/test_plot_docs.py runs
this script into a temporary folder).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dlmcost.cli import main  # noqa: E402

# (file name, the command as docs/plots.md prints it, after `dlmcost`)
COMMANDS = [
    ("roofline.png", "analyze GSAI-ML/LLaDA-8B-Instruct --gpu h100,b200,mi300x --scheme block --block 32 "
                     "--gen 256 --steps 64 --ops --plot {out}"),
    ("sweep.png", "sweep --gpu h100,b200 --scheme ar,mdm,dual-cache,block --block 1,8,32 --gen 256 --plot {out}"),
    ("plan-front.png", "plan --rate 4 --p95 20 --gpu h100,h200,b200,mi300x,l40s --tp 1,2 --requests 300 --plot {out}"),
    ("serve.png", "serve --gpu h100 --scheme block --block 32 --tpf 2 --rate 1,2,4,8,16 --plot {out}"),
]

def generate(out_dir: Path) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, command in COMMANDS:
        path = out_dir / name
        code = main(command.format(out=path).split())
        if code != 0:
            raise SystemExit(f"`dlmcost {command}` failed with exit code {code}")
        written.append(path)
    return written


if __name__ == "__main__":
    import contextlib
    import io

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "img"
    with contextlib.redirect_stdout(io.StringIO()):  # the commands' tables
        files = generate(target)
    print("\n".join(str(f) for f in files))
