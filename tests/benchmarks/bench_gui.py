"""The window's costs: grid recolour on 1152 CPUs, first frame, coremap's own CPU while sampling.

    PYTHONPATH=. QT_QPA_PLATFORM=offscreen python -m tests.benchmarks.bench_gui [--seconds 20]

1. Recolour: TopologyView.set_state on a 1152-CPU machine (the Kunpeng 920 fixture replicated nine
   times: 18 packages, 36 nodes, 288 clusters), states alternating between two sets of per-CPU rates
   so most cells change colour every tick. Peer: rebuilding the scene for each state (what a view
   that does not keep its items would do). Target: <= 8 ms per tick.
2. First frame (warm): MainWindow built, first state applied, window grabbed, for master.internal
   (112 CPUs) and the 1152-CPU machine. Peer: one Sampler.tick() on the same root. Target <= 1.5 s.
3. CPU use: the window sampling this machine every 1 s, offscreen, with a helper process holding
   2,000 sleeping threads, over --seconds; process CPU time (all threads, getrusage), split into the
   UI thread and the sampler's worker (/proc/self/task). Peer: the same window without the helper's
   threads. --rounds alternating pairs (order swapped each round), medians. Target <= 2% of one core.
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from widgets import harness  # noqa: E402  (Qt is reached through widgets/ only)
from app.machine.sample import MachineSample  # noqa: E402
from app.machine.topology import read_topology  # noqa: E402
from app.sampling.rates import CpuRates, Rates  # noqa: E402
from app.sampling.sampler import Sampler  # noqa: E402
from app.sampling.machine_state import MachineState  # noqa: E402
from app.sysroot import SysRoot  # noqa: E402
from tests.machines import extract  # noqa: E402


def widened(topo, copies: int):
    """`copies` side-by-side copies of a topology, CPU ids, packages, nodes and groups offset."""
    n_cpu = max(c.id for c in topo.cpus) + 1
    n_node = max((n.id for n in topo.nodes), default=0) + 1
    n_core, n_l3, n_cl = len(topo.cores), len(topo.l3_groups), len(topo.clusters)
    pkg_ids = [p.id for p in topo.packages]
    pkg_span = (max(pkg_ids) + 1) if pkg_ids and None not in pkg_ids else 0

    def shift(ids, k):
        return tuple(i + k * n_cpu for i in ids)

    cpus, cores, nodes, packages, l3, clusters, caches = [], [], [], [], [], [], []
    for k in range(copies):
        for c in topo.cpus:
            cpus.append(dataclasses.replace(
                c, id=c.id + k * n_cpu, siblings=shift(c.siblings, k),
                package_id=None if c.package_id is None else c.package_id + k * pkg_span,
                node=None if c.node is None else c.node + k * n_node,
                l3=None if c.l3 is None else c.l3 + k * n_l3,
                cluster=None if c.cluster is None else c.cluster + k * n_cl))
        for core in topo.cores:
            cores.append(dataclasses.replace(
                core, index=core.index + k * n_core, cpus=shift(core.cpus, k),
                package_id=None if core.package_id is None else core.package_id + k * pkg_span,
                node=None if core.node is None else core.node + k * n_node))
        for n in topo.nodes:
            nodes.append(dataclasses.replace(n, id=n.id + k * n_node, cpus=shift(n.cpus, k), distances={}))
        for p in topo.packages:
            packages.append(dataclasses.replace(
                p, id=None if p.id is None else p.id + k * pkg_span, index=p.index + k * len(topo.packages),
                cpus=shift(p.cpus, k), cores=tuple(i + k * n_core for i in p.cores)))
        l3.extend(shift(g, k) for g in topo.l3_groups)
        clusters.extend(shift(g, k) for g in topo.clusters)
        caches.extend(dataclasses.replace(c, cpus=shift(c.cpus, k)) for c in topo.caches)
    online = tuple(c.id for c in cpus if c.online)
    return dataclasses.replace(
        topo, cpus=tuple(cpus), online=online, offline=(), possible=online, present=online,
        isolated=(), nohz_full=(), nodes=tuple(nodes), packages=tuple(packages), cores=tuple(cores),
        caches=tuple(caches), l3_groups=tuple(l3), clusters=tuple(clusters))


def rate_state(topo, generation: int, seed: int) -> MachineState:
    rnd = random.Random(seed)
    per_cpu = {}
    for c in topo.online:
        irq = 10 ** rnd.uniform(0, 5)
        per_cpu[c] = CpuRates(c, irq, {"NET_RX": irq / 3}, irq / 2, busy_pct=rnd.uniform(0, 100),
                              irq_softirq_pct=rnd.uniform(0, 30))
    rates = Rates(1.0, tuple(topo.online), per_cpu, {}, {})
    return MachineState(generation, topo, MachineSample(float(generation)), rates)


def bench_recolour(app, topo, rounds: int = 31) -> None:
    from widgets.topology.view import TopologyView
    view = TopologyView()
    view.resize(1400, 900)
    view.show()
    states = [rate_state(topo, g, g % 2) for g in range(1, rounds * 2 + 2)]
    view.set_state(states[0])
    app.processEvents()
    recolour, rebuild = [], []
    for i in range(rounds):
        # Alternate the two measurements so drift in the machine affects both alike.
        s = states[2 * i + 1]
        t0 = time.perf_counter()
        view.set_state(s)
        recolour.append(time.perf_counter() - t0)
        app.processEvents()
        t0 = time.perf_counter()
        view.set_topology(topo)
        view._recolor(s)
        rebuild.append(time.perf_counter() - t0)
        app.processEvents()
    r, b = statistics.median(recolour), statistics.median(rebuild)
    changed = sum(1 for c in topo.online
                  if states[1].rates.per_cpu[c].irq_per_s != states[2].rates.per_cpu[c].irq_per_s)
    print(f"recolour {len(topo.online)} CPUs ({changed} change per tick): median {r * 1000:.2f} ms/tick "
          f"(target <= 8 ms); rebuild-scene peer {b * 1000:.1f} ms; ratio recolour/rebuild {r / b:.3f}")
    view.close()
    view.deleteLater()
    app.processEvents()


def first_frame(app, sampler_root: SysRoot, topo=None) -> tuple[float, float]:
    from widgets.application import build_window
    t0 = time.perf_counter()
    sampler = Sampler(sampler_root)
    state = sampler.tick()
    t_tick = time.perf_counter() - t0
    if topo is not None:
        state = rate_state(topo, 1, 0)
    t0 = time.perf_counter()
    w = build_window(None)
    w.resize(1600, 1000)
    w.show()
    w.set_state(state)
    app.processEvents()
    w.grab()
    t_frame = time.perf_counter() - t0
    harness.dispose(w)
    return t_frame, t_tick


HELPER = r"""
import sys, threading
stop = threading.Event()
threads = [threading.Thread(target=stop.wait, daemon=True) for _ in range(int(sys.argv[1]))]
for t in threads: t.start()
print("ready", flush=True)
sys.stdin.read()
"""


def cpu_while_sampling(app, seconds: float, helper_threads: int) -> float:
    from app.sources.live import host_of_root
    from widgets.application import build_window
    helper = None
    if helper_threads:
        helper = subprocess.Popen([sys.executable, "-c", HELPER, str(helper_threads)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        helper.stdout.readline()
    try:
        w = build_window(host_of_root(SysRoot("/"), interval=1.0), interval=1.0)
        thread = w.sampler_thread
        w.resize(1600, 1000)
        w.show()
        applied = []
        w.state_applied.connect(lambda s: applied.append(s.generation))
        thread.start()
        harness.run_for(3.0)                   # warm up: first ticks, first table fill
        gc.collect()
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        c0 = _thread_cpu()
        t0 = time.monotonic()
        n0 = len(applied)
        harness.run_for(seconds)
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        c1 = _thread_cpu()
        wall = time.monotonic() - t0
        ticks = len(applied) - n0
        n_threads = len(w.state.sample.tasks.tasks) if w.state and w.state.sample.tasks else 0
        thread.stop()
        harness.dispose(w)
    finally:
        if helper is not None:
            helper.stdin.close()
            helper.wait(10)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    pct = 100.0 * cpu / wall
    ui = c1.get("python", 0.0) - c0.get("python", 0.0)
    worker = c1.get("coremap-sampler", 0.0) - c0.get("coremap-sampler", 0.0)
    print(f"  sampling every 1 s ({ticks} states applied), {n_threads} threads on the machine: "
          f"{cpu:.2f} s CPU in {wall:.1f} s = {pct:.2f}% of one core "
          f"(UI thread {100 * ui / wall:.2f}%, sampler thread {100 * worker / wall:.2f}%)")
    return pct


def _thread_cpu() -> dict[str, float]:
    """CPU seconds per thread name of this process (task/TID/stat utime + stime)."""
    out: dict[str, float] = {}
    tck = os.sysconf("SC_CLK_TCK")
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue        # a Qt pool thread ended between listdir and open
        r = data.rfind(b")")
        name = data[data.find(b"(") + 1:r].decode()
        rest = data[r + 2:].split()
        out[name] = out.get(name, 0.0) + (int(rest[11]) + int(rest[12])) / tck
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0, help="CPU-use measurement window")
    ap.add_argument("--threads", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3, help="alternating CPU-use pairs")
    args = ap.parse_args()
    app = harness.application("bench_gui")
    big = widened(read_topology(SysRoot(extract("128arm-2pa2n8cluster4co"))), 9)
    print(f"synthetic machine: {len(big.online)} CPUs, {len(big.packages)} packages, "
          f"{len(big.nodes)} nodes, {len(big.cores)} cores")
    bench_recolour(app, big)

    master = SysRoot(extract("master.internal"))
    first_frame(app, master)                 # cold: imports, fonts, caches
    for name, root, topo in (("master.internal (112)", master, None),
                             ("synthetic 1152", SysRoot(extract("128arm-2pa2n8cluster4co")), big)):
        frames, ticks = [], []
        for _ in range(3):
            f, t = first_frame(app, root, topo)
            frames.append(f)
            ticks.append(t)
        f, t = statistics.median(frames), statistics.median(ticks)
        print(f"first frame (warm) {name}: {f * 1000:.0f} ms (target <= 1500 ms); "
              f"peer Sampler.tick {t * 1000:.0f} ms; ratio {f / t:.1f}")

    print(f"coremap CPU use over {args.seconds:g} s (target <= 2% of one core):")
    bases, loads = [], []
    for i in range(args.rounds):
        for extra in ((0, args.threads) if i % 2 == 0 else (args.threads, 0)):
            (loads if extra else bases).append(cpu_while_sampling(app, args.seconds, extra))
    base, loaded = statistics.median(bases), statistics.median(loads)
    print(f"  median of {args.rounds}: with {args.threads} extra threads {loaded:.2f}%, without {base:.2f}%; "
          f"ratio {loaded / max(base, 1e-9):.2f}")


if __name__ == "__main__":
    main()
