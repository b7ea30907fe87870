"""Fit a stack's free parameters to measured times: least squares on log time (numpy only).

Parameters (`--fit`, comma list), each fitted as the log of a positive number:

    host        host.us_per_layer
    fixed       host.fixed_us_per_forward
    gemm        a multiplier on the whole GEMM-efficiency curve (each point capped at 1)
    attention   attention_efficiency (capped at 1)
    elementwise elementwise_bytes_factor

Residual of point i: r_i = ln(predicted_i / measured_i) (time per forward). Gauss-Newton with
Levenberg-Marquardt damping and a backward-difference Jacobian. Before and after fitting, every
requested parameter must be pinned by the data: at most as many parameters as points, and the
Jacobian's columns independent (a parameter on the non-binding side of a max(), such as host
time when every pass is GPU-bound, changes no prediction). Otherwise the fit is refused with the
reason, and the user can drop parameters.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import yaml

from ..analysis.prepare import prepare
from ..engine import frames
from ..analysis import limits
from ..engine.evaluation import evaluate, passes_one_by_one
from ..errors import UsageError
from ..inputs.error_bands import ErrorBand
from . import held_out
from .measurements import Point, cannot_run, check_answer_tokens, comparison, resolve_point_model
from ..inputs.stacks import Stack, validate_stack

PARAMETERS = ("host", "fixed", "gemm", "attention", "elementwise")
# Start a parameter that is exactly zero (no host time under CUDA graphs) here so its log exists.
ZERO_START = {"host": 1.0, "fixed": 1.0}
MAX_ITER = 60
STEP_TOL = 1e-6  # a step in every log-parameter under this ends the fit
REFIT_DAMPING = 1e-6  # a held-out refit's first Levenberg-Marquardt damping (the whole fit's: 1e-2)
RANK_TOL = 1e-6  # relative singular value below which a direction is not pinned


def parse_fit(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in PARAMETERS]
    if bad or not names:
        raise UsageError(f"--fit: unknown parameter '{(bad or [''])[0]}'; choose from {', '.join(PARAMETERS)}")
    return list(dict.fromkeys(names))


def _get(stack: Stack, name: str) -> float:
    return {"host": stack.host.us_per_layer, "fixed": stack.host.fixed_us_per_forward, "gemm": 1.0,
            "attention": stack.attention_efficiency, "elementwise": stack.elementwise_bytes_factor}[name]


def with_parameters(base: Stack, values: dict[str, float]) -> Stack:
    """A copy of `base` with the given parameter values (gemm = multiplier on the curve)."""
    data = base.model_dump()
    for name, v in values.items():
        if name == "host":
            data["host"]["us_per_layer"] = min(v, 1e6)
        elif name == "fixed":
            data["host"]["fixed_us_per_forward"] = min(v, 1e7)
        elif name == "gemm":
            data["gemm_efficiency"]["efficiency"] = [min(1.0, e * v) for e in data["gemm_efficiency"]["efficiency"]]
        elif name == "attention":
            data["attention_efficiency"] = min(1.0, v)
        elif name == "elementwise":
            data["elementwise_bytes_factor"] = min(16.0, v)
    return validate_stack(data, "calibrated")


class Problem:
    """The points, validated once, and the stack being fitted.

    A residual needs only each point's total predicted time and pass count under the trial
    stack, so the points are validated once (as `analyze` validates them, with its errors) and
    each residual evaluation is one vectorised engine call per model: the points of a model form
    one grid whose stack is swapped per trial. The numbers are those of `analyze` point by point
    (tests/test_calibrate.py compares the two)."""

    def __init__(self, points: list[Point], base_dir: Path, base: Stack, fit: list[str],
                 hardware: list[str] | None = None):
        self.points, self.base, self.fit, self.hardware = points, base, fit, hardware
        self.base_dir = base_dir
        self.specs = _specs(points, base_dir)
        self.theta0 = np.log([_get(base, n) or ZERO_START.get(n, 1e-3) for n in fit])
        self.prepared = []
        for p, spec in zip(points, self.specs):  # in file order: the first bad point is the one reported
            prepared = prepare(spec, gpus=p.gpu, hardware=hardware, stack=base, **dict(p.workload))
            check_answer_tokens(p, prepared.workload.gen)
            if not prepared.supported:
                raise cannot_run(p)
            self.prepared.append(prepared)
        groups: dict[tuple, list[int]] = {}
        for i, pr in enumerate(self.prepared):  # a drafter is part of the model
            groups.setdefault((id(pr.spec), pr.workload.drafter), []).append(i)
        self.groups = []
        for rows in groups.values():
            first = self.prepared[rows[0]]
            models = frames.models_by_role(first.spec, first.drafter)
            grid = frames.workloads_grid([self.prepared[i].workload for i in rows],
                                      [self.prepared[i].supported[0][1] for i in rows], base)
            self.groups.append((models, grid, np.array(rows)))
        # the limit on passes costed one by one (docs/limits.md), checked before any work: the fit
        # evaluates the points at most (MAX_ITER + 3) x (parameters + 1) times
        self.evaluations = evaluations = (MAX_ITER + 3) * (len(fit) + 1)
        self.passes = passes = sum(int(passes_one_by_one(models, grid).sum()) for models, grid, _ in self.groups)
        limits.check_passes(passes * evaluations, limits.MAX_PASSES_ONE_BY_ONE, f"fitting evaluates the points up to "
                            f"{evaluations} times: use fewer or shorter measurement points, or larger blocks")

    def stack(self, theta) -> Stack:
        return with_parameters(self.base, dict(zip(self.fit, np.exp(theta))))

    def totals(self, stack: Stack) -> tuple[np.ndarray, np.ndarray]:
        """Each point's predicted time of its whole workload (s) and its forward passes."""
        time_s, nfe = np.empty(len(self.points)), np.empty(len(self.points))
        for models, grid, rows in self.groups:
            total = evaluate(models, replace(grid, stack=stack)).total
            time_s[rows], nfe[rows] = total.time_s, total.count
        return time_s, nfe

    def rows(self, theta) -> list[dict]:
        s = self.stack(theta)
        time_s, nfe = self.totals(s)
        return [comparison(p, pr.supported[0][0].name, s.name, float(nfe[i]), float(time_s[i]),
                           float(pr.workload.batch))
                for i, (p, pr) in enumerate(zip(self.points, self.prepared))]

    def residuals(self, theta) -> np.ndarray:
        return np.log([r["ratio"] for r in self.rows(theta)])

    def jacobian(self, theta, r0) -> np.ndarray:
        J = np.empty((len(r0), len(theta)))
        for j in range(len(theta)):
            step = np.zeros_like(theta)
            step[j] = 1e-4  # backward difference: the efficiency caps at 1 are upper bounds
            J[:, j] = (r0 - self.residuals(theta - step)) / 1e-4
        return J


