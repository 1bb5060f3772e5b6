"""irqbalance told what to leave alone, as writers of the pin flow (flag kinds of app/pinning/kinds.py):
journalled with their old value, said through irqbalance's socket (app/machine/irqbalance_socket.py),
read back, and undone by undo, include and restore like any pin (issue 20).

  irqbalancecpu   id = a CPU: (1,) irqbalance never places an IRQ on it. An isolate bans its quiet
                  CPUs, the give-back lifts the ban. irqbalance keeps one list, so a write sends the
                  CPUs it bans now with this one added or taken out; a list that comes back to what
                  irqbalance works out itself (IRQBALANCE_BANNED_CPULIST, else isolcpus and nohz_full)
                  is sent as NULL, so the give-back leaves no override behind. irqbalance takes a new
                  list at the start of its next pass: the read back waits for it (one pass, 10 s by
                  default, 60 s at most) and says if it did not come.
  irqbalanceirq   id = an IRQ: (1,) irqbalance leaves its affinity alone (as --banirq does). A pin of
                  an IRQ while irqbalance runs bans it first, in the same batch, so the next pass does
                  not move it back; undo lifts the ban. Read back at once.

The target's pid is the irqbalance that was told: when that one has exited (a restart reads its
configuration afresh), an undo has nothing to give back and says so.
"""
from __future__ import annotations

from app.errors import CoremapError
from app.machine.irqbalance import read_irqbalance
from app.machine.irqbalance_socket import (IrqbalanceSocketError, ban_cpus, ban_irqs, read_setup, socket_path,
                                           wait_for_cpus)
from app.machine.topology import read_topology
from app.pinning.kinds import BALANCER_KINDS  # noqa: F401 - the kinds this module writes
from app.pinning.refusals import PinWriteError
from app.pinning.targets import PinTarget
from app.pinning.writers import Outcome, Prepared, Step, checked
from app.sysroot import SysRoot


def running_irqbalance(root: SysRoot) -> int | None:
    """The pid of the irqbalance coremap can speak to here (live machine, its socket present), or None."""
    if not root.is_live:
        return None
    st = read_irqbalance(root)
    if not st.running or st.pid is None or not root.exists(socket_path(root, st.pid)):
        return None
    return st.pid


def balancer_target(kind: str, ident: int, pid: int) -> PinTarget:
    return PinTarget(kind, int(ident), int(pid), "irqbalance")


class BalancerWriter:
    """Both flag kinds; every call speaks to the running irqbalance through its socket."""

    def __init__(self, root: SysRoot):
        self.root = root

    def read(self, target: PinTarget) -> tuple[int, ...] | None:
        pid = running_irqbalance(self.root)
        if pid is None or (target.pid is not None and pid != target.pid):
            return None
        try:
            setup = read_setup(self.root, pid)
        except IrqbalanceSocketError:
            return None
        banned = setup.banned_cpus if target.kind == "irqbalancecpu" else setup.banned_irqs
        return (1,) if target.id in banned else (0,)

    def prepare(self, step: Step) -> Prepared:
        t = step.target
        pid = running_irqbalance(self.root)
        if pid is None or (t.pid is not None and pid != t.pid):
            was = f"irqbalance (pid {t.pid})" if t.pid is not None else "irqbalance"
            return Prepared(t, gone=f"{was} is not running (a new one reads its configuration afresh): "
                                    "nothing to tell it")
        t = balancer_target(t.kind, t.id, pid)
        try:
            read_setup(self.root, pid)          # proves it answers us before anything is journalled
        except IrqbalanceSocketError as e:
            return Prepared(t, refusal=("denied", str(e)))
        return Prepared(t, self.read(t))

    def write(self, target: PinTarget, value) -> None:
        if not self.root.is_live:
            raise PinWriteError(f"{target.describe()} is set only on the live machine")
        try:
            self._send(target, bool(value and value[0]))
        except IrqbalanceSocketError as e:
            if "answers only root" in str(e) or "answered nothing" in str(e):
                raise PermissionError(str(e)) from None
            raise PinWriteError(str(e)) from None

    def write_privileged(self, helper, target: PinTarget, value) -> None:
        helper.set_setting(target.kind, target.id, tuple(value))

    def read_back(self, target: PinTarget, value) -> Outcome:
        pid = target.pid
        try:
            if target.kind == "irqbalancecpu":
                setup = read_setup(self.root, pid)
                want = _with(setup.banned_cpus, target.id, bool(value and value[0]))
                setup = wait_for_cpus(self.root, pid, want, setup.sleep_s)
                after = (1,) if target.id in setup.banned_cpus else (0,)
                why = f"irqbalance did not take it within one pass ({setup.sleep_s} s)"
            else:
                after = self.read(target)
                why = "irqbalance kept its list"
        except IrqbalanceSocketError as e:
            return Outcome("gone", f"{target.describe()}: {e}")
        return checked(target, value, after, what="reads back", why=why)

    def _send(self, target: PinTarget, ban: bool) -> None:
        pid = target.pid
        setup = read_setup(self.root, pid)
        if target.kind == "irqbalanceirq":
            ban_irqs(self.root, pid, _with(setup.banned_irqs, target.id, ban))
            return
        want = _with(setup.banned_cpus, target.id, ban)
        ban_cpus(self.root, pid, None if want == own_choice(self.root, pid) else want)


def own_choice(root: SysRoot, pid: int) -> tuple[int, ...]:
    """The CPUs irqbalance bans when told nothing (irqbalance's cputree.c setup_banned_cpus):
    IRQBALANCE_BANNED_CPUS or _CPULIST from its environment, else isolcpus and nohz_full."""
    st = read_irqbalance(root)
    if st.pid == pid and st.banned_cpus:
        return tuple(st.banned_cpus)
    try:
        topo = read_topology(root)
    except CoremapError:
        return ()
    return tuple(sorted(set(topo.isolated) | set(topo.nohz_full)))


def _with(values, one: int, present: bool) -> tuple[int, ...]:
    s = set(values)
    (s.add if present else s.discard)(one)
    return tuple(sorted(s))


def ban_steps(root: SysRoot, kind: str, ids) -> list[Step]:
    """The steps that tell the running irqbalance to leave `ids` (CPUs or IRQs, by `kind`) alone, for
    those it does not leave alone yet; [] when no irqbalance runs here or it will not answer this process
    (only root may speak to it: the pin's own warning then says it may move the IRQ back)."""
    pid = running_irqbalance(root)
    if pid is None:
        return []
    try:
        setup = read_setup(root, pid)
    except IrqbalanceSocketError:
        return []
    banned = set(setup.banned_cpus if kind == "irqbalancecpu" else setup.banned_irqs)
    return [Step(balancer_target(kind, i, pid), (1,)) for i in sorted(set(ids)) if i not in banned]
