"""What an isolate moves one by one, and the kernel settings it changes: every IRQ whose requested or
effective affinity touches the quiet CPUs, every thread allowed there that no cpuset keeps off them
(kernel threads, and every thread where the machine has no cpuset), the masks of background work, and
the knobs of tuned's cpu-partitioning that can be set at run time.

Each target's new value is its mask minus the quiet CPUs; a target left with no CPU gets the
housekeeping CPUs. What stays, and why: per-CPU kernel threads (PF_NO_SETAFFINITY: the kernel refuses),
managed IRQs (where debugfs says so; elsewhere the write's EIO says it), threads whose cpuset has no
other CPU, and targets a coremap pin in effect put on those CPUs on purpose (the user's pins stay).
"""
from __future__ import annotations

import errno
import os
import time

from app.errors import CpuListError, SysRootReadError
from app.format import cpus_word, format_cpus
from app.machine.cpusets import cpuset_cpus_at, read_cpuset_path
from app.machine.interrupts import irq_is_managed, read_irq_cpus
from app.machine.threads import TaskGone, TaskSample, ThreadsSample, read_task, read_tasks
from app.machine.topology import read_online_cpus
from app.pinning.balancer import ban_steps, running_irqbalance
from app.pinning.kinds import BALANCER_KINDS, SCALAR_KINDS, valid_name
from app.pinning.ledger import Ledger
from app.pinning.masks import mask_path, read_mask
from app.pinning.service import AffinityService
from app.pinning.settings import QUIET_SYSCTLS, ScalarWriter, pmqos_target, sysctl_target
from app.pinning.targets import PinTarget
from app.quiet.knobs import knob_moves
from app.quiet.preview import QuietMove, QuietStay
from app.sysroot import SysRoot, valid_netdev

def _new_mask(mask, quiet: set[int], hk) -> tuple[tuple[int, ...], str]:
    new = tuple(sorted(set(mask) - quiet))
    if new:
        return new, ""
    return tuple(hk), "had only quiet CPUs: gets the housekeeping CPUs"


def given_back(mask, m, back: set[int]) -> tuple[int, ...]:
    """A mask after a give-back of `back`, for a target an isolate moved (`m`, Ledger.moved): its mask now,
    minus what the isolate added, plus what it had among the CPUs given back, so a change made since
    stays (app/quiet/isolate.py, app/quiet/pins_back.py)."""
    return tuple(sorted((set(mask) - m.added) | (m.removed & back)))


def _kept_pin(state: Ledger, key, quiet: set[int], now) -> str:
    """Why a target stays where a coremap pin in effect put it on quiet CPUs, or ""."""
    e = state.pinned.get(key)
    if e is None or not set(e.requested) & quiet or tuple(now) != (e.after or e.requested):
        return ""
    return f"pinned to {cpus_word(e.requested)} by coremap (#{e.batch}): your pin stays"



def irqs(root, service, state, quiet, hk, moves, stays) -> None:
    """Every IRQ folder of proc/irq (IRQs without a handler too: they may be started later)."""
    for name in sorted((n for n in root.listdir(root.proc("irq")) if n.isdigit()), key=int):
        try:
            req, eff = read_irq_cpus(root, name)
        except (SysRootReadError, CpuListError):
            continue                 # freed between listing and reading (a driver unloaded), or unreadable
        if req is None or not (set(req) | set(eff or ())) & quiet:
            continue
        label = ",".join(n for n in root.listdir(root.irq_dir(name)) if root.is_dir(root.irq_dir(name, n)))
        t = PinTarget("irq", int(name), None, label)
        if irq_is_managed(root, name):
            stays.append(QuietStay(t, "managed", "a managed IRQ: the kernel spreads it over the CPUs itself and "
                                                 "refuses to move it (isolcpus=managed_irq keeps it off at boot)",
                                   cpus=req))
            continue
        kept = _kept_pin(state, t.key, quiet, req)
        if kept:
            stays.append(QuietStay(t, "pinned", kept, cpus=req))
            continue
        new, note = _new_mask(req, quiet, hk)
        if new == req:
            note = f"delivered on CPU {format_cpus(eff)}: rewriting its mask moves it"
        moves.append(QuietMove(t, req, new, "irq", note))



def placed_there(t: TaskSample, placed: set[int]) -> bool:
    """Whether the user put thread `t` on the CPUs `placed` (those being made quiet): its mask lies
    within them. A kernel thread's mask is the kernel's, not the user's; a zombie has none to keep."""
    return (bool(placed) and not t.kthread and not t.no_setaffinity and t.allowed is not None
            and t.state not in ("Z", "X") and set(t.allowed) <= placed)


