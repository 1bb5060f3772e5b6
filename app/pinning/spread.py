"""IRQs spread over CPUs, one per CPU, each on its device's own NUMA node first: the plan of `coremap pin
--spread` and of a drop of several IRQs on the grid, as Seastar's perftune.py (`distribute_irqs`) and
tuna `-x` place a NIC's queues.

The plan is the request itself (PinRequest.each: one CPU list per target), made here once from what the
caller reads (the CLI from its --root, the window from the MachineState it shows, local or over ssh), so
the preview a drop shows and the batch the pin flow writes are the same list. Its rule, for each IRQ in
turn (by number: a NIC numbers its queues' vectors in queue order): the CPU with the fewest IRQs of
this spread so far, the CPUs of the IRQ's device's node before the others, lower numbers first. So one
IRQ per CPU on the node, then on the other CPUs given, then round robin.

`--rps` lets each network queue's receive and transmit steering follow its IRQ (Documentation/
networking/scaling.rst: rps_cpus of queues/rx-N, xps_cpus of queues/tx-N): `queue_targets` names the
masks of an IRQ's queue, which the pin flow writes as steps of the same batch.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from app.machine.interrupts import IrqDevice, IrqTable, read_irqs
from app.errors import SysRootReadError
from app.pinning.masks import mask_path, read_mask
from app.pinning.targets import PinRequest, PinTarget
from app.pinning.writers import Step
from app.sysroot import SysRoot

# What a driver calls a queue vector (app/machine/interrupts.py _NET_QUEUE, virtio's input.N/output.N),
# and which of the queue's directions it serves.
_QUEUE = re.compile(r"^(?P<dir>TxRx|Tx-Rx|txrx|combined|fp|rx|Rx|input|tx|Tx|output)[-.](?P<n>\d{1,5})$")
_RX, _TX = ("rx", "Rx", "input"), ("tx", "Tx", "output")


def device_node(table: IrqTable | None, irq: int) -> int | None:
    """The NUMA node of IRQ `irq`'s device as `table` read it (its PCI numa_node, IrqInfo.device_node),
    else the IRQ's own /proc/irq/N/node; None: unknown, no preference."""
    info = table.info.get(str(irq)) if table is not None else None
    if info is None:
        return None
    return info.device_node if info.device_node is not None else info.node


def spread(irqs: Sequence[int], cpus: Sequence[int], irq_node: Mapping[int, int | None],
           cpu_node: Mapping[int, int | None]) -> tuple[tuple[int, ...], ...]:
    """One CPU for each of `irqs`, in their order (see the module docstring): `irq_node` maps an IRQ to
    its device's node, `cpu_node` a CPU to its node."""
    order = sorted(set(cpus))
    if not order:
        raise ValueError("a spread needs at least one CPU")
    load = dict.fromkeys(order, 0)
    out = []
    for irq in irqs:
        node = irq_node.get(irq)
        # (load, not on the device's node, position): min() takes the first CPU of the lowest load,
        # the node's CPUs first.
        best = min(order, key=lambda c: (load[c], node is not None and cpu_node.get(c) != node, c))
        load[best] += 1
        out.append((best,))
    return tuple(out)


def spread_irqs(irqs: Sequence[int], cpus: Sequence[int], table: IrqTable | None, topology) -> tuple[tuple[int, ...], ...]:
    """`spread` with the nodes of `table` (the machine's IRQs) and `topology` (its CPUs)."""
    cpu_node = {c.id: c.node for c in topology.cpus} if topology is not None else {}
    return spread(irqs, cpus, {i: device_node(table, i) for i in irqs}, cpu_node)


def spread_summary(targets: Sequence[PinTarget], each: Sequence[Sequence[int]], *, limit: int = 6) -> str:
    """"IRQ 38 → 0, IRQ 39 → 1, … (4 more)": what a spread's preview says, one line."""
    shown = [f"IRQ {t.id} → {','.join(map(str, c))}" for t, c in zip(targets[:limit], each[:limit])]
    more = len(targets) - limit
    return ", ".join(shown) + (f", … ({more} more)" if more > 0 else "")


def queue_targets(device: IrqDevice | None) -> tuple[PinTarget, ...]:
    """The steering masks that follow an IRQ's network queue: RPS of its rx-N and XPS of its tx-N (a
    combined TxRx vector both); () for a vector that is no queue of a network device (a NIC's misc
    vector, a disk's)."""
    if device is None or not device.netdev or not device.queue:
        return ()
    m = _QUEUE.match(device.queue)
    if m is None:
        return ()
    n, direction = int(m["n"]), m["dir"]
    out = []
    if direction not in _TX:
        out.append(PinTarget("rps", n, netdev=device.netdev))
    if direction not in _RX:
        out.append(PinTarget("xps", n, netdev=device.netdev))
    return tuple(out)


def queue_steps(root: SysRoot, request: PinRequest) -> tuple[list[Step], str]:
    """The RPS and XPS writes that make each IRQ's network queue follow it (`request.rps`), after the
    IRQs' own writes: each queue's masks set to its IRQ's CPUs. With them, why they cannot be made ("" when
    they can): none of the IRQs is a queue's, or a queue's file is not there or unreadable (a capture
    without sys/class/net, a device gone); then the pin must not go at all, not leave its IRQs moved
    without their queues. XPS is left out for a device with one transmit queue: the kernel has no XPS
    there (net/core/net-sysfs.c xps_cpus_show: ENOENT unless netif_is_multiqueue), nothing to steer."""
    table = read_irqs(root)
    steps = []
    for target, cpus in zip(request.targets, request.cpus_of()):
        info = table.info.get(str(target.id)) if target.kind == "irq" else None
        for mask in queue_targets(info.device if info is not None else None):
            if mask.kind == "xps" and _single_tx_queue(root, mask.netdev):
                continue
            steps.append(Step(mask, tuple(sorted(set(cpus)))))
    if not steps:
        return [], "not a network queue's, nor is any other IRQ of this pin: --rps has no queue to steer; nothing was written"
    for s in steps:
        try:
            path = mask_path(root, s.target.kind, s.target.id, s.target.netdev)
            there = read_mask(root, path, s.target.kind) is not None
        except (ValueError, SysRootReadError) as e:        # a name no path may be built from; a mask unreadable
            return [], f"{s.target.describe()} cannot be read ({e}); nothing was written, drop --rps"
        if not there:
            return [], (f"{s.target.describe()} does not exist on this machine (no "
                        f"sys/class/net/{s.target.netdev}/queues); nothing was written, drop --rps")
    return steps, ""


def _single_tx_queue(root: SysRoot, netdev: str) -> bool:
    try:
        queues = root.listdir(mask_path(root, "xps", 0, netdev).parent.parent)
    except ValueError:
        return False        # not a device name: the read above refuses it
    return sum(1 for q in queues if q.startswith("tx-")) == 1
