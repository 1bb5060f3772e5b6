"""The tracefs instance coremap records a jitter run's CPU with, and nothing else: started, stopped,
read and removed here, for the probe itself when it is root (probes/trace.py) and for coremap-helper
when it is not (app/pinning/trace_op.py).

A private instance (`instances/coremap-<pid>`: the global trace buffer and whatever else uses tracefs
stay untouched; Documentation/trace/ftrace.rst "Instances") records EVENTS, and the x86 system vectors
this kernel has (irq_vectors/*_entry and *_exit), on the given CPUs only (`tracing_cpumask`), with the
`mono` trace clock (CLOCK_MONOTONIC: the clock the probe's gap times are in). The event list, the
clock and the instance's name are fixed here; a caller gives only CPUs and a buffer size. Every write
goes through SysRoot (app/sysroot): no O_CREAT, never through a link that leaves the root, on the live
machine or a test tree only.

The pid in the name is the process that owns the instance (the probe, or the helper); `remove_stale`
removes the instances of processes that are gone, so one killed before it could clean up does not go
on tracing a CPU.
"""
from __future__ import annotations

import errno
import os
import re
import time

from app.errors import CoremapError, SysRootReadError
from app.parse.cpulist import format_cpumask
from app.sysroot import SysRoot

INSTANCE_PREFIX = "coremap-"
EVENTS = ("irq/irq_handler_entry", "irq/irq_handler_exit", "irq/softirq_entry", "irq/softirq_exit",
          "nmi/nmi_handler", "sched/sched_switch")
# per-CPU buffer: what one busy CPU writes in a second with room to spare (an idle CPU writes ~15 KB/s
# of these events, a CPU taking a NIC's interrupts a few MB/s), capped so a long run cannot take a
# large share of memory; if it still wraps, early gaps are reported "not traced"
_BUFFER_KB_PER_S = 1024
BUFFER_KB_MIN, BUFFER_KB_MAX = 2048, 65536
_OTHER_CPUS_KB = 64          # every other CPU's buffer: the instance records nothing there
_TEXT_LIMIT = 256 << 20      # the text of a full 64 MiB buffer is ~200 MB


class TraceUnavailable(CoremapError):
    """Tracing cannot run here (not root, tracefs not mounted, events missing, a write refused)."""


def buffer_kb(seconds: float) -> int:
    """The per-CPU buffer for a run of `seconds`."""
    return int(min(BUFFER_KB_MAX, max(BUFFER_KB_MIN, seconds * _BUFFER_KB_PER_S)))


def unavailable_reason(root: SysRoot) -> str | None:
    """Why this process cannot trace here, or None when it can (a cheap check for the UI)."""
    t = root.tracefs()
    if t.is_dir() and not os.access(t, os.R_OK | os.X_OK):
        # tracefs is mode 700 (Documentation/trace/ftrace.rst): a user cannot look inside at all
        return f"attributing gaps needs root: {t} is readable by root only"
    if not (t / "events").exists():
        return ("tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing) "
                "or this kernel has no tracing; gaps cannot be attributed")
    if not os.access(t / "instances", os.W_OK):
        return f"attributing gaps needs root: {t} is writable by root only"
    missing = [e for e in EVENTS if not (t / "events" / e).exists()]
    if missing:
        return f"this kernel has no trace events {', '.join(missing)}; gaps cannot be attributed"
    return None


def remove_stale(root: SysRoot) -> list[str]:
    """Remove coremap instances whose process is gone; the names removed."""
    gone = []
    for name in root.listdir(root.tracefs("instances")):
        if not name.startswith(INSTANCE_PREFIX):
            continue
        pid = name[len(INSTANCE_PREFIX):]
        if pid.isdigit() and not root.proc(pid).exists():
            try:
                root.remove_dir(root.tracefs("instances", name))
                gone.append(name)
            except OSError as e:
                # EBUSY: a reader still holds its trace_pipe open; ENOENT: another coremap removed it
                if e.errno not in (errno.EBUSY, errno.ENOENT):
                    raise
    return gone


