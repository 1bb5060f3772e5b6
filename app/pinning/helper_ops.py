"""What coremap-helper (app/pinning/helper.py) does, one function per request. Each request is a typed
definition (a msgspec Struct tagged by its "op", no other key taken, every number in its range) that
helper.py decodes before any function here runs; the functions check what depends on the machine (CPUs
online, the target there, a value the setting takes). The helper runs with privilege, so nothing here
takes a path: every file is built by SysRoot or a writer of the pin flow from a checked kind, an
integer or a checked name.

  set_thread_affinity  tid, cpus             sched_setaffinity(tid, cpus)
  set_irq_affinity     irq, cpus             proc/irq/N/smp_affinity_list
  set_mask             kind, netdev, queue,  a mask an isolate moves (app/pinning/masks.py)
                       cpus
  set_setting          kind, id, value       a sysctl of app/pinning/settings.py SYSCTLS by index, THP's
                                             mode, or a CPU's PM QoS resume latency, cpufreq governor or
                                             energy_perf_bias; value as the journal keeps it
                                             (settings.valid_scalar says which); or
                                             whether the running irqbalance leaves CPU or IRQ `id`
                                             alone (app/pinning/balancer.py), value [0] or [1]
  set_cpuset           index, cpus           one of coremap's cpusets (1, 2): its CPUs, "" to remove it
  move_task            id, index, thread     a process (or, cgroup v1, a thread) into coremap's cpuset
                                             `index` (0 = the root)
  set_subtree          on                    cgroup v2: the root's cpuset controller on or off
  set_slice            index, cpus           a systemd unit's AllowedCPUs= (SLICE_NAMES), "" to unset
  irqbalance_ban_cpus  cpus                  IRQBALANCE_BANNED_CPULIST in irqbalance's configuration
"""
from __future__ import annotations

import errno
import os
from typing import Annotated, Literal

import msgspec

from app.atomic import write_atomic
from app.errors import CoremapError, CpuListError, SysRootReadError
from app.format import CPUSET_NAMES, SLICE_NAMES, format_value, offline_sentence, target_name
from app.machine.irqbalance import config_path, with_banned_cpus
from app.machine.topology import read_online_cpus
from app.parse.cpulist import format_cpulist, parse_cpulist
from app.parse.json_text import Meta
from app.pinning.balancer import BalancerWriter, running_irqbalance
from app.pinning.cgroups import CpusetWriter, MemberWriter, SliceWriter, SubtreeWriter
from app.pinning.kinds import MASK_KINDS, NAMED_KINDS, valid_name
from app.pinning.masks import mask_path, write_mask
from app.pinning.refusals import PinWriteError
from app.pinning.kinds import CPU_SCALAR_KINDS
from app.pinning.settings import SYSCTLS, ScalarWriter, valid_scalar
from app.pinning.targets import PinTarget
from app.sysroot import SysRoot

MAX_TID = 4194304               # PID_MAX_LIMIT on 64-bit (include/linux/threads.h)
MAX_IRQ = 65535
MAX_CONFIG = 1 << 16            # irqbalance's environment file is a few hundred bytes
MAX_VALUE = 65535


class Refused(Exception):
    """A request the helper will not carry out; str() is the reply's error."""


def ranged(lo: int, hi: int):
    return Annotated[int, Meta(ge=lo, le=hi)]


Tid = ranged(1, MAX_TID)
# A CPU list as text ("2-5,8"), parsed and checked against the online CPUs by cpus_field.
CpuText = Annotated[str, Meta(max_length=1024)]


class Request(msgspec.Struct, tag_field="op", forbid_unknown_fields=True, frozen=True):
    """A request: its "op" names its definition; a key it does not define is refused."""


class Hello(Request, tag="hello"):
    pass


class SetThreadAffinity(Request, tag="set_thread_affinity"):
    tid: Tid
    cpus: CpuText


class SetIrqAffinity(Request, tag="set_irq_affinity"):
    irq: ranged(0, MAX_IRQ)
    cpus: CpuText


class SetMask(Request, tag="set_mask"):
    kind: Literal[MASK_KINDS]
    netdev: Annotated[str, Meta(max_length=64)] | None
    queue: ranged(0, 65535)
    cpus: CpuText


