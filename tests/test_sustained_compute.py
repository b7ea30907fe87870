"""A hardware file's `sustained_compute`: the fraction of its GEMM efficiency a board-power-limited
part sustains under continuous load, against times computed by hand."""

import pytest

from dlmcost import api
from dlmcost.inputs.hardware import HardwareFileError, bundled_hardware_dir

# LLaDA2.0-mini, mdm over a 16 + 16 canvas at batch 128 on an H20 (hardware/nvidia-h20.yaml: bf16
# 148 TF/s dense, GEMM efficiency 0.80, 3 us per kernel): its routed experts are compute-bound (AI
# ~128 FLOP/B against a ridge of 37), 19 kernels per pass, 4 passes
MINI = dict(scheme="mdm", prompt=16, gen=16, steps=4, batch=128)
H20_PEAK, H20_GEMM_EFF, OVERHEAD_S = 148e12, 0.80, 19 * 2 * 3e-6 * 4  # 19 MoE layers x 2 grouped-GEMM kernels x 4 passes


def _h20(tmp_path, extra: str, source: bool = True):
    text = (bundled_hardware_dir() / "nvidia-h20.yaml").read_text(encoding="utf-8")
    text = text.replace("name: H20", "name: H20 capped").replace("aliases: [", "aliases: [h20-capped]  # was: [")
    text = text.replace("  overhead_us_per_op: 3", f"{extra}\n  overhead_us_per_op: 3", 1)
    if source:
        text = text.replace("sources:\n", "sources:\n  sustained_compute: test\n", 1)
    (tmp_path / "h20-capped.yaml").write_text(text)
    return str(tmp_path)


def _experts(gpu, hardware=None, efficiency="realistic"):
    r = api.analyze("inclusionAI/LLaDA2.0-mini", gpus=gpu, stack="none", hardware=hardware, efficiency=efficiency,
                    **MINI)["results"][0]
    return next(o for o in r["ops"] if o["name"] == "experts")


def test_sustained_compute_divides_the_compute_rate(tmp_path):
    """At 0.5 the experts' compute time doubles: FLOPs / (148 TF/s x 0.80 x 0.5) + the kernels'
    overhead, which (like memory traffic) the clock factor leaves alone."""
    capped = _experts("h20-capped", [_h20(tmp_path, "  sustained_compute: 0.5")])
    assert capped["time_s"] == pytest.approx(capped["flops"] / (H20_PEAK * H20_GEMM_EFF * 0.5) + OVERHEAD_S, rel=1e-9)
    plain = _experts("h20")
    assert plain["time_s"] == pytest.approx(plain["flops"] / (H20_PEAK * H20_GEMM_EFF) + OVERHEAD_S, rel=1e-9)
    ideal = _experts("h20-capped", [_h20(tmp_path, "  sustained_compute: 0.5")], efficiency="ideal")
    assert ideal["time_s"] == pytest.approx(ideal["flops"] / H20_PEAK, rel=1e-9)  # an upper bound: no derate


def test_the_a100_40gb_pcie_value_and_its_source():
    """The bundled 250 W A100 PCIe: 0.66 of its 0.81 GEMM efficiency, about 167 TF/s of 312 for a
    large bf16 GEMM (the FluxServe batch-32 forward it was fitted to ran at about 163 TF/s overall)."""
    import yaml

    data = yaml.safe_load((bundled_hardware_dir() / "nvidia-a100-40gb-pcie.yaml").read_text(encoding="utf-8"))
    assert data["efficiency"]["sustained_compute"] == 0.66 and "fluxserve" in data["sources"]["sustained_compute"]
    assert 312 * 0.81 * 0.66 == pytest.approx(166.8, abs=0.05)


def test_a_value_without_its_source_is_refused(tmp_path):
    from dlmcost.inputs.hardware import HardwareDB

    with pytest.raises(HardwareFileError, match="sustained_compute"):
        HardwareDB.load([_h20(tmp_path, "  sustained_compute: 0.5", source=False)]).get("h20-capped")
