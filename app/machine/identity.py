"""Which machine a root is: its host name, machine id, kernel release and CPU model, so a stored probe
result can say where it was measured and a report of another machine can tell (issue 30, wrong
answer 2: a jitter run of a 2-vCPU VM was printed under a 80-CPU Xeon capture).

The probe's hello line carries this record of the machine it runs on (probes/common.py), and a report
or an export reads the same record of the machine it is about (app/store/result_host.py compares the
two). Every field may be unknown: a capture need not hold /etc/machine-id or the host name (the
openshift-nto sysinfo captures hold neither), and a result stored before coremap recorded its host
has none of them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from app.sysroot import SysRoot

# systemd's machine-id(5): 32 lower-case hex digits, one line. Anything else is no machine id.
_MACHINE_ID = re.compile(r"[0-9a-f]{32}")
# A kernel release that the capture does not hold is still in the boot loader's image name, set by
# GRUB (Documentation/admin-guide/kernel-parameters.rst passes unknown parameters on to init):
# BOOT_IMAGE=(hd0,gpt3)/boot/ostree/rhcos-.../vmlinuz-5.14.0-427.59.1.el9_4.x86_64+rt
_BOOT_IMAGE = re.compile(r"(?:^|\s)BOOT_IMAGE=\S*?vmlinuz-(\S+)")


@dataclass(frozen=True)
class HostIdentity:
    """A machine as a result and a report name it. `name` is what a report calls it (the host name,
    a capture's or session's name, else its folder's); the other fields are what the machine said
    of itself, None where it did not."""
    name: str
    hostname: str | None = None
    machine_id: str | None = None
    kernel: str | None = None
    cpu_model: str | None = None

    def as_record(self) -> dict:
        """The fields a result's `host` record keeps (hostname, machine_id, cpu_model; its kernel
        is already there)."""
        return {"hostname": self.hostname, "machine_id": self.machine_id, "cpu_model": self.cpu_model}


def machine_id_of(text: str | None) -> str | None:
    """The machine id in /etc/machine-id's text; None for an absent, empty or malformed one (the
    "uninitialized" of an image being built, machine-id(5))."""
    line = (text or "").strip()
    return line if _MACHINE_ID.fullmatch(line) else None


def read_machine_id(root: SysRoot) -> str | None:
    """`root`'s machine id: its etc/machine-id (the live machine's, or a capture's that holds one), else
    the one a coremap snapshot recorded of the machine it captured (app/store/capture.py)."""
    mid = machine_id_of(root.read_optional(root.path("etc", "machine-id"), limit=4096))
    if mid is None and not root.is_live:
        meta = root.snapshot_meta() or {}
        mid = machine_id_of(meta.get("machine_id") if isinstance(meta.get("machine_id"), str) else None)
    return mid


def kernel_of_cmdline(cmdline: str | None) -> str | None:
    """The kernel release in a command line's BOOT_IMAGE (grub's vmlinuz-RELEASE), None without one."""
    m = _BOOT_IMAGE.search(cmdline or "")
    return m.group(1) if m else None


def read_identity(root: SysRoot, topology=None, *, name: str | None = None) -> HostIdentity:
    """`root`'s identity. `topology` (app.machine.topology.Topology) when the caller has read it
    already: the host name, kernel release and CPU model are its, read one way. `name`: what the
    caller calls the machine (a session's host); else a snapshot's host, the host name, the folder."""
    if topology is None:
        from app.machine.topology import read_topology
        topology = read_topology(root)
    meta = (root.snapshot_meta() or {}) if not root.is_live else {}
    meta_host = meta.get("host") if isinstance(meta.get("host"), str) else None
    label = name or meta_host or topology.hostname or root.root.name or "machine"
    return HostIdentity(str(label), topology.hostname or None, read_machine_id(root),
                        topology.kernel_release or kernel_of_cmdline(topology.cmdline), topology.model_name)
