"""The CPU masks an isolate moves besides threads and IRQs (issue 13): where each lives, how it is
read and written, and what the kernel's refusals mean.

  irqdefault  proc/irq/default_smp_affinity: the affinity every IRQ gets when it is set up
              (Documentation/core-api/irq/irq-affinity.rst)
  workqueue   sys/devices/virtual/workqueue/cpumask: where unbound workqueues' workers may run
              (Documentation/core-api/workqueue.rst, "Affinity Scopes"; kernel/workqueue.c
              workqueue_set_unbound_cpumask: -EINVAL when no usable CPU is left)
  rps, xps    sys/class/net/DEV/queues/rx-N/rps_cpus and tx-N/xps_cpus: which CPUs process a receive
              queue's packets (RPS) and which transmit on a queue (XPS); a zero mask turns RPS off
              (Documentation/networking/scaling.rst)
  wq          sys/devices/virtual/workqueue/NAME/cpumask: one unbound workqueue made visible in sysfs
              (WQ_SYSFS: writeback, blkcg_punt_bio, ...), which tuned's cpu-partitioning also sets
  watchdog    proc/sys/kernel/watchdog_cpumask: the CPUs the soft and hard lockup detectors run on
              (Documentation/admin-guide/sysctl/kernel.rst, watchdog_cpumask; a CPU list)

All but watchdog are hex masks (lib/bitmap.c bitmap_parse: 32-bit words, most significant first),
written with one write(2) through SysRoot.open_for_write. Paths come from SysRoot, built from a
checked name (app/pinning/kinds.py valid_name) and an integer, never from text a journal or a request
carried.
"""
from __future__ import annotations

import os
from pathlib import Path

from app.errors import CpuListError, SysRootReadError
from app.parse.cpulist import format_cpulist, format_cpumask, parse_cpulist, parse_cpumask
from app.pinning.kinds import MASK_KINDS, NET_KINDS, valid_name
from app.sysroot import SysRoot

LIST_KINDS = ("watchdog",)          # masks written as a CPU list, not in hex


def mask_path(root: SysRoot, kind: str, ident: int = 0, netdev: str | None = None) -> Path:
    """The file of a mask target (ValueError for a kind or a device name coremap does not write)."""
    if kind == "irqdefault":
        return root.proc("irq", "default_smp_affinity")
    if kind == "workqueue":
        return root.workqueue_cpumask()
    if kind in NET_KINDS:
        return root.net_queue_mask(netdev, kind, ident)
    if kind == "wq" and valid_name(kind, netdev):
        return root.sys("devices", "virtual", "workqueue", netdev, "cpumask")
    if kind == "watchdog":
        return root.proc("sys", "kernel", "watchdog_cpumask")
    raise ValueError(f"mask kind {kind!r} {str(netdev)[:40]!r}: expected one of {', '.join(MASK_KINDS)}")


def read_mask(root: SysRoot, path: Path, kind: str = "") -> tuple[int, ...] | None:
    """The CPUs of a mask file; None when it is absent (no such queue, a kernel without it). A file
    that is there but holds no mask raises SysRootReadError."""
    text = root.read_optional(path)
    if text is None:
        return None
    try:
        return (parse_cpulist if kind in LIST_KINDS else parse_cpumask)(text, what=str(path))
    except CpuListError as e:
        raise SysRootReadError(path, f"not a CPU mask ({e})") from None


def write_mask(root: SysRoot, path: Path, cpus, kind: str = "") -> None:
    """One write(2) of the mask; raises OSError as the kernel does."""
    fd = root.open_for_write(path)
    try:
        os.write(fd, ((format_cpulist if kind in LIST_KINDS else format_cpumask)(cpus) + "\n").encode())
    finally:
        os.close(fd)
