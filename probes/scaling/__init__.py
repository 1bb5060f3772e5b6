"""The scaling probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop; its
tab and picture are widgets/probe/scaling.py."""
from __future__ import annotations

from probes.record import Field, ProbeRecord, command_tag, plain_tag


RECORD = ProbeRecord(
    "scaling", "Scaling (throughput on 1, 2, 4… CPUs)", order=80, takes=("seconds", "policy", "priority"),
    cpus_optional=True, cpus_means="the CPUs to widen over (default: all)",
    seconds_means="The size of the work: what all runs would take at one CPU's speed",
    usage="-c LIST --work lock|atomic|private [--threads N]   or   -c LIST -- COMMAND",
    progress="share", no_cpus="all CPUs",
    view="Scaling", picture="throughput against CPUs, with the ideal line",
    fields=(
        Field("work", "work", "choice", "what the threads share", default="lock",
              choices=(("lock", "a shared lock"), ("atomic", "a shared atomic"), ("private", "private data")),
              unless="command", tag=plain_tag),
        Field("threads", "threads", "int", "threads", low=1, high=1024, unit="threads", special="one per CPU",
              metavar="N", unless="command"),
        Field("rounds", "rounds", "int", "rounds of alternated order (the widths forward, then backward)",
              low=1, high=100, unit="rounds",
              special="default (3; 1 for a command)"),
        Field("command", "command", "command", "a command to run at each width instead of the built-in work",
              placeholder="the built-in work, or a command to run at each width", tag=command_tag),
    ))
