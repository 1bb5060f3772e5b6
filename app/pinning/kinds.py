"""Every kind of target the pin flow writes and the journal records, and the one rule per kind: what its
value is and whether a name goes with it. A value is always a tuple of small integers, so the journal
keeps one shape of line for all of them; what the integers mean is the kind's:

  cpus        a CPU set: thread, irq, the masks an isolate moves (irqdefault, workqueue, rps, xps, wq),
              the watchdog's cpumask, a coremap cpuset's CPUs (cpuset; () = the cpuset is absent) and a
              systemd slice's AllowedCPUs (slice; () = unset, every CPU)
  scalar      one setting (app/pinning/settings.py): a machine-wide number (sysctl: its id picks it from
              SYSCTLS, sysctls and /sys/kernel/mm knobs; a number beyond 0-65535 in app/format.py
              number_value's three integers), transparent huge pages' mode (thp, id 0, an index into
              app/format.py THP_MODES), the latency coremap's guard holds /dev/cpu_dma_latency at
              (dmalatency, id 0; () = not held); per CPU (id = the CPU, CPU_SCALAR_KINDS): PM QoS
              resume latency (pmqos, () = n/a), cpufreq governor (governor, an index into GOVERNORS),
              energy_perf_bias (epb, 0-15)
  member      the cpuset cgroup a process (cgroup, id = pid) or a thread (cgroupthread, id = tid) is in,
              as an index into app/format.py CPUSET_NAMES
  flag        (0,) or (1,): cgroup v2's cpuset controller in the root's subtree_control (subtree);
              whether a running irqbalance leaves a CPU (irqbalancecpu, id = the CPU) or an IRQ
              (irqbalanceirq, id = the IRQ) alone (app/pinning/balancer.py; pid = that irqbalance)

A thread's scheduling (sched, id = the tid: app/pinning/sched.py) is (SCHED_* number, RT priority 0-99).

Named kinds carry a name in the journal's `netdev` field: a network device (rps, xps) or a workqueue
(wq), checked by `valid_name` before any path is built from it.
"""
from __future__ import annotations

import re

from app.sysroot import valid_netdev

MASK_KINDS = ("irqdefault", "workqueue", "rps", "xps", "wq", "watchdog")
NET_KINDS = ("rps", "xps")
NAMED_KINDS = ("rps", "xps", "wq")
CPU_KINDS = ("thread", "irq", *MASK_KINDS, "cpuset", "slice")
SCALAR_KINDS = ("sysctl", "pmqos", "thp", "governor", "epb", "dmalatency")
# Scalar kinds whose id is a CPU: a give-back of that CPU gives them back; the others are the
# machine's and go back with the last quiet CPU.
CPU_SCALAR_KINDS = ("pmqos", "governor", "epb")
MEMBER_KINDS = ("cgroup", "cgroupthread")
# Where a task may run (a cpuset, which one it is in, the controller, a systemd slice), not its own mask.
PLACEMENT_KINDS = ("cpuset", *MEMBER_KINDS, "subtree", "slice")
BALANCER_KINDS = ("irqbalancecpu", "irqbalanceirq")
FLAG_KINDS = ("subtree", *BALANCER_KINDS)
KINDS = (*CPU_KINDS, *SCALAR_KINDS, *MEMBER_KINDS, *FLAG_KINDS, "sched")
# Kinds whose target is a task: its journal line holds the task's start time, and an undo or restore
# leaves alone whatever has reused the id since.
TASK_KINDS = ("thread", "sched", "cgroup", "cgroupthread")
# The kinds an isolate changes besides threads and IRQs ("masks" in its preview).
SETTING_KINDS = (*MASK_KINDS, *SCALAR_KINDS, "cpuset", "slice", "subtree", *BALANCER_KINDS)

_WQ_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")


def valid_name(kind: str, name) -> bool:
    """Whether `name` may name a target of `kind` (and a path be built from it); None for unnamed kinds."""
    if kind in NET_KINDS:
        return valid_netdev(name)
    if kind == "wq":
        return type(name) is str and bool(_WQ_NAME.fullmatch(name)) and name not in (".", "..")
    return name is None