class SetSetting(Request, tag="set_setting"):
    kind: Literal[("sysctl", "thp", *CPU_SCALAR_KINDS, "irqbalancecpu", "irqbalanceirq")]
    id: ranged(0, 65535)            # the range its kind gives is checked by set_setting
    value: Annotated[tuple[ranged(0, MAX_VALUE), ...], Meta(max_length=3)]


class SetCpuset(Request, tag="set_cpuset"):
    index: ranged(1, len(CPUSET_NAMES) - 1)
    cpus: CpuText


class MoveTask(Request, tag="move_task"):
    id: Tid
    index: ranged(0, len(CPUSET_NAMES) - 1)
    thread: bool


class SetSubtree(Request, tag="set_subtree"):
    on: bool


class SetSlice(Request, tag="set_slice"):
    index: ranged(0, len(SLICE_NAMES) - 1)
    cpus: CpuText


class BanCpus(Request, tag="irqbalance_ban_cpus"):
    cpus: CpuText


def _in(value: int, name: str, lo: int, hi: int) -> int:
    """A range that depends on another field (set_setting's id, by its kind)."""
    if not lo <= value <= hi:
        raise Refused(f"request: {name}: expected int in {lo}..{hi}")
    return value


def cpus_field(root: SysRoot, value: str, *, empty_ok: bool = False) -> tuple[int, ...]:
    """A CPU list string ("2-5,8") of online CPUs; "" only where `empty_ok` (remove, unset)."""
    try:
        cpus = parse_cpulist(value, what="cpus")
    except CpuListError as e:
        raise Refused(str(e)) from None
    if not cpus and not empty_ok:
        raise Refused("cpus is empty")
    online = set(read_online_cpus(root))
    off = sorted(set(cpus) - online)
    if off:
        raise Refused(offline_sentence(off, online))
    return cpus


def os_error(e: OSError, what: str) -> dict:
    name = errno.errorcode.get(e.errno or 0, "EIO")
    return {"ok": False, "error": f"{what}: {os.strerror(e.errno or errno.EIO)}", "errno": name}


def _live(root: SysRoot, what: str) -> None:
    if not root.writable:
        raise Refused(f"{what} can be set only on the live machine")


def set_thread_affinity(root: SysRoot, req: SetThreadAffinity) -> dict:
    tid = req.tid
    cpus = cpus_field(root, req.cpus)
    if not root.is_live:
        raise Refused("threads can be set only on the live machine")
    # proc/TID resolves for any thread id, listed or not (fs/proc/base.c proc_pid_lookup).
    if not root.exists(root.proc(tid, "status")):
        raise Refused(f"no thread {tid}")
    try:
        os.sched_setaffinity(tid, cpus)
    except OSError as e:
        return os_error(e, f"thread {tid}")
    return {"ok": True, "cpus": format_cpulist(os.sched_getaffinity(tid))}


def set_irq_affinity(root: SysRoot, req: SetIrqAffinity) -> dict:
    irq = req.irq
    cpus = cpus_field(root, req.cpus)
    path = root.irq_dir(irq, "smp_affinity_list")
    if not root.exists(path):
        raise Refused(f"no IRQ {irq}")
    try:
        # O_NOFOLLOW: the path is built from an integer, but never follow a link planted there.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, (format_cpulist(cpus) + "\n").encode())
        finally:
            os.close(fd)
    except OSError as e:
        return os_error(e, f"IRQ {irq}")
    return {"ok": True}


def set_mask(root: SysRoot, req: SetMask) -> dict:
    kind, netdev, queue = req.kind, req.netdev, req.queue
    if kind in NAMED_KINDS:
        if not valid_name(kind, netdev):
            raise Refused("netdev must name a network device (1-15 letters, digits or _.@+-) or a workqueue "
                          "(1-32 letters, digits or _.-)")
    elif netdev is not None or queue != 0:
        raise Refused(f"{kind} takes netdev null and queue 0")
    cpus = cpus_field(root, req.cpus)
    what = target_name(kind, queue, netdev=netdev)
    path = mask_path(root, kind, queue, netdev)
    if not root.exists(path):
        raise Refused(f"no {what} on this machine")
    try:
        write_mask(root, path, cpus, kind)
    except OSError as e:
        return os_error(e, what)
    return {"ok": True}