class WithoutFold:
    """The problem without some of its points (a fold): the fit sees the others only. It starts
    at the whole fit's `start`, whose residuals and Jacobian (`at_start`) every fold shares."""

    def __init__(self, problem: Problem, left_out: np.ndarray, start: np.ndarray,
                 at_start: tuple[np.ndarray, np.ndarray]):
        self.problem = problem
        self.keep = np.setdiff1d(np.arange(len(problem.points)), left_out)
        self.points = [problem.points[i] for i in self.keep]
        self.fit, self.theta0 = problem.fit, start
        self.r_start, self.j_start = (a[self.keep] for a in at_start)

    def residuals(self, theta) -> np.ndarray:
        if np.array_equal(theta, self.theta0):
            return self.r_start
        return self.problem.residuals(theta)[self.keep]

    def jacobian(self, theta, r0) -> np.ndarray:
        if np.array_equal(theta, self.theta0):
            return self.j_start
        return Problem.jacobian(self, theta, r0)  # (backward differences of `residuals`, as the whole problem's)


def refits_fit_the_limit(problem: Problem, refits: int) -> bool:
    """The held-out refits stay within the passes a command may cost one by one (docs/limits.md;
    the fit itself was checked when the problem was made); over it, they are not run."""
    limit = limits.MAX_PASSES_ONE_BY_ONE
    return limit is None or problem.passes * problem.evaluations * (refits + 1) <= limit


