"""dlmcost: a capacity planner for diffusion language model inference."""

__version__ = "0.1.0"
