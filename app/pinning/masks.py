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

All are hex masks (lib/bitmap.c bitmap_parse: 32-bit words, most significant first), written with
one write(2) through SysRoot.open_for_write. Paths come from SysRoot, built from a checked device
name and an integer, never from text a journal or a request carried.
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

from app.errors import CpuListError, SysRootReadError
from app.format import format_cpus
from app.parse.cpulist import format_cpumask, parse_cpumask
from app.sysroot import SysRoot

MASK_KINDS = ("irqdefault", "workqueue", "rps", "xps")
NET_KINDS = ("rps", "xps")


def describe_mask(kind: str, ident: int, netdev: str | None) -> str:
    """"default IRQ affinity", "workqueue cpumask", "RPS eth0 rx-0", "XPS eth0 tx-3"."""
    if kind == "irqdefault":
        return "default IRQ affinity"
    if kind == "workqueue":
        return "workqueue cpumask"
    queue = f"rx-{ident}" if kind == "rps" else f"tx-{ident}"
    return f"{kind.upper()} {netdev} {queue}"


def mask_path(root: SysRoot, kind: str, ident: int = 0, netdev: str | None = None) -> Path:
    """The file of a mask target (ValueError for a kind or a device name coremap does not write)."""
    if kind == "irqdefault":
        return root.proc("irq", "default_smp_affinity")
    if kind == "workqueue":
        return root.workqueue_cpumask()
    if kind in NET_KINDS:
        return root.net_queue_mask(netdev, kind, ident)
    raise ValueError(f"mask kind {kind!r}: expected one of {', '.join(MASK_KINDS)}")


def read_mask(root: SysRoot, path: Path) -> tuple[int, ...] | None:
    """The CPUs of a mask file; None when it is absent (no such queue, a kernel without it). A file
    that is there but holds no mask raises SysRootReadError."""
    text = root.read_optional(path)
    if text is None:
        return None
    try:
        return parse_cpumask(text, what=str(path))
    except CpuListError as e:
        raise SysRootReadError(path, f"not a CPU mask ({e})") from None


def write_mask(root: SysRoot, path: Path, cpus) -> None:
    """One write(2) of the mask; raises OSError as the kernel does."""
    fd = root.open_for_write(path)
    try:
        os.write(fd, (format_cpumask(cpus) + "\n").encode())
    finally:
        os.close(fd)


def mask_error(what: str, e: OSError, cpus) -> tuple[str, str]:
    """(code, sentence) for a refused mask write, in the codes PinResult uses."""
    if e.errno in (errno.EPERM, errno.EACCES):
        return "denied", f"{what}: only root may change it; run coremap as root or through coremap-helper"
    if e.errno == errno.EINVAL:
        return "invalid", (f"the kernel refused CPUs {format_cpus(cpus)} for the {what} (none of them may take "
                           "it: offline, or isolated from the kernel's own work); choose other CPUs")
    if e.errno == errno.ENOENT:
        return "gone", f"{what} has gone (the device or queue was removed)"
    if e.errno == errno.EXDEV:
        return "invalid", f"{what}: its file leads outside the tree (a link out of it); nothing was written"
    return "denied", f"{what}: {os.strerror(e.errno or 0)}"
