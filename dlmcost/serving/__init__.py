"""Serving: what a deployment delivers under load, the model `dlmcost serve` runs and `plan`
searches over.

    load ──> step times ──> simulation ──> what serving benchmarks report

    traffic.py    request lengths (numbers, percentiles, files) and rates: what a load is made of
    traces.py     request traces to replay (Azure, Mooncake, BurstGPT)
    loads.py      the loads `serve` puts on a deployment and the arrival times they generate
    decodings.py  which decodings a deployment runs: the ones asked for, or the model's own
    steptime.py   pass times from the cost engine (the one adapter to the analysis API)
    simulate/     one replica: continuous batching at step granularity, discrete events (its
                  tables, the API servers in front, and a loop per release policy)
    behaviour.py  how a deployment serves (release policy, running limit, passes per block)
    targets.py    service-level targets and the misses against them
    costs.py      $/hour, $/Mtok, J/token
    memory_binding.py  when a load runs into memory (the simulated first tokens an upper bound there)
    deployment/   `dlmcost serve`: a fixed deployment under one or more loads (its inputs and
                  prepared tables, one load measured, its capacity, its error band's ends)

A new load model goes in loads.py; a new release policy in simulate/ (a loop of its own beside
first_done.py and rounds.py, named in RELEASES) with its choice in behaviour.py; a new cost measure in costs.py.
"""