def set_setting(root: SysRoot, req: SetSetting) -> dict:
    kind, ident, value = req.kind, req.id, req.value
    if kind in ("irqbalancecpu", "irqbalanceirq"):
        return _balancer(root, kind, ident, value)
    if kind == "sysctl":
        _in(ident, "id", 0, len(SYSCTLS) - 1)
    elif kind == "thp":
        _in(ident, "id", 0, 0)
    elif ident not in read_online_cpus(root):
        raise Refused(f"CPU {ident} is not online")
    if not valid_scalar(kind, ident, value):
        what = SYSCTLS[ident].name if kind == "sysctl" else target_name(kind, ident)
        raise Refused(f"{format_value(kind, value)} is not a value for {what}")
    _live(root, "settings")
    t = PinTarget(kind, ident)
    try:
        ScalarWriter(root).write(t, value)
    except OSError as e:
        return os_error(e, t.describe())
    return {"ok": True}


def _balancer(root: SysRoot, kind: str, ident: int, value: tuple[int, ...]) -> dict:
    if kind == "irqbalancecpu" and ident not in read_online_cpus(root):
        raise Refused(f"CPU {ident} is not online")
    if value not in ((0,), (1,)):
        raise Refused("value must be [0] or [1]")
    if not root.is_live:
        raise Refused("irqbalance is spoken to only on the live machine")
    pid = running_irqbalance(root)
    if pid is None:
        raise Refused("irqbalance is not running (or has no socket)")
    t = PinTarget(kind, ident, pid, "irqbalance")
    try:
        BalancerWriter(root).write(t, tuple(value))
    except (OSError, PinWriteError) as e:
        raise Refused(str(e)) from None
    return {"ok": True}


def set_cpuset(root: SysRoot, req: SetCpuset) -> dict:
    cpus = cpus_field(root, req.cpus, empty_ok=True)
    _live(root, "cpusets")
    return _write(CpusetWriter(root), PinTarget("cpuset", req.index), cpus)


def move_task(root: SysRoot, req: MoveTask) -> dict:
    ident, index, thread = req.id, req.index, req.thread
    _live(root, "cpusets")
    if not root.exists(root.proc(ident, "status")):
        raise Refused(f"no {'thread' if thread else 'process'} {ident}")
    return _write(MemberWriter(root), PinTarget("cgroupthread" if thread else "cgroup", ident), (index,))


def set_subtree(root: SysRoot, req: SetSubtree) -> dict:
    _live(root, "the cpuset controller")
    return _write(SubtreeWriter(root), PinTarget("subtree", 0), (1,) if req.on else (0,))


def set_slice(root: SysRoot, req: SetSlice) -> dict:
    cpus = cpus_field(root, req.cpus, empty_ok=True)
    if not root.is_live:
        raise Refused("systemd units can be set only on the live machine")
    return _write(SliceWriter(root), PinTarget("slice", req.index), cpus)


def ban_cpus(root: SysRoot, req: BanCpus) -> dict:
    cpus = cpus_field(root, req.cpus)
    if not root.writable:
        raise Refused("irqbalance's configuration can be written only on the live machine")
    path = config_path(root)
    try:
        old = root.read_optional(path, limit=MAX_CONFIG) or ""
    except SysRootReadError as e:
        raise Refused(str(e)) from None
    try:
        write_atomic(path, with_banned_cpus(old, cpus).encode())
    except CoremapError as e:
        raise Refused(str(e)) from None
    return {"ok": True, "path": str(path)}


def _write(writer, target: PinTarget, value) -> dict:
    try:
        writer.write(target, value)
    except ValueError as e:
        raise Refused(str(e)) from None
    except OSError as e:
        return os_error(e, target.describe())
    return {"ok": True}


# a request's definition -> its function
OPS = {SetThreadAffinity: set_thread_affinity, SetIrqAffinity: set_irq_affinity, SetMask: set_mask,
       SetSetting: set_setting, SetCpuset: set_cpuset, MoveTask: move_task, SetSubtree: set_subtree,
       SetSlice: set_slice, BanCpus: ban_cpus}