def threads(root, service, state, quiet, hk, moves, stays, sample: ThreadsSample, skip_pids=frozenset(),
            placed: set[int] = frozenset()) -> None:
    """Threads allowed on the quiet CPUs, but those of `skip_pids` (processes a cpuset moves whole);
    one placed there by the user (placed_there) stays and is listed."""
    cpusets: dict[str, tuple | None] = {}
    found = []
    for t in sample.tasks.values():
        if t.state in ("Z", "X") or t.allowed is None or not set(t.allowed) & quiet or t.pid in skip_pids:
            continue
        found.append(t)
    found.sort(key=lambda t: (t.kthread, t.pid, t.tid))
    for t in found:
        target = PinTarget("thread", t.tid, t.pid, t.comm)
        if t.no_setaffinity:
            stays.append(QuietStay(target, "kthread", _kthread_reason(t), cpus=t.allowed))
            continue
        kept = _kept_pin(state, target.key, quiet, t.allowed)
        if kept:
            stays.append(QuietStay(target, "pinned", kept, cpus=t.allowed))
            continue
        if placed_there(t, placed):
            stays.append(QuietStay(target, "placed", f"left: pinned there by you (its mask allows only "
                                   f"{cpus_word(t.allowed)}); --move-pinned, or the preview's tick box, moves it",
                                   cpus=t.allowed))
            continue
        new, note = _new_mask(t.allowed, quiet, hk)
        if not set(new) <= set(t.allowed):
            limit = _cpuset_of(service, t, cpusets)
            if limit is not None and not set(new) & set(limit[1]):
                stays.append(QuietStay(target, "cpuset", f"its cpuset {limit[0]} allows only "
                                                         f"{cpus_word(limit[1])}", cpus=t.allowed))
                continue
        moves.append(QuietMove(target, t.allowed, new, "kthread" if t.kthread else "thread", note))


def _kthread_reason(t: TaskSample) -> str:
    if t.comm.startswith(("kworker/u", "kworker/R-")):
        return "a workqueue worker (PF_NO_SETAFFINITY): it follows the workqueue cpumask, moved above"
    return "a per-CPU kernel thread (PF_NO_SETAFFINITY): the kernel refuses to move it"


def _cpuset_of(service: AffinityService, t: TaskSample, cache: dict) -> tuple[str, tuple] | None:
    """(cpuset path, its CPUs) of a thread, cached per cpuset; None when it cannot be read."""
    where = read_cpuset_path(service.root, t.pid, t.tid)
    if where is None:
        return None
    if where not in cache:
        cache[where] = cpuset_cpus_at(service.root, where)
    return (where, cache[where]) if cache[where] is not None else None


def masks(root, quiet, hk, moves, stays, notes) -> None:
    """The default IRQ affinity, the unbound workqueues' cpumask and each one's own (WQ_SYSFS), the
    watchdog's cpumask, and each network queue's RPS and XPS."""
    for kind in ("irqdefault", "workqueue", "watchdog"):
        _mask_move(root, PinTarget(kind, 0), quiet, hk, moves, notes)
    folder = root.sys("devices", "virtual", "workqueue")
    for name in root.listdir(folder):
        if root.is_dir(folder / name) and root.exists(folder / name / "cpumask"):
            if valid_name("wq", name):
                _mask_move(root, PinTarget("wq", 0, None, "", name), quiet, hk, moves, notes)
            else:
                stays.append(QuietStay(PinTarget("workqueue", 0), "name", "a name coremap does not build paths "
                                       "from; check its cpumask by hand", what=f"workqueue {name[:40]!r}"))
    for dev in root.listdir(root.net_dir()):
        if not valid_netdev(dev):
            stays.append(QuietStay(PinTarget("rps", 0), "name", "a name coremap does not build paths from; "
                                   "check its RPS and XPS masks by hand", what=f"network device {dev[:40]!r}"))
            continue
        for q in root.listdir(root.net_dir(dev) / "queues"):
            kind = "rps" if q.startswith("rx-") else "xps" if q.startswith("tx-") else None
            num = q[3:]
            if kind is None or not num.isdigit() or len(num) > 5:
                continue
            _mask_move(root, PinTarget(kind, int(num), None, "", dev), quiet, hk, moves, notes)


def _mask_move(root, t: PinTarget, quiet, hk, moves, notes) -> None:
    try:
        mask = read_mask(root, mask_path(root, t.kind, t.id, t.netdev), t.kind)
    except SysRootReadError as e:
        if e.reason == os.strerror(errno.ENOENT):
            # xps_cpus of a device with one transmit queue is listed, but reading it fails with
            # ENOENT (net/core/net-sysfs.c xps_cpus_show: !netif_is_multiqueue): it has no XPS.
            return
        notes.append(f"{t.describe()} cannot be read ({e.reason}); left alone")
        return
    if mask is None or not set(mask) & quiet:
        return
    new, note = _new_mask(mask, quiet, hk)
    moves.append(QuietMove(t, mask, new, "mask", note))


def reused(service: AffinityService, m) -> bool:
    """Whether the thread a move was about has exited and its tid now names another thread."""
    return m.target.kind == "thread" and exited(service, m.target, m.starttime)


