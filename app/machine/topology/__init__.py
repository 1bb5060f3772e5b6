"""The CPU topology of a machine: read_topology(SysRoot) -> Topology, and layout(Topology) -> Group,
the Qt-free tree the window draws. This package holds one module per concern; the names callers
use are imported here.

- model.py: the frozen records (Topology, Cpu, Core, Cache, NumaNode, Package);
- files.py: the shared file readers, and read_online_cpus / read_cpu_ids;
- cpus.py: possible/present/online sets, each cpuN folder, cores, caches, L3 groups, clusters;
- nodes.py: NUMA nodes; kinds.py: P/E cores of hybrids; isolation.py: isolated and nohz_full CPUs;
- reader.py: read_topology, which runs the steps above; layout.py: Group and layout().

Sources, in order of trust (Documentation/admin-guide/cputopology.rst,
Documentation/ABI/testing/sysfs-devices-system-cpu, Documentation/ABI/stable/sysfs-devices-node):
- sys/devices/system/cpu/{online,offline,possible,present,isolated,nohz_full}, and cpuN/online;
- cpuN/topology/: raw ids (core_id, physical_package_id, die_id, cluster_id) and sibling lists.
  Hardware threads are grouped into cores by their sibling lists, never by core_id: core_id is
  unique only within a package on x86, within a die on multi-die Opterons, and not at all on s390.
  Offline CPUs have no topology/ folder (drivers/base/topology.c removes it on hotplug);
- cpuN/cache/indexK/ for the caches, cpuN/cpu_capacity and cpuN/cpufreq for core kinds and clocks;
- sys/devices/system/node/nodeK/ for NUMA nodes (cpulist, or cpumap on old kernels, or the
  cpuN links), plus distance and meminfo;
- /proc/cpuinfo for the model name and, when not live, the architecture; /proc/cmdline for
  isolcpus=/nohz_full= when the sysfs files are not there.
Every value that could not be known is None, and `Topology.notes` says why.
"""
from app.machine.topology.files import read_cpu_ids, read_online_cpus
from app.machine.topology.isolation import isolation_label
from app.machine.topology.layout import Group, layout
from app.machine.topology.model import Cache, Core, Cpu, NumaNode, Package, Topology
from app.machine.topology.reader import read_topology

__all__ = ["Cache", "Core", "Cpu", "Group", "NumaNode", "Package", "Topology", "isolation_label", "layout",
           "read_cpu_ids", "read_online_cpus", "read_topology"]
