"""Interrupts of a machine: the counters (/proc/interrupts, /proc/softirqs, /proc/stat) and, per
numbered IRQ, where it may run, where it does run, and which device and queue raise it.

Per-IRQ files: Documentation/core-api/irq/irq-affinity.rst and kernel/irq/proc.c
(smp_affinity[_list] = the requested mask, effective_affinity[_list] = where the interrupt
controller actually delivers it, node, affinity_hint). Device: Documentation/ABI/testing/
sysfs-bus-pci (msi_irqs/<N> per MSI/MSI-X vector, `irq` = the legacy INTx line), and the chip
name x86 prints for per-device MSI domains ("IR-PCI-MSIX-0000:b1:00.0", kernel/irq/msi.c
msi_domain_set_default_info_flags / pci_msi_domain names since v6.2). Managed IRQs (whose affinity
the kernel owns, see kernel/irq/affinity.c) are visible only in debugfs (kernel/irq/debugfs.c
prints IRQD_AFFINITY_MANAGED), so `managed` is None where debugfs is not mounted.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field, replace

from app.errors import CoremapError, CpuListError, SysRootReadError
from app.parse.cpulist import parse_cpulist, parse_cpumask
from app.parse.interrupts import (InterruptRow, InterruptTable, RowMemo, SoftirqTable,
                                  parse_interrupts, parse_softirqs)
from app.parse.json_text import CpuId
from app.parse.stat import StatSample, parse_stat
from app.sysroot import SysRoot


@dataclass(frozen=True)
class IrqDevice:
    pci_address: str | None     # "0000:31:00.0"
    driver: str | None          # "i40e" (the PCI driver link), else the action's driver prefix
    netdev: str | None          # "eno12399"
    queue: str | None           # "TxRx-3", "rx-0", "q3", "msix5", "misc"
    description: str            # one line for people: "i40e eno12399 TxRx-3 (0000:31:00.0)"
    node: int | None = None     # the device's NUMA node (its PCI numa_node); None: -1 or not known


@dataclass(frozen=True)
class IrqInfo:
    irq: str
    requested: tuple[CpuId, ...] | None = None   # smp_affinity_list (or the smp_affinity mask)
    effective: tuple[CpuId, ...] | None = None   # effective_affinity_list (or effective_affinity)
    node: int | None = None                    # /proc/irq/N/node (-1 in the file -> None): see device_node
    hint: tuple[CpuId, ...] | None = None        # affinity_hint mask; all-zero -> None
    device: IrqDevice | None = None
    managed: bool | None = None                # None: not knowable here (no debugfs)

    @property
    def device_node(self) -> int | None:
        """The NUMA node of the device that raises the IRQ, the node a user means (issue 30: the IRQ's
        own `node` is where its descriptor was allocated, kernel/irq/irqdesc.c, and on master.internal
        228 of 1,858 differ from their device's, nvme0q0's 0 under a device on node 1)."""
        return self.device.node if self.device is not None else None

    def node_text(self) -> str:
        """The device's node, with the IRQ's own beside it where they differ ("1 (irq 0)"); the IRQ's
        own where no device node is known; "" where neither is."""
        dev, own = self.device_node, self.node
        if dev is None:
            return "" if own is None else str(own)
        return str(dev) if own is None or own == dev else f"{dev} (irq {own})"


@dataclass(frozen=True)
class IrqTable(InterruptTable):
    """The parsed /proc/interrupts (its CPUs and rows, app/parse/interrupts.py), with what /proc/irq/N and
    sysfs say of each numbered IRQ: the machine's view of its IRQs."""
    info: dict[str, IrqInfo] = field(default_factory=dict)   # numbered IRQs only


# -- counters --------------------------------------------------------------------------------------
def read_interrupts(root: SysRoot, memo: RowMemo | None = None) -> InterruptTable:
    """proc/interrupts; a sampler passes its RowMemo so that unchanged lines keep their rows."""
    path = root.proc("interrupts")
    return parse_interrupts(root.read(path), what=str(path), memo=memo)


