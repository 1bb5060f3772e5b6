"""The messaging probe's record (probes/record.py). Beside it: measure.py, its runner, and _loop.c, its loop; its
tab and picture are widgets/probe/messaging.py."""
from __future__ import annotations

from probes.record import Field, ProbeRecord, plain_tag


RECORD = ProbeRecord(
    "messaging", "Messaging (sender and receiver placements)", order=60, takes=("seconds",), cpus_optional=True,
    cpus_means="the CPUs `auto` places among (default: all)",
    seconds_means="Measured time per placement (cut into its rounds)",
    usage="--placement auto|A:B,... --transport shm|pipe|udp --rates 10k,100k,1M,max --seconds S",
    progress="share", measured_cpus=True, label_cpus=False,
    view="Messaging",
    picture="messages per second per 100 ms window, one line per placement (at each pace in turn); under it, "
            "the CPUs the unpinned sender and receiver ran on",
    fields=(
        Field("placement", "placements", "text",
              "auto runs every kind of placement this machine offers among the CPUs (all when none are "
              "given): same CPU, SMT siblings, same L3, other L3, other node, and unpinned; or give "
              "sender:receiver pairs and 'unpinned'", default="auto", metavar="auto|A:B,...",
              placeholder="auto, or sender:receiver pairs such as 0:1,1:1,unpinned", tag=plain_tag),
        Field("transport", "transport", "choice", "how the messages travel", default="shm",
              choices=(("shm", "shared-memory ring"), ("pipe", "pipe"), ("udp", "UDP on loopback")), tag=plain_tag),
        Field("rates", "sender's pace", "text", "the sender's paces, messages per second (10k, 100k, 1M, ...) and "
              "max (as fast as it can); each placement's time is shared among them, with latency percentiles "
              "at each", default="10k,100k,1M,max", metavar="RATE,...", placeholder="10k,100k,1M,max"),
        Field("rounds", "rounds", "int", "each placement's time is cut into this many segments per pace, run "
              "in alternated order", default=2, low=1, high=100, unit="rounds"),
    ))
