"""Money and energy of a deployment, the formulas `serve` reports and `plan` ranks by.

    $/hour          = GPUs x price per GPU-hour
    $/Mtok          = $/hour / (output tok/s x 3600) x 1e6
    power per GPU   = board power (W) x (idle x (1 - busy) + power utilisation x busy)
    J/token         = GPUs x power per GPU / output tok/s

$/Mtok is at the offered load: provisioned GPUs are paid for whether busy or not. A GPU without a
price has no costs (None). List prices move (a year can double or halve them), so $/Mtok comes
with a range too: the same formula at the low and high ends of the hardware file's public price
range (`price_range`; a price the user gave has no range: both ends are it). Energy: a board draws
its envelope (TDP / TBP, times the power utilisation) while it runs passes and IDLE_POWER_FRACTION
of it while it waits; `busy` is the simulated share of the time a replica runs passes, so a lightly
loaded deployment pays for its idle boards per token too, and two rows with the same GPUs differ by
how busy they keep them.
"""

from __future__ import annotations

# Share of the board power envelope an accelerator draws while idle with a model loaded (a CUDA
# context holds its clocks above bare idle). NVIDIA's DGX user guide's Redfish example reads 64 W on a
# GPU whose power limit is 700 W (a board at rest: 9%); arXiv:2605.23918 ("The Model Parking Tax")
# measures a loaded CUDA context at 26-50 W above bare idle on H100 and A100: about 90-115 W of
# 700 W, 13-16%.
IDLE_POWER_FRACTION = 0.15


def usd_per_hour(gpus: int, price_per_gpu_hour: float) -> float:
    return gpus * price_per_gpu_hour


def usd_per_mtok(usd_hour: float, output_tokens_per_s: float) -> float:
    return usd_hour / (output_tokens_per_s * 3600.0) * 1e6


def power_per_gpu_w(board_power_w: float, power_utilisation: float, busy_fraction: float) -> float:
    """Mean draw of one board busy `busy_fraction` of the time (idle the rest)."""
    return board_power_w * (IDLE_POWER_FRACTION * (1.0 - busy_fraction) + power_utilisation * busy_fraction)


def joules_per_token(gpus: int, board_power_w: float | None, power_utilisation: float,
                     output_tokens_per_s: float, *, busy_fraction: float) -> float | None:
    if board_power_w is None:
        return None
    return gpus * power_per_gpu_w(board_power_w, power_utilisation, busy_fraction) / output_tokens_per_s


def price_range(price: float | None, source: str | None, listed) -> tuple[float | None, float | None]:
    """The low and high ends of a GPU's price per GPU-hour: the hardware file's `low` / `high`
    (`listed`: its `price_per_hour`, or None) when the price is its list price, each end missing
    from the file None; the price itself at both ends when the user gave it; (None, None) without
    a price."""
    if price is None:
        return None, None
    if source == "user" or listed is None:
        return price, price
    return listed.low, listed.high


def usd_per_mtok_range(gpus: int, low: float | None, high: float | None,
                       output_tokens_per_s: float) -> tuple[float | None, float | None]:
    """$/Mtok at the low and high ends of the price range (None where an end is missing, or
    nothing was served)."""
    if output_tokens_per_s <= 0:
        return None, None
    return tuple(None if p is None else usd_per_mtok(usd_per_hour(gpus, p), output_tokens_per_s)
                 for p in (low, high))
