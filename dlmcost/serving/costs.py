"""Money and energy of a deployment, the formulas `serve` reports and `plan` ranks by.

    $/hour          = GPUs x price per GPU-hour
    $/Mtok          = $/hour / (output tok/s x 3600) x 1e6
    J/token         = GPUs x board power (W) x power utilisation / output tok/s

$/Mtok is at the offered load: provisioned GPUs are paid for whether busy or not. A GPU without a
price has no costs (None). List prices move (a year can double or halve them), so $/Mtok comes
with a range too: the same formula at the low and high ends of the hardware file's public price
range (`price_range`; a price the user gave has no range: both ends are it).
"""

from __future__ import annotations


def usd_per_hour(gpus: int, price_per_gpu_hour: float) -> float:
    return gpus * price_per_gpu_hour


def usd_per_mtok(usd_hour: float, output_tokens_per_s: float) -> float:
    return usd_hour / (output_tokens_per_s * 3600.0) * 1e6


def joules_per_token(gpus: int, board_power_w: float | None, power_utilisation: float,
                     output_tokens_per_s: float) -> float | None:
    if board_power_w is None:
        return None
    return gpus * board_power_w * power_utilisation / output_tokens_per_s


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
