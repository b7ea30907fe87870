"""analyze, sweep and the model commands, built from the engine: settings checked against the
model and its sampler defaults (prepare.py), the limits on one command's work (limits.py),
typed records from evaluated frames (records.py), the sweep in chunks (sweep.py), what `dlmcost
model` shows (model_info.py), and `--require` over results (requirements.py).

Above the engine and the inputs, below plan, calibration and the API.
"""
