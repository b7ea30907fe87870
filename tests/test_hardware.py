"""The accelerator database: dense peaks, ridge points, sources, aliases."""

import pytest

from dlmcost.errors import UnknownGPUError
from dlmcost.inputs.hardware import DEFAULT_GPUS, HardwareDB, bundled_hardware_dir, ridge_flops_per_byte


@pytest.fixture(scope="module")
def db():
    return HardwareDB.load()


def test_ridge_points_of_published_peaks(db):
    # H100 bf16 989 TFLOP/s / 3.35 TB/s ~ 295; H200 ~ 206.
    assert db.get("h100").ridge_flops_per_byte["bf16"] == pytest.approx(295, abs=1)
    assert db.get("h200").ridge_flops_per_byte["bf16"] == pytest.approx(206, abs=1)
    # A B200 fp4 ridge from 9 PF / 8 TB/s would be 1125 (the same formula on rounder numbers);
    # the database uses NVIDIA's HGX figure of 7.7 TB/s, which moves it to ~1169 (documented).
    assert ridge_flops_per_byte(9.0e15, 8.0e12) == pytest.approx(1125)
    assert db.get("b200").ridge_flops_per_byte["fp4"] == pytest.approx(9000 / 7.7, rel=1e-6)


def test_dense_not_sparse_peaks(db):
    h100 = db.get("h100")
    assert h100.peak_flops["bf16"] == pytest.approx(989.5e12)  # the sparse figure would be 1979
    assert h100.peak_flops["fp8"] == pytest.approx(1979e12)
    assert "fp8" not in db.get("a100").peak_flops


def test_aliases(db):
    assert db.get("H100").name == "H100 SXM"
    assert db.get("a100").name == "A100 80GB SXM"
    assert db.get("b200").name == "B200"
    for name in DEFAULT_GPUS:
        db.get(name)


def test_unknown_gpu_suggests(db):
    with pytest.raises(UnknownGPUError, match="did you mean"):
        db.get("h10")


def test_every_gpu_has_sources_and_positive_numbers(db):
    assert len(db.gpus) >= 17
    for g in db.gpus.values():
        for field in ("memory", "bandwidth", "peak_tflops", "efficiency"):
            assert g.sources.get(field)
        assert g.memory_bytes > 0 and g.bandwidth_bytes_per_s > 0
        assert all(v > 0 for v in g.peak_flops.values())


def test_required_accelerators_present(db):
    for name in ["a100-40gb", "a100", "h100", "h100-pcie", "h200", "h20", "b200", "b300", "gb200", "l40s", "l4",
                 "rtx4090", "mi300x", "mi325x", "mi355x", "mi455x", "gaudi3"]:
        db.get(name)
    assert db.get("mi455x").status == "provisional"


def test_user_file_overrides_bundled(tmp_path):
    src = (bundled_hardware_dir() / "nvidia-h100-sxm.yaml").read_text()
    (tmp_path / "mine.yaml").write_text(src.replace("bandwidth_tb_s: 3.35", "bandwidth_tb_s: 4.0"))
    mine = HardwareDB.load([str(tmp_path)])
    assert mine.get("h100").bandwidth_bytes_per_s == 4.0e12