def exited(service: AffinityService, t: PinTarget, starttime: int | None) -> bool:
    """Whether the task `t` (a thread, or a process as its cpuset member) has exited, or its id names
    another task now; False without a start time to tell."""
    if starttime is None:
        return False
    pid = t.id if t.kind == "cgroup" else t.pid if t.pid is not None else t.id
    try:
        return read_task(service.root, pid, t.id, detail="fast").starttime != starttime
    except TaskGone:
        return True


def group_of(t: PinTarget, service: AffinityService) -> str:
    if t.kind == "irq":
        return "irq"
    if t.kind in SCALAR_KINDS:
        return "setting"
    if t.kind in BALANCER_KINDS:
        return "irqbalance"
    if t.kind in ("cpuset", "subtree", "slice"):
        return "cpuset"
    if t.kind in ("cgroup", "cgroupthread"):
        return "process"
    if t.kind not in ("thread", "sched"):
        return "mask"
    try:
        task = read_task(service.root, t.pid if t.pid is not None else t.id, t.id, detail="fast")
    except TaskGone:
        return "thread"
    return "kthread" if task.kthread else "thread"




# One line each on why, as the knobs the user ticks have (app/quiet/knobs.py).
_SETTING_WHY = {"kernel.timer_migration": "tuned's cpu-partitioning: a timer stays on the CPU that armed it, none is "
                                          "pulled onto a quiet one",
                "vm.stat_interval": "tuned's cpu-partitioning: the per-CPU vmstat update every 10 s, not every second",
                "pmqos": "kept out of deep idle states: it wakes faster and uses more power"}


def settings(root: SysRoot, quiet, *, pm_qos: bool, moves, notes, knobs=(), entries=None) -> None:
    """tuned's cpu-partitioning sysctls at the values it gives them (app/pinning/settings.py), with
    `pm_qos` the quiet CPUs' resume latency at 0 (no deep idle state), and the `knobs` the user ticked
    (app/quiet/knobs.py; `entries()`: the journal's, for what the guard holds now)."""
    writer = ScalarWriter(root)
    targets = [(sysctl_target(i), (v,)) for i, v in QUIET_SYSCTLS.items()]
    if pm_qos:
        targets += [(pmqos_target(c), (0,)) for c in sorted(quiet)]
    for t, want in targets:
        why = _SETTING_WHY.get(t.label or t.kind, "")
        try:
            now = writer.read(t)
        except SysRootReadError as e:
            notes.append(f"{t.describe()} cannot be read ({e.reason}); left alone")
            continue
        if now is None:
            continue            # this kernel has no such setting (a kernel without NO_HZ has no timer_migration)
        if now != want:
            moves.append(QuietMove(t, now, want, "setting", why))
    knob_moves(root, quiet, knobs, moves, notes, entries=entries)


def irqbalance(root: SysRoot, quiet, moves, notes) -> None:
    """A running irqbalance told to leave the quiet CPUs alone (app/pinning/balancer.py): first in the
    batch, so that its next pass places no IRQ back on them."""
    steps = ban_steps(root, "irqbalancecpu", quiet)
    for s in steps:
        moves.append(QuietMove(s.target, (0,), (1,), "irqbalance", "from its next pass"))
    pid = running_irqbalance(root)
    if pid is not None and not steps and os.geteuid() != 0:
        notes.append(f"irqbalance (pid {pid}) answers only root: it is not told to leave "
                     f"{cpus_word(sorted(quiet))} alone and may place IRQs there again; run the isolate as "
                     "root, or set IRQBALANCE_BANNED_CPULIST (coremap plan) and restart it")


def born_while_quiet(root: SysRoot, since: float, state: Ledger, back: set[int]) -> list[QuietMove]:
    """Threads started after `since` (an isolate, seconds since 1970) whose mask is exactly the
    housekeeping mask they inherited (online CPUs but the quiet ones): no isolate moved them, so no
    journal entry gives them back, yet their mask came from one. They get the CPUs given back. (A mask
    a user set to exactly that cannot be told from an inherited one without a cpuset: this is the
    method without one.)"""
    quiet = set(state.quiet_cpus)
    try:
        uptime = float((root.read_first_line(root.proc("uptime")) or "0").split()[0])
    except (SysRootReadError, ValueError):
        return []
    sample = read_tasks(root, detail="fast", cmdline=False)
    since_ticks = (since - (time.time() - uptime)) * sample.clk_tck
    inherited = tuple(sorted(set(read_online_cpus(root)) - quiet))
    known = {k[2] for k in state.moved if k[0] == "thread"}
    out = []
    for t in sorted(sample.tasks.values(), key=lambda t: (t.pid, t.tid)):
        if t.kthread or t.tid in known or t.starttime <= since_ticks or t.allowed != inherited or t.no_setaffinity:
            continue
        out.append(QuietMove(PinTarget("thread", t.tid, t.pid, t.comm), t.allowed,
                             tuple(sorted(set(t.allowed) | back)), "thread",
                             "started while the CPUs were quiet, with the mask it inherited"))
    return out