def held_out_ratios(problem: Problem, theta: np.ndarray,
                    progress: Callable[[int, int], None] | None = None) -> list[float | None]:
    """Each point's measured / predicted time per forward under a fit without its fold, started
    from the full fit's `theta` (held_out.py; None: that refit was refused, or the refits would
    cost more passes than the limit). `progress(done, folds)` after each refit."""
    parts = held_out.folds(len(problem.points))
    ratios: list[float | None] = [None] * len(problem.points)
    if not refits_fit_the_limit(problem, len(parts)):
        return ratios
    r = problem.residuals(theta)
    at_start = r, problem.jacobian(theta, r)
    for done, fold in enumerate(parts, 1):
        try:  # (little damping: each refit starts near its minimum, the whole fit's)
            refit, _ = fit(WithoutFold(problem, fold, theta, at_start), damping=REFIT_DAMPING)
        except UsageError:  # the other points cannot pin the parameters: no held-out number here
            refit = None
        if refit is not None:
            rows = problem.rows(refit)
            for i in fold:
                ratios[i] = rows[i]["measured_ms"] / rows[i]["predicted_ms"]
        if progress:
            progress(done, len(parts))
    return ratios


def _specs(points: list[Point], base_dir: Path) -> list:
    """Each point's model, each distinct model resolved once."""
    resolved = {}
    for p in points:
        if p.model not in resolved:
            resolved[p.model] = resolve_point_model(p, base_dir)
    return [resolved[p.model] for p in points]


def unpinned(J: np.ndarray, names: list[str]) -> list[str]:
    """Parameters the data cannot pin: columns without effect, or in the span of the others."""
    norms = np.linalg.norm(J, axis=0)
    scale = norms.max() if norms.size and norms.max() > 0 else 1.0
    dead = [n for n, v in zip(names, norms) if v <= RANK_TOL * scale]
    if dead:
        return dead
    s = np.linalg.svd(J / np.where(norms > 0, norms, 1.0), compute_uv=False)
    if s.size and s.min() <= 1e-4 * s.max():
        return list(names)  # jointly degenerate: the data cannot tell them apart
    return []


def _refuse(reason: str) -> UsageError:
    return UsageError(f"cannot calibrate: {reason}; fit fewer parameters with --fit")


def fit(problem: Problem, progress: Callable[[int, int], None] | None = None,
        damping: float = 1e-2) -> tuple[np.ndarray, dict]:
    """Levenberg-Marquardt on ln(predicted/measured). Returns theta and a summary.
    `progress(done, MAX_ITER)`, if given, is called after each iteration, and with (MAX_ITER,
    MAX_ITER) once the fit stops (converged early or not)."""
    n, k = len(problem.points), len(problem.fit)
    if k > n:
        raise _refuse(f"{n} measurement(s) cannot pin {k} parameters ({', '.join(problem.fit)})")
    theta = problem.theta0.copy()
    r = problem.residuals(theta)
    J = problem.jacobian(theta, r)
    bad = unpinned(J, problem.fit)
    if bad:
        raise _refuse(f"the measurements do not depend on {', '.join(bad)} at the starting profile")
    lam = damping
    cost = float(r @ r)
    for iteration in range(1, MAX_ITER + 1):
        if progress:
            progress(iteration - 1, MAX_ITER)
        A = J.T @ J
        g = J.T @ r
        step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
        trial = np.clip(theta + step, -20, 20)
        r_trial = problem.residuals(trial)
        c_trial = float(r_trial @ r_trial)
        if c_trial < cost:
            converged = cost - c_trial < 1e-12 * max(cost, 1e-30) or np.max(np.abs(step)) < STEP_TOL
            theta, r, cost, lam = trial, r_trial, c_trial, lam / 3
            if converged:
                break
            J = problem.jacobian(theta, r)
        else:
            lam *= 10
            # more damping only shortens the step: once it is under the tolerance no later one can
            # move the parameters by more (an accepted one would stop the fit at once)
            if lam > 1e8 or np.max(np.abs(step)) < STEP_TOL:
                break
    if progress:
        progress(MAX_ITER, MAX_ITER)
    bad = unpinned(problem.jacobian(theta, r), problem.fit)
    if bad:
        raise _refuse(f"at the best fit the measurements no longer depend on {', '.join(bad)} "
                      "(driven towards zero, or a bound such as max(GPU, host) switched sides)")
    return theta, dict(rms_log_error=math.sqrt(cost / n))


