"""The wakeup probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop."""
from __future__ import annotations

from probes.record import COMMON, EVERY, Field, Preset, ProbeRecord, attribute_field


RECORD = ProbeRecord(
    "wakeup", "Wakeup latency (timer sleep)", order=20, takes=COMMON, per_cpu=True, parallel=True, timed=True,
    histogram=True,
    progress="seconds",
    fields=(
        Field("interval_us", "interval", "int", "the period of the timer", default=1000, low=10, high=10 ** 7,
              unit="µs", suffix=" µs", metavar="US"),
        Field("no_dma_latency", "let the CPUs sleep deep", "flag",
              "do not hold /dev/cpu_dma_latency at 0 while it runs; by default it is held, as cyclictest holds it, "
              "which keeps the CPUs out of deep C-states whose exit latency would be measured as late wakeups",
              tag=lambda v: "deep sleep allowed" if v else ""),
        attribute_field("late wakeups", "between each of the latest wakeups' due time and its wakeup (as timerlat -a)"),
        EVERY,
    ),
    presets=(Preset("like cyclictest", "what `cyclictest -p 80 -i 1000` measures: SCHED_FIFO 80, a 1 ms timer, "
                    "/dev/cpu_dma_latency held at 0",
                    (("policy", "fifo"), ("priority", 80), ("interval_us", 1000), ("no_dma_latency", False))),))