class TraceInstance:
    """This process's instance recording EVENTS on `cpus` (see the module docstring): recording when
    made, `stop()` gives each CPU's trace text and stats, `close()` removes it. TraceUnavailable when
    it cannot be made."""

    def __init__(self, root: SysRoot, cpus, kb: int):
        self.root = root
        self.cpus = tuple(sorted(set(cpus)))
        self.kb = int(kb)
        self.name = f"{INSTANCE_PREFIX}{os.getpid()}"
        self.dir = root.tracefs("instances", self.name)
        self.vectors: list[str] = []
        self.started_ns: int | None = None
        remove_stale(root)
        try:
            root.make_dir(self.dir)
        except FileExistsError:
            pass   # this very process made it before (a second run in one process): it is reused
        except OSError as e:
            raise TraceUnavailable(f"cannot create the trace instance {self.dir}: {os.strerror(e.errno)}") from None
        try:
            self._setup()
        except OSError as e:
            self.close()
            raise TraceUnavailable(f"cannot set up tracing in {self.dir}: {e}") from None

    def _write(self, rel: str, value: str) -> None:
        fd = self.root.open_for_write(self.dir / rel)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)

    def _setup(self) -> None:
        self._write("tracing_on", "0")
        self._write("trace_clock", "mono")
        # every CPU's buffer small, then the probed CPUs' sized for the run
        self._write("buffer_size_kb", str(_OTHER_CPUS_KB))
        for cpu in self.cpus:
            self._write(f"per_cpu/cpu{cpu}/buffer_size_kb", str(self.kb))
        self._write("tracing_cpumask", format_cpumask(self.cpus))
        events = list(EVENTS)
        vec_dir = self.dir / "events" / "irq_vectors"
        if self.root.is_dir(vec_dir):
            self.vectors = [n for n in self.root.listdir(vec_dir) if n.endswith(("_entry", "_exit"))]
            events += [f"irq_vectors/{n}" for n in self.vectors]
        for e in events:
            self._write(f"events/{e}/enable", "1")
        self._write("trace", "")          # O_TRUNC of `trace` clears the buffer
        self.started_ns = time.monotonic_ns()
        self._write("tracing_on", "1")

    def stop(self) -> dict[int, tuple[str, dict]]:
        """Stop recording; {cpu: (its trace text, its stats)}."""
        self._write("tracing_on", "0")
        out = {}
        for cpu in self.cpus:
            try:
                text = self.root.read(self.dir / "per_cpu" / f"cpu{cpu}" / "trace", limit=_TEXT_LIMIT)
                stats = parse_stats(self.root.read(self.dir / "per_cpu" / f"cpu{cpu}" / "stats"))
            except SysRootReadError as e:
                raise TraceUnavailable(f"cannot read the trace of CPU {cpu}: {e}") from None
            out[cpu] = (text, stats)
        return out

    def close(self) -> None:
        try:
            self._write("tracing_on", "0")
        except OSError:
            pass   # the instance never got that far; the rmdir below still removes what exists
        try:
            self.root.remove_dir(self.dir)
        except FileNotFoundError:
            pass   # already gone (remove_stale of another coremap, or close() called twice)


def parse_stats(text: str) -> dict:
    """per_cpu/cpuN/stats: "entries: 1505", "overrun: 0", "oldest event ts:  8683.178894", ..."""
    out: dict = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if not sep:
            continue
        k, v = k.strip().replace(" ", "_"), v.strip()
        if re.fullmatch(r"\d{1,12}\.\d{6}", v):
            s, us = v.split(".")
            out[k + "_ns"] = int(s) * 1_000_000_000 + int(us) * 1_000
        elif re.fullmatch(r"\d{1,20}", v):
            out[k] = int(v)
    return out
