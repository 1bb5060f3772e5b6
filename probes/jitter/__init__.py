"""The jitter probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop."""
from __future__ import annotations

from probes.record import COMMON, EVERY, Field, ProbeRecord, attribute_field


def _duty_tag(value) -> str:
    return "" if value == 100.0 else f"{value:g}%"


RECORD = ProbeRecord(
    "jitter", "Jitter (gaps in a busy loop)", order=10, takes=COMMON, per_cpu=True, parallel=True, timed=True,
    histogram=True,
    progress="seconds", gaps_from="threshold_ns",
    fields=(
        Field("duty", "duty cycle", "preset", "percent of time sampling", default=100.0, low=0.1, high=100.0,
              unit="percent", choices=((100.0, "100%"), (50.0, "50%"), (10.0, "10%"), (None, "custom")),
              custom=25.0, suffix=" %", metavar="P", tag=_duty_tag),
        Field("threshold_ns", "threshold", "int", "the shortest read-to-read interval that counts as a gap "
              "(finely binned, in the gap figures and percentiles)", default=1000, low=1, high=10 ** 9,
              unit="ns", metavar="NS", in_form=False),
        attribute_field("gaps", "during each large gap"),
        EVERY,
    ))
