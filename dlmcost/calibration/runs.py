"""What `dlmcost calibrate` and `dlmcost measure` run, from their settings to the records they
print: the points read and filtered, the fit, the stack and measurement files written."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..errors import UsageError
from ..analysis.prepare import resolve_spec
from ..inputs.error_bands import published_band_for
from ..inputs.stacks import DEFAULT_STACK, check_stack_name, load_stack
from . import calibrate as cal
from . import measure as ms
from .measurements import MeasurementFile, load_points


def calibrate_file(measurements: str, *, stack: str | None, fit: str, name: str | None, only: str | None,
                   hardware: list[str] | None, out: str, progress: Callable[[int, int], None] | None = None) -> dict:
    """Fit `fit`'s parameters of `stack` to the points of a measurements file (those whose
    `stack:` is `only`, if given) and write the fitted stack to `out`. `progress(done, total)`:
    the fit's iterations (`calibrate.fit`)."""
    if name is not None:
        check_stack_name(name)
    points, base_dir = load_points(measurements)
    if only is not None:
        points = [p for p in points if p.stack == only]
        if not points:
            raise UsageError(f"--only {only}: no point of {measurements} has stack '{only}'")
    result = cal.calibrate(points, base_dir, load_stack(stack), cal.parse_fit(fit), name or "calibrated", hardware,
                           progress, published_band_for(stack or DEFAULT_STACK, points_vendor(points, hardware)))
    cal.write_stack(result["data"], Path(out))
    return result


def points_vendor(points, hardware: list[str] | None) -> str | None:
    """The vendor whose parts every measurement ran on (None: several): the published band a
    calibration is set against is the stack's on that vendor's parts, where it has one."""
    from ..inputs.hardware import HardwareDB

    db = HardwareDB.load(hardware)
    vendors = {db.get(p.gpu).vendor for p in points}
    return vendors.pop() if len(vendors) == 1 else None


MAX_BATCHES = 64  # as serve's deployments: a --batch list of thousands would time for hours


def measure_batches(model: str, gpu: str, workload: dict, batches: list[int], *, stack: str | None, backend: str,
                    device: str | None, warmup: int, repeats: int, layers: int | None,
                    hardware: list[str] | None, progress: Callable[[int, int], None] | None = None):
    """One measurement per batch size, each yielded as soon as it is taken. `progress(done,
    total)`: the parts of passes timed over all the batches (each batch times as many: its
    shapes differ from another's in the batch only). A batch size given twice is measured once;
    more than MAX_BATCHES of them is refused before anything is timed (each takes seconds)."""
    batches = list(dict.fromkeys(batches))
    if len(batches) > MAX_BATCHES:
        raise UsageError(f"measure: {len(batches):,} batch sizes; measure at most {MAX_BATCHES} at once "
                         "(each is timed on its own)")
    # the timing is a generator of its own: these checks run when called, not at the first measurement
    return _measure_each(model, gpu, workload, batches, stack=stack, backend=backend, device=device, warmup=warmup,
                         repeats=repeats, layers=layers, hardware=hardware, progress=progress)


def _measure_each(model, gpu, workload, batches, *, stack, backend, device, warmup, repeats, layers, hardware,
                  progress):
    spec = resolve_spec(model)
    base = load_stack(stack)
    be = ms.get_backend(backend, device)
    for i, b in enumerate(batches):
        wl = {k: v for k, v in dict(workload, batch=b).items() if v is not None}
        timed = (lambda done, each, i=i: progress(i * each + done, len(batches) * each)) if progress else None
        yield ms.measure_workload(spec, gpu, wl, base, be, warmup=warmup, repeats=repeats, layers=layers,
                                  hardware=hardware, progress=timed)


def write_measurements(results: list, model: str, gpu: str, out: str | None) -> dict:
    """The measurements as the points file `calibrate` reads, written to `out` when given."""
    import yaml

    model_ref = str(Path(model).resolve()) if Path(model).is_file() else model
    doc = ms.as_points(results, model_ref, gpu)
    MeasurementFile.model_validate(doc)
    if out:
        Path(out).write_text("# Written by `dlmcost measure`.\n" + yaml.safe_dump(doc, sort_keys=False),
                             encoding="utf-8")
    return doc


def calibrate_measured(doc: dict, stack: str | None, hardware: list[str] | None, out: str,
                       progress: Callable[[int, int], None] | None = None) -> dict:
    """A stack calibrated to what these measurements pin, written to `out` (`progress`: see
    `calibrate.calibrate_what_data_pins`)."""
    base = load_stack(stack)
    points = MeasurementFile.model_validate(doc).points
    result = cal.calibrate_what_data_pins(points, Path.cwd(), base, f"{base.name}-measured", hardware,
                                          progress=progress, published=published_band_for(
                                              stack or DEFAULT_STACK, points_vendor(points, hardware)))
    cal.write_stack(result["data"], Path(out))
    return result
