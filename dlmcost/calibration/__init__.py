"""Grounding the model on measurements: `measure` times real forward passes on this machine
(measure.py), measured points are read and compared with predictions (measurements.py), and
`calibrate` fits a software stack to them (calibrate.py)."""