def read_softirqs(root: SysRoot) -> SoftirqTable | None:
    path = root.proc("softirqs")
    text = root.read_optional(path)
    return None if text is None else parse_softirqs(text, what=str(path))


def read_stat(root: SysRoot) -> StatSample | None:
    path = root.proc("stat")
    text = root.read_optional(path)
    return None if text is None else parse_stat(text, what=str(path))


# -- action names -> netdev / queue ----------------------------------------------------------------
_PCI_ADDR = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_PCI_IN_CHIP = re.compile(r"PCI-MSIX?-(" + _PCI_ADDR + r")$")
_PCI_ANYWHERE = re.compile(r"(?<![0-9a-fA-F])(" + _PCI_ADDR + r")(?![0-9a-fA-F])")
# Network queue vectors as drivers name them: i40e/ice "<drv>-<iface>-TxRx-<n>", igb/ixgbe
# "<iface>-TxRx-<n>", ena "<iface>-Tx-Rx-<n>", tg3/bnxt/virtio_net "<iface>-rx-<n>"/"-tx-<n>",
# mlx4 "<iface>-<n>"-style is not matched (too ambiguous).
_NET_QUEUE = re.compile(r"^(?P<prefix>.+?)-(?P<queue>(?:TxRx|Tx-Rx|txrx|rx|tx|Rx|Tx|combined|fp)-\d+)$")
_NVME_QUEUE = re.compile(r"^(?P<dev>nvme\d+)(?P<queue>q\d+)$")
_MSIX_QUEUE = re.compile(r"^(?P<dev>[a-z][a-z0-9_]*?\d+)-(?P<queue>msix\d+)$")            # megasas0-msix5
_VIRTIO_QUEUE = re.compile(r"^(?P<dev>virtio\d+)-(?P<queue>[\w.]+)$")                     # virtio2-input.0
_PCI_SUFFIX = re.compile(r"^(?P<drv>[\w.]+)-(?:" + _PCI_ADDR + r"):(?P<queue>[\w-]+)$")   # i40e-0000:31:00.0:misc
_PCI_DASH = re.compile(r"^(?P<drv>[\w.]+)-(?:" + _PCI_ADDR + r")-(?P<queue>[\w-]+)$")     # irdma-0000:4b:00.0-CEQ-3
_AT_PCI = re.compile(r"^(?P<queue>[\w.-]+)@pci:(?:" + _PCI_ADDR + r")$")                 # mlx5_comp3@pci:0000:..


@dataclass(frozen=True)
class ActionName:
    """What an action (handler) name says by itself."""
    driver: str | None = None
    netdev: str | None = None
    queue: str | None = None
    pci_address: str | None = None
    block: str | None = None        # "nvme0"


def parse_action_name(name: str, *, netdevs: frozenset[str] = frozenset(),
                      driver: str | None = None) -> ActionName:
    """Driver, netdev and queue from a handler name. `netdevs` (names known on the machine) and
    `driver` (the PCI driver) disambiguate "<drv>-<iface>-TxRx-<n>" from "<iface>-TxRx-<n>"."""
    m = _PCI_ANYWHERE.search(name)
    pci = m.group(1).lower() if m else None
    if (m2 := _NVME_QUEUE.match(name)):
        return ActionName(driver="nvme", queue=m2["queue"], block=m2["dev"], pci_address=pci)
    if (m2 := _PCI_SUFFIX.match(name)) or (m2 := _PCI_DASH.match(name)):
        return ActionName(driver=m2["drv"], queue=m2["queue"], pci_address=pci)
    if (m2 := _AT_PCI.match(name)):
        return ActionName(queue=m2["queue"], pci_address=pci)
    if (m2 := _NET_QUEUE.match(name)):
        prefix = m2["prefix"]
        drv = None
        if prefix in netdevs:
            iface = prefix
        elif driver and prefix.startswith(driver + "-"):
            drv, iface = driver, prefix[len(driver) + 1:]
        else:
            known = [n for n in netdevs if prefix.endswith("-" + n)]
            if known:
                iface = max(known, key=len)
                drv = prefix[: -len(iface) - 1]
            elif "-" in prefix:
                drv, iface = prefix.split("-", 1)
            else:
                iface = prefix
        return ActionName(driver=drv, netdev=iface, queue=m2["queue"], pci_address=pci)
    if (m2 := _MSIX_QUEUE.match(name)):
        return ActionName(queue=m2["queue"], block=m2["dev"], pci_address=pci)
    if (m2 := _VIRTIO_QUEUE.match(name)):
        return ActionName(driver="virtio", queue=m2["queue"], block=m2["dev"], pci_address=pci)
    if name in netdevs:
        return ActionName(netdev=name, pci_address=pci)
    return ActionName(pci_address=pci)


