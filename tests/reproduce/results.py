"""A result as a run would make it from constructed rows, with a fixed run time and machine: what
the snapshots render and the render tests read, no run needed."""

from __future__ import annotations

from dpnc_reproduce import protocol

MACHINE = {
    "cpus": 2,
    "processor": "x86_64",
    "platform": "Linux-snapshot",
    "torch": "2.13.0",
    "threads": 1,
    "load_average_start": 0.5,
    "load_average_end": 0.75,
}


def constructed_result(experiment: protocol.Experiment, config, rows: list) -> protocol.Result:
    """A result as a run would make it, with a fixed run time and machine."""
    return protocol.Result(
        experiment,
        config,
        tuple(rows),
        tuple(experiment.claims(rows, config)),
        754.0,
        2,
        MACHINE,
        tuple(experiment.declare(config)),
    )
