"""Who runs the embedding step of `mmle score` beyond this process: one model replica per device, each
in a process of its own sharing the run's embedding cache (``devices``), and Ray actors past one
machine, as a Ray Data job whose results the driver writes into the cache (``ray_job``). Both run the
same loop as a plain run (harness.scoring.embedding) and give the same figures. Imports ``scoring``
and ``models``.
"""

from __future__ import annotations


def make_executor(settings, spec: str, devices: list[str], executor: str, replicas: int | None,
                  gpus_per_replica: float, cache_directory):
    """The executor ``mmle score``'s options name for the model ``spec``; None: this process alone."""
    if executor == "ray":
        from harness.execution.ray_job import RayExecutor

        return RayExecutor(spec, settings, replicas or max(len(devices), 1), gpus_per_replica)
    if len(devices) > 1:
        from harness.execution.devices import DeviceExecutor

        return DeviceExecutor(spec, settings, devices, cache_directory)
    return None
