"""Where the numbers come from: models, accelerators, software stacks, precisions, and the bounded
reading of every file and Hub answer.

    files.py        bounded, decoded reading of a user's or a bundled file (YAML/JSON)
    bundled.py      the bundled YAML files' parsed copies (no YAML parser at start-up)
    examples.py     the example files the README names, found inside the wheel
    models/         ModelSpec, the architecture families, bundled configs, the Hub client
    hardware.py     the accelerator database (hardware/*.yaml, one file per GPU)
    stacks.py       software-stack profiles (stacks/*.yaml)
    profiles.py     the efficiency profiles (ideal / realistic / a file)
    precision.py    the precisions: bytes per weight, activation and cache element

A new GPU is one YAML file in `hardware/`; a new stack one YAML file in `stacks/`; a new model
family one entry in `models/families.py`. Nothing here imports the engine or anything above it.
"""
