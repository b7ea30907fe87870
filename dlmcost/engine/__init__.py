"""The arithmetic: from a model, a workload and a GPU to FLOPs, bytes, times and memory.

    workload.py     the workload's knobs (S, Lg, b, B, Lp, precision...) as validated settings
    schemes/        one function per decoding scheme, from knobs to pass families; the registry
    cost.py         per-op FLOPs and bytes of one forward pass
    sums.py         exact sums over a pass family's shapes
    roofline.py     a GPU's rates and the roofline time and verdict of an op
    stack_time.py   a software stack's host time and efficiencies on top of the roofline
    memory.py       weights, cache and activation memory at the peak shape
    evaluation.py   the vectorised evaluation of a grid of configurations on GPUs
    verdict.py      memory- or compute-bound: the achievable ridge, the verdict and the knees
    frames.py       grids of configurations and their evaluated columns
    columns.py      per-configuration columns (shared constant views in large grids)

Nothing here prints, reads a file, or knows about the CLI; it imports only `dlmcost.inputs` and
the ground floor. A new decoding scheme is one module in `schemes/`.
"""
