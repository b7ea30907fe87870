"""The limits on one command's work, checked before the work starts: configurations per sweep,
passes costed one by one, candidate deployments per plan (docs/limits.md), and the chunk that
bounds a sweep's memory; and one counted as the work runs, the preemptions of `serve` and `plan`
(read when they are called).

The chunk, the CLI's configuration limit, the limit on a command's total of passes (a sweep of
several models, plan, calibrate) and plan's on its candidates are read from this module when they
run (`limits.SWEEP_CHUNK`),
so that a test or a script that sets one here changes them. The defaults of `max_configs` and
`max_passes` in `api.analyze`, `api.sweep` and plan's step-time table are bound when their module
loads (sweep.py on its first use): to change one call, pass the argument.
"""

from __future__ import annotations

from ..engine.evaluation import passes_one_by_one
from ..errors import UsageError
from ..engine.frames import Grids, models_by_role
from ..inputs.models import ModelSpec

# Configurations evaluated at once: bounds the engine's memory. At 16k the engine's largest
# arrays (6 metrics x ops x configurations, about 7 MB) are reused by the allocator from call to
# call; at 64k each was a fresh mapping the kernel faulted in page by page (a 128k-configuration
# sweep spent 0.1-0.8 s of system time on it, against 0.02 s at 16k; smaller chunks pay more in
# per-call Python).
SWEEP_CHUNK = 16_384
MAX_SWEEP_CONFIGS = 200_000  # configurations one sweep evaluates unless asked for more; refused before any work
# Passes one command (analyze, sweep, plan, calibrate) may cost one by one, summed over its
# configurations and their AR baselines (`engine.passes_one_by_one`: the families without a closed-form sum). Each takes
# up to about a microsecond, so this bounds that work to some 20 s; refused before any work.
MAX_PASSES_ONE_BY_ONE = 20_000_000
# Candidate deployments one `plan` searches (each a few simulations: about 5 ms of CPU, so this
# bounds a plan to a minute or two; the default search is 576); refused before any work.
MAX_PLAN_CANDIDATES = 10_000
# Requests one `serve` or `plan` simulates in all, counted from its options before any is: serve's
# every simulation (each load point at the prediction and at its error band's two ends, the
# saturation run, --max-rate's bisection), plan's candidates x --requests (the candidate limit at
# the default 2,000 requests). A simulated request costs some 5 us, serve's in all about 90 s at
# the limit; without it --requests 1,000,000 over a long --rate list ran for hours.
MAX_SIMULATED_REQUESTS = 20_000_000
# Preemptions one `serve` or `plan` simulates in all (K/V on demand: a running request preempted
# where the memory ran out, and recomputed), counted as they happen over all its simulations
# (serving/simulate/work.py): no count of its options bounds them, since where memory holds few
# requests at their final lengths a request is preempted again and again (a serve of 100,000
# requests at 30% of an H100 preempted 2.9 million times). Measured on a busy 2-core machine, a
# preemption costs 6-10 us (serve and plan runs that preempt 0.13-2.9 million times, their whole
# time over their preemptions) against 1.4-3.7 us a request simulated plainly: about two requests'
# worth, so this bounds them as MAX_SIMULATED_REQUESTS bounds the requests, to some 90 s. Over it
# the command ends with one line (exit 2) when it is passed, having simulated that much.
MAX_PREEMPTIONS = 10_000_000
# Load points one `serve` simulates, over its deployments: each costs some 10 ms however few its
# requests (a point's three simulations), so 10,000 are a minute or two; a --rate list of 20,000
# points of 100 requests ran 230 s, and 64 deployments of it would run for hours.
MAX_LOAD_POINTS = 10_000
SWEEP_FEWER = "shorten some lists (GPUs, precisions, batches, lengths), use larger blocks, or fewer tokens or steps"


def check_configs(configs: int, limit: int | None) -> None:
    """Refuse a sweep of more than `limit` configurations (None: no limit), before it starts."""
    if limit is not None and configs > limit:
        raise UsageError(f"the sweep asks for {configs:,} configurations; at most {limit:,}: shorten some lists, "
                         f"or stream it with --format csv or jsonl and --allow-large")


def check_candidates(candidates: int, limit: int | None, what: str) -> None:
    """Refuse a plan of more than `limit` candidate deployments (None: no limit), before it
    starts; `what`: the product they come from."""
    if limit is not None and candidates > limit:
        raise UsageError(f"the plan asks for {candidates:,} candidate deployments ({what}); at most {limit:,}: "
                         f"shorten some lists (GPUs, TP sizes, precisions, K/V formats, decodings, batch limits), or split the "
                         f"search into runs of at most {limit:,} (e.g. one GPU or TP size each) and compare their "
                         f"--format json")


def count_passes(spec: ModelSpec, drafter: ModelSpec | None, grids: Grids) -> int:
    """The passes `frames.evaluate_frame` of these grids would cost one by one, its
    configurations' and their AR baselines', counted without costing any (schedules only)."""
    return int(passes_one_by_one(models_by_role(spec, drafter), grids.grid).sum() + passes_one_by_one(spec, grids.ar).sum())


def check_passes(passes: int, limit: int | None, fewer: str) -> None:
    """Refuse a call that would cost more than `limit` passes one by one (None: no limit), before
    it starts; `fewer` says what to reduce."""
    if limit is not None and passes > limit:
        raise UsageError(f"this would cost {passes:,} passes one by one (pass families without a closed-form sum, "
                         f"such as an MoE model's prefix-cache steps); at most {limit:,} in one call: {fewer}")


def check_simulated(requests: int, limit: int | None, what: str, fewer: str) -> None:
    """Refuse a call that would simulate more than `limit` requests in all (None: no limit),
    before it starts; `what`: the product they come from, `fewer`: what to reduce."""
    if limit is not None and requests > limit:
        raise UsageError(f"this would simulate {requests:,} requests ({what}); at most {limit:,} in one call: {fewer}")