# -- PCI devices -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _PciDev:
    address: str
    driver: str | None
    netdevs: tuple[str, ...]
    node: int | None = None     # numa_node (Documentation/ABI/testing/sysfs-bus-pci); -1 -> None


@dataclass
class _DeviceIndex:
    by_msi: dict[str, _PciDev]              # IRQ number -> device, from msi_irqs/
    by_legacy: dict[str, list[_PciDev]]     # IRQ number -> devices on that INTx line
    by_address: dict[str, _PciDev]
    netdevs: frozenset[str]
    live: bool

    def udev_model(self, address: str) -> str | None:
        """"Intel Corporation Ethernet Controller X710" from the hwdb, on the live machine only."""
        return _udev_model(address) if self.live else None


# The index is rebuilt whenever the IRQ table is read (every few seconds in the window), but the hwdb's
# answer for a PCI address does not change while the device stays; one libudev context serves the
# process (pyudev finds libudev with ctypes.util.find_library, which runs `ldconfig -p`: a child
# process per context, every few seconds, before this cache). The sampler's and the guard's threads
# both read IRQs; a libudev context is not for two threads at once, hence the lock.
_UDEV_LOCK = threading.Lock()
_UDEV_CONTEXT: list = []
_UDEV_MODELS: dict[str, str | None] = {}
_UDEV_MODELS_MAX = 4096


def _udev_model(address: str) -> str | None:
    if address in _UDEV_MODELS:
        return _UDEV_MODELS[address]
    with _UDEV_LOCK:
        return _ask_udev(address)


def _ask_udev(address: str) -> str | None:
    text = None
    try:
        import pyudev
    except ImportError:
        pyudev = None       # optional: descriptions stay without the model name
    if pyudev is not None:
        try:
            if not _UDEV_CONTEXT:
                _UDEV_CONTEXT.append(pyudev.Context())
            dev = pyudev.Devices.from_path(_UDEV_CONTEXT[0], f"/bus/pci/devices/{address}")
            vendor = dev.properties.get("ID_VENDOR_FROM_DATABASE")
            model = dev.properties.get("ID_MODEL_FROM_DATABASE")
            text = " ".join(x for x in (vendor, model) if x) or None
        except (pyudev.DeviceNotFoundError, OSError):
            return None     # the device went away (hot-unplug) between listing and asking udev: ask again
    if len(_UDEV_MODELS) >= _UDEV_MODELS_MAX:
        _UDEV_MODELS.clear()
    _UDEV_MODELS[address] = text
    return text


def _pci_devices(root: SysRoot) -> _DeviceIndex:
    base = root.sys("bus", "pci", "devices")
    iface_of: dict[str, list[str]] = {}
    class_net = root.sys("class", "net")
    netdevs = set()
    for iface in root.listdir(class_net):
        netdevs.add(iface)
        target = root.readlink(class_net / iface)
        if not target:
            continue
        # ../../devices/pci0000:00/0000:00:03.0/virtio0/net/ens3: the last PCI address on the way
        # owns the interface (virtio_net hangs it under virtioN, i40e directly under the function).
        addrs = _PCI_ANYWHERE.findall(target.split("/net/")[0])
        if addrs:
            iface_of.setdefault(addrs[-1].lower(), []).append(iface)
    by_msi: dict[str, _PciDev] = {}
    by_legacy: dict[str, list[_PciDev]] = {}
    by_address: dict[str, _PciDev] = {}
    for addr in root.listdir(base):
        d = base / addr
        link = root.readlink(d / "driver")
        driver = os.path.basename(link) if link else None
        nets = set(iface_of.get(addr.lower(), ()))
        nets.update(root.listdir(d / "net"))
        netdevs.update(nets)
        dev = _PciDev(addr.lower(), driver, tuple(sorted(nets)), _numa_node(root.read_first_line(d / "numa_node")))
        by_address[dev.address] = dev
        for n in root.listdir(d / "msi_irqs"):
            by_msi[n] = dev
        legacy = root.read_first_line(d / "irq")
        if legacy and legacy.isdigit() and legacy != "0":
            by_legacy.setdefault(legacy, []).append(dev)
    return _DeviceIndex(by_msi, by_legacy, by_address, frozenset(netdevs), root.is_live)