def calibrate(points: list[Point], base_dir: Path, base: Stack, fit_names: list[str], name: str,
              hardware: list[str] | None = None, progress: Callable[[int, int], None] | None = None,
              published: ErrorBand | None = None) -> dict:
    """The fitted stack, the points before and after, and the fit's held-out error (held_out.py)
    beside `published`, the starting stack's published band. `progress(done, total)`: the fit's
    iterations (see `fit`), then MAX_ITER more for each held-out refit."""
    problem = Problem(points, base_dir, base, fit_names, hardware)
    before = problem.rows(problem.theta0)
    total = MAX_ITER * (1 + len(held_out.folds(len(points))))
    theta, info = fit(problem, progress and (lambda done, _: progress(done, total)))
    after = problem.rows(theta)
    ratios = held_out_ratios(problem, theta, progress and (lambda done, _: progress(MAX_ITER * (1 + done), total)))
    band = held_out.held_out_band([r for r in ratios if r is not None], published, len(points))
    if progress:
        progress(total, total)
    values = dict(zip(fit_names, np.exp(theta).tolist()))
    fitted = with_parameters(base, values)
    data = fitted.model_dump()
    data["name"] = name
    data["description"] = f"{base.name} calibrated to {len(points)} measurement(s)"
    note = (f"fitted by `dlmcost calibrate` ({', '.join(fit_names)}) to {len(points)} measurement(s); "
            f"RMS log error {info['rms_log_error']:.3f}")
    key_of = {"host": "host", "fixed": "fixed", "gemm": "gemm_efficiency", "attention": "attention_efficiency",
              "elementwise": "elementwise_bytes_factor"}
    for n in fit_names:
        data["sources"][key_of[n]] = note
    data["held_out_error"] = band  # (a stack the calibration started from may carry one: never kept)
    return dict(stack=validate_stack(data, "calibrated"), data=data, values=values, before=before, after=after,
                held_out_ratios=ratios, held_out=None if band is None else held_out.summary(band), **info)


def write_stack(data: dict, path: Path) -> None:
    text = "# Written by `dlmcost calibrate`; a stack profile for --stack.\n" + yaml.safe_dump(data, sort_keys=False)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.__class__.__name__}") from None


def calibrate_what_data_pins(points: list[Point], base_dir: Path, base: Stack, name: str,
                             hardware: list[str] | None = None, order: tuple[tuple[str, ...], ...] = (("fixed", "gemm"), ("gemm",), ("fixed",)),
                             progress: Callable[[int, int], None] | None = None,
                             published: ErrorBand | None = None) -> dict:
    """Fit the largest parameter set of `order` the points can pin (for `measure --profile-out`).
    `progress(done, total)`: MAX_ITER for each set of `order` tried (a calibration's own count,
    refits included, scaled to it); the last call is (total, total) when a fit succeeds."""
    last, total = None, MAX_ITER * len(order)
    for tried, names in enumerate(order):
        offset = MAX_ITER * tried
        fit_progress = (lambda done, of, offset=offset: progress(offset + MAX_ITER * done // of, total)) \
            if progress else None
        try:
            result = calibrate(points, base_dir, base, list(names), name, hardware, fit_progress, published)
        except UsageError as exc:
            last = exc
            continue
        if progress:
            progress(total, total)
        return result
    raise last
