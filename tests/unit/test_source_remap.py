"""node_exporter's interrupts `cpu` label is the column index of /proc/interrupts, which lists online CPUs
only (app/sources/prometheus.py): on a machine with CPUs 0-3 offline (hwloc's offline-cpu0-node0 capture),
column 0 is CPU 4. The same columns read by coremap's own /proc/interrupts parser give the oracle."""
from __future__ import annotations

from app.machine.topology import read_topology
from app.parse.interrupts import parse_interrupts
from app.sources.host import Cleaner
from app.sources.prometheus import remap_columns
from app.sysroot import SysRoot
from tests.machines import extract


def test_columns_map_to_the_online_cpus_as_the_kernels_header_names_them():
    online = read_topology(SysRoot(extract("offline-cpu0-node0"))).online
    assert online[0] == 4 and 0 not in online
    # /proc/interrupts as the kernel prints it there (kernel/irq/proc.c: a CPUn header per online CPU),
    # one row whose count in column i is i + 1: what node_exporter exports as cpu="i".
    header = "".join(f"{'CPU' + str(c):>11}" for c in online)
    row = " 24:" + "".join(f"{i + 1:>11}" for i in range(len(online))) + "  IR-PCI-MSI 1-edge eth0"
    oracle = parse_interrupts(header + "\n" + row + "\n")
    by_cpu = dict(zip(oracle.cpus, oracle.rows[0].counts))
    exported = {i: float(i + 1) for i in range(len(online))}          # cpu label = column index
    cleaner = Cleaner("h")
    assert remap_columns(exported, online, cleaner) == {c: float(v) for c, v in by_cpu.items()}
    assert cleaner.bad == 0


def test_a_column_past_the_online_cpus_is_dropped_and_counted():
    cleaner = Cleaner("h")
    assert remap_columns({0: 5.0, 1: 6.0, 2: 7.0}, (4, 9), cleaner) == {4: 5.0, 9: 6.0}
    assert cleaner.bad == 1 and cleaner.note().startswith("h: 1 value that no counter can hold")