def _numa_node(text: str | None) -> int | None:
    # -1 (no NUMA, or the firmware did not say) and anything that is not a node number: not known.
    return int(text) if text and text.isascii() and text.isdigit() and len(text) < 6 else None


def _device_for(row: InterruptRow | None, irq: str, index: _DeviceIndex) -> IrqDevice | None:
    actions = row.actions if row is not None else ()
    dev = index.by_msi.get(irq)
    if dev is None and row is not None and row.chip:
        m = _PCI_IN_CHIP.search(row.chip)
        if m:
            addr = m.group(1).lower()
            dev = index.by_address.get(addr) or _PciDev(addr, None, ())
    parsed = [parse_action_name(a, netdevs=index.netdevs, driver=dev.driver if dev else None)
              for a in actions]
    if dev is None:
        for p in parsed:
            if p.pci_address:
                dev = index.by_address.get(p.pci_address) or _PciDev(p.pci_address, None, ())
                break
    if dev is None and irq in index.by_legacy:
        shared = index.by_legacy[irq]
        # An INTx line is often shared: prefer the device whose driver named a handler.
        dev = next((d for d in shared if d.driver and any(a.startswith(d.driver) for a in actions)),
                   shared[0])
    first = next((p for p in parsed if p.queue or p.netdev), parsed[0] if parsed else ActionName())
    if dev is None and not (first.netdev or first.queue or first.block):
        return None
    netdev = first.netdev
    # A PCI function with one interface owns its vectors' traffic; virtio_net hangs the interface
    # under virtioN, so "virtio2-input.0" is eth0's queue when 0000:00:03.0 holds only eth0.
    if (netdev is None and dev is not None and len(dev.netdevs) == 1
            and (not first.block or first.block.startswith("virtio"))):
        netdev = dev.netdevs[0]
    driver = (dev.driver if dev else None) or first.driver
    queue = first.queue
    # The handler's own driver prefix ("irdma" on an "ice" function) says more than the PCI driver.
    parts = [first.driver if first.driver and first.driver != "virtio" else (driver or ""),
             netdev or first.block or "", queue or ""]
    desc = " ".join(p for p in parts if p) or (", ".join(actions))
    if dev is not None:
        model = index.udev_model(dev.address)
        desc = f"{desc} ({dev.address}{', ' + model if model else ''})" if desc else dev.address
    return IrqDevice(dev.address if dev else first.pci_address, driver, netdev, queue, desc,
                     dev.node if dev else None)


# -- per-IRQ folders ---------------------------------------------------------------------------------
def _cpus(root: SysRoot, folder, names: set[str] | None, list_name: str, mask_name: str):
    """The CPU list file, falling back to the mask file (kernels before 2.6.28 have no _list); None
    when neither is there. `names`: the folder's entries when it was listed, None to try each file."""
    try:
        for name, parse in ((list_name, parse_cpulist), (mask_name, parse_cpumask)):
            if names is not None and name not in names:
                continue
            text = root.read_optional(folder / name)
            if text is not None:
                return parse(text, what=str(folder / name))
    except CpuListError as e:
        raise SysRootReadError(folder, f"unreadable CPU set: {e}") from None
    return None


