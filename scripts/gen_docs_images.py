"""Regenerate the pictures in docs/img/ with the commands docs/plots.md shows.

    python scripts/gen_docs_images.py [OUT_DIR]     (default: docs/img)

Each roofline and sweep picture is drawn by running the documented `dlmcost` command line, so
the docs' examples are checked whenever the pictures are remade (tests/test_plot_docs.py runs
this script into a temporary folder). The plan front uses illustrative rows until `plan` exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dlmcost import charts, plot  # noqa: E402
from dlmcost.cli import main  # noqa: E402

# (file name, the command as docs/plots.md prints it, after `dlmcost`)
COMMANDS = [
    ("roofline.png", "analyze GSAI-ML/LLaDA-8B-Instruct --gpu h100,b200,mi300x --scheme block --block 32 "
                     "--gen 256 --steps 64 --ops --plot {out}"),
    ("sweep.png", "sweep --gpu h100,b200 --scheme ar,mdm,dual-cache,block --block 1,8,32 --gen 256 --plot {out}"),
]
# Illustrative candidates (not computed): what the plan front looks like once `plan` lands.
PLAN_EXAMPLE = [
    dict(gpu="H200 SXM", usd_per_mtok=3.4, p95_latency_s=0.7, pareto=True, is_ar_baseline=False),
    dict(gpu="H100 SXM", usd_per_mtok=2.1, p95_latency_s=1.4, pareto=True, is_ar_baseline=False),
    dict(gpu="B200", usd_per_mtok=1.3, p95_latency_s=3.8, pareto=True, is_ar_baseline=False),
    dict(gpu="MI300X", usd_per_mtok=2.6, p95_latency_s=4.9, pareto=False, is_ar_baseline=False),
    dict(gpu="L40S", usd_per_mtok=5.5, p95_latency_s=12.0, pareto=False, is_ar_baseline=False),
    dict(gpu="H100 SXM", usd_per_mtok=6.2, p95_latency_s=8.5, pareto=False, is_ar_baseline=True),
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
    path = out_dir / "plan-front.png"
    plot.save(charts.plan_front(PLAN_EXAMPLE, title="plan front (illustrative numbers)"), str(path))
    return written + [path]


if __name__ == "__main__":
    import contextlib
    import io

    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "docs" / "img"
    with contextlib.redirect_stdout(io.StringIO()):  # the commands' tables
        files = generate(target)
    print("\n".join(str(f) for f in files))
