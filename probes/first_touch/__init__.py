"""The first-touch probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop; its
tab and picture are widgets/probe/first_touch.py."""
from __future__ import annotations

from app.format import format_size
from probes.record import Field, ProbeRecord, command_tag


RECORD = ProbeRecord(
    "first-touch", "First touch (cost of fresh pages)", order=70, takes=("unbound",), per_cpu=True, progress="share",
    usage="-c N --size 1G [--node M] [--thp never|madvise|always]   or   -c N -- JAVA COMMAND",
    view="First touch",
    picture="time per page along the mapping, first touch and second",
    fields=(
        Field("size", "size", "size", "memory to map and touch: 64M, 512M, 1G… (powers of 1024)",
              default=1 << 30, low=1, high=1 << 50, metavar="SIZE", tag=format_size, unless="command"),
        Field("node", "memory on", "int", "bind the memory to NUMA node M", low=0, high=1023, unit="(NUMA node)",
              special="each node with memory", prefix="node ", metavar="M", unless="command",
              tag=lambda v: "" if v is None else f"memory on node {v}"),
        Field("thp", "huge pages", "choice", "transparent huge pages for the mapping",
              choices=((None, "no hint (the system's mode)"), ("never", "never"), ("madvise", "madvise"),
                       ("always", "always")), tag=lambda v: f"thp {v}" if v else "", unless="command"),
        Field("command", "JVM command", "command", "a JVM command (java -Xms8g -Xmx8g ...) run twice, without and "
              "with -XX:+AlwaysPreTouch, instead of the probe's own mapping: start-up time and system time",
              placeholder="the probe's own mapping, or a java command to run with and without AlwaysPreTouch",
              tag=command_tag),
    ))