def read_irq_cpus(root: SysRoot, irq: int | str) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(requested, effective) CPUs of one IRQ, from its _list files or else its masks
    (kernel/irq/proc.c); None for a side the kernel does not show (effective_affinity needs
    CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK). SysRootReadError for a file that holds no CPU set."""
    folder = root.irq_dir(irq)
    return (_cpus(root, folder, None, "smp_affinity_list", "smp_affinity"),
            _cpus(root, folder, None, "effective_affinity_list", "effective_affinity"))


def irq_is_managed(root: SysRoot, irq: int | str) -> bool:
    """Whether debugfs says the kernel manages IRQ `irq` (GENERIC_IRQ_DEBUGFS lists
    IRQD_AFFINITY_MANAGED in irq/irqs/N); False where it cannot tell (no debugfs, or root-only): then
    the write's EIO is the first sign."""
    try:
        return bool(_managed(root, str(irq), root.sys("kernel", "debug", "irq", "irqs")))
    except SysRootReadError:
        return False        # debugfs readable by root only: no verdict


def _managed(root: SysRoot, irq: str, debug_irqs) -> bool | None:
    if debug_irqs is None:
        return None
    text = root.read_optional(debug_irqs / irq)
    if text is None:
        return None
    return "IRQD_AFFINITY_MANAGED" in text


def _info(root: SysRoot, irq: str, row: InterruptRow | None, index: _DeviceIndex, debug_irqs) -> IrqInfo:
    folder = root.irq_dir(irq)
    names = set(root.listdir(folder))     # raises SysRootReadError on permission denied
    requested = _cpus(root, folder, names, "smp_affinity_list", "smp_affinity")
    effective = _cpus(root, folder, names, "effective_affinity_list", "effective_affinity")
    node = None
    if "node" in names:
        n = root.read_int(folder / "node")
        node = None if n is None or n < 0 else n
    hint = None
    if "affinity_hint" in names:
        try:
            hint = parse_cpumask(root.read(folder / "affinity_hint"), what=str(folder / "affinity_hint"))
        except CpuListError as e:
            raise SysRootReadError(folder / "affinity_hint", str(e)) from None
        hint = hint or None
    return IrqInfo(irq, requested, effective, node, hint, _device_for(row, irq, index),
                   _managed(root, irq, debug_irqs))


def _debug_irqs(root: SysRoot):
    d = root.sys("kernel", "debug", "irq", "irqs")
    # debugfs is 0700 root: where we may not look, is_dir says False and `managed` is simply unknown
    return d if root.is_dir(d) else None


def read_irqs(root: SysRoot) -> IrqTable:
    """Every row of /proc/interrupts, with IrqInfo for each numbered IRQ."""
    table = read_interrupts(root)
    index = _pci_devices(root)
    debug = _debug_irqs(root)
    info = {}
    for r in table.rows:
        if r.numbered:
            info[r.irq] = _info(root, r.irq, r, index, debug)
    return IrqTable(table.cpus, table.rows, info)


def refresh_affinities(root: SysRoot, table: IrqTable) -> IrqTable:
    """`table` with each IRQ's requested and effective CPUs read again, and nothing else: what a pin
    or irqbalance changes. Node, hint, device and managed stay as read_irqs found them (the sampler
    reads those again when the IRQs come or go, and every minute). An IrqInfo whose CPUs did not
    change is the same object, so the table's rows compare equal by identity. An IRQ whose folder
    went away keeps its last info until the full read."""
    info = {}
    for irq, old in table.info.items():
        folder = root.irq_dir(irq)
        # Without listing the folder (a third of the files); a file gone now (the IRQ is going away)
        # leaves the last value until the full read.
        requested = _cpus(root, folder, None, "smp_affinity_list", "smp_affinity")
        effective = _cpus(root, folder, None, "effective_affinity_list", "effective_affinity")
        requested = old.requested if requested is None else requested
        effective = old.effective if effective is None else effective
        info[irq] = old if (requested, effective) == (old.requested, old.effective) else \
            replace(old, requested=requested, effective=effective)
    return IrqTable(table.cpus, table.rows, info)


__all__ = ["IrqDevice", "IrqInfo", "IrqTable", "ActionName", "parse_action_name", "read_interrupts",
           "read_softirqs", "read_stat", "read_irqs", "refresh_affinities",
           "CoremapError"]
