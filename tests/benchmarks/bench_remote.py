"""Remote machines over ssh (issue 15): time from --host to the first frame, bytes per tick on the wire,
and the window's CPU use for a remote host beside a local one.

    PYTHONPATH=. QT_QPA_PLATFORM=offscreen python -m tests.benchmarks.bench_remote [--seconds 20] [--rounds 3]

It starts its own OpenSSH server on 127.0.0.1 (tests/remote/sshd.py), so "the server" is this machine
over a real ssh connection (its crypto, its multiplexing, a real agent process); a LAN adds its
round trip to each tick, nothing else.

1. First frame: from nothing to the window's first frame (built, first state applied, grabbed), split
   into ssh + agent start, first tick (read there, encoded, sent, decoded here), and the window. Cold:
   no shared ssh connection yet; warm: ControlMaster up (a second window or command); shipped: the
   agent sent to a server without coremap (first time, then from its cache). Peer: the same window on a
   local Sampler. Also master.internal (112 CPUs, 1881 IRQs) served by the agent as a capture there,
   against the same capture opened here. And the CLI: `coremap --host s1 topology` against
   `coremap topology`, each a whole process.
2. Bytes per tick: master.internal through the agent's encoder (app/remote/codec.py StateSender),
   its counters advancing each second with Poisson noise around 100,000 interrupts/s, 50,000
   softirqs/s, spread over its IRQs, CPUs and softirq kinds in the
   proportions of its own counters (it has no /proc/stat, so no CPU times) (the capture has one set of counters; a state per tick needs them
   to move). Peer: the size of its /proc/interrupts, /proc/softirqs and /proc/stat, which a client
   that read the files remotely would fetch each tick. Then this machine live through the real agent
   over ssh: bytes the agent sent per tick (threads included), against the same files' size here.
3. CPU use: the window sampling s1 over ssh every 1 s against the same window sampling this machine,
   --seconds each, alternating --rounds pairs; the window process's CPU (getrusage), and the agent's
   and ssh's processes as well (they run here too, since the server is here).
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np  # noqa: E402

from widgets import harness  # noqa: E402  (Qt is reached through widgets/ only)
from app.machine.sample import MachineSample  # noqa: E402
from app.parse.interrupts import InterruptTable, SoftirqTable  # noqa: E402
from app.parse.stat import CpuTimes, StatSample  # noqa: E402
from app.sampling.rates import rates as compute_rates  # noqa: E402
from app.remote.codec import StateReceiver, StateSender  # noqa: E402
from app.remote.hosts import parse_host  # noqa: E402
from app.remote.protocol import dumps  # noqa: E402
from app.remote.sampler import RemoteSampler  # noqa: E402
from app.remote.transport import SshTransport  # noqa: E402
from app.sampling.sampler import Sampler  # noqa: E402
from app.sysroot import SysRoot  # noqa: E402
from tests.machines import extract  # noqa: E402
from tests.remote.sshd import REPO, Sshd, unavailable  # noqa: E402

IRQS_PER_S, SOFTIRQS_PER_S, TICKS_PER_S = 100_000, 50_000, 100


# -- 1. first frame ---------------------------------------------------------------------------------------
def first_frame(app, make_sampler) -> dict[str, float]:
    from widgets.application import build_window
    t0 = time.perf_counter()
    sampler = make_sampler()
    connect = getattr(sampler, "connect", None)
    if connect is not None:
        connect()
    t1 = time.perf_counter()
    state = sampler.tick()
    t2 = time.perf_counter()
    w = build_window(None)
    w.resize(1600, 1000)
    w.show()
    w.set_state(state)
    app.processEvents()
    w.grab()
    t3 = time.perf_counter()
    harness.dispose(w)
    if hasattr(sampler, "close"):
        sampler.close()
    return {"connect": t1 - t0, "tick": t2 - t1, "window": t3 - t2, "total": t3 - t0}


def _ms(d: dict[str, float]) -> str:
    return (f"{d['total'] * 1000:.0f} ms (connect {d['connect'] * 1000:.0f}, first tick {d['tick'] * 1000:.0f}, "
            f"window {d['window'] * 1000:.0f})")


def exit_masters(sshd: Sshd) -> None:
    """Close the shared connections, so the next connect is cold."""
    for alias in ("s1", "clean"):
        t = SshTransport(parse_host(alias))
        subprocess.run([*t.command, *t.multiplex_options(), "-O", "exit", alias], capture_output=True, timeout=10)
    time.sleep(0.2)


def bench_first_frame(app, sshd: Sshd, rounds: int) -> None:
    s1 = parse_host("s1")
    master = str(extract("master.internal"))
    first_frame(app, lambda: Sampler(SysRoot("/")))          # imports, fonts, caches
    rows = {"local (this machine)": [], "--host s1, cold (new ssh connection)": [],
            "--host s1, warm (shared connection up)": [], "--host clean, shipped agent, first time": [],
            "--host clean, shipped agent, from its cache": [],
            "master.internal: --root here": [], "master.internal: --host s1 --root there": []}
    for _ in range(rounds):
        rows["local (this machine)"].append(first_frame(app, lambda: Sampler(SysRoot("/"))))
        exit_masters(sshd)
        rows["--host s1, cold (new ssh connection)"].append(first_frame(app, lambda: RemoteSampler(s1)))
        rows["--host s1, warm (shared connection up)"].append(first_frame(app, lambda: RemoteSampler(s1)))
        shutil.rmtree(sshd.folder / "cache-clean", ignore_errors=True)
        os.environ["COREMAP_REMOTE_PYTHON"] = "/usr/bin/python3"
        try:
            rows["--host clean, shipped agent, first time"].append(
                first_frame(app, lambda: RemoteSampler(parse_host("clean"))))
            rows["--host clean, shipped agent, from its cache"].append(
                first_frame(app, lambda: RemoteSampler(parse_host("clean"))))
        finally:
            del os.environ["COREMAP_REMOTE_PYTHON"]
        rows["master.internal: --root here"].append(first_frame(app, lambda: Sampler(SysRoot(master))))
        rows["master.internal: --host s1 --root there"].append(
            first_frame(app, lambda: RemoteSampler(s1, root=master)))
    print(f"1. time to the first frame (median of {rounds}):")
    med = {}
    for name, runs in rows.items():
        med[name] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"   {name:<46} {_ms(med[name])}")
    local = med["local (this machine)"]["total"]
    for name in ("--host s1, cold (new ssh connection)", "--host s1, warm (shared connection up)"):
        print(f"   ratio {name.split(',')[1].strip()} / local: {med[name]['total'] / local:.2f}")
    m_here = med["master.internal: --root here"]["total"]
    print(f"   ratio master.internal over ssh / here: {med['master.internal: --host s1 --root there']['total'] / m_here:.2f}")
    cli = {"coremap topology": [], "coremap --host s1 topology (warm)": []}
    env = dict(os.environ, PYTHONPATH=str(REPO), **sshd.env)
    for _ in range(rounds):
        for name, argv in (("coremap topology", ["topology"]),
                           ("coremap --host s1 topology (warm)", ["--host", "s1", "topology"])):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, env=env, check=True)
            cli[name].append(time.perf_counter() - t0)
    a, b = (statistics.median(v) for v in cli.values())
    print(f"   CLI, whole process: coremap topology {a * 1000:.0f} ms; coremap --host s1 topology {b * 1000:.0f} ms "
          f"(ratio {b / a:.2f})")


# -- 2. bytes per tick --------------------------------------------------------------------------------------
class AdvancingCounters:
    """master.internal's counters moving each second (see the module docstring, 2.)."""

    def __init__(self, state, seed: int = 1):
        self.rng = np.random.default_rng(seed)
        self.state = state
        s = state.sample
        self.irq_mean = self._means([r.counts for r in s.interrupts.rows], IRQS_PER_S)
        kinds = list(s.softirqs.counts)
        self.soft_mean = self._means([s.softirqs.counts[k] for k in kinds], SOFTIRQS_PER_S)
        self.kinds = kinds
        self.fields = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
        if s.stat is not None:          # master.internal's capture holds no proc/stat
            times = s.stat.cpus
            self.cpu_ids = sorted(times)
            share = np.array([[getattr(times[c], f) for f in self.fields] for c in self.cpu_ids], dtype=float)
            share = share / np.maximum(share.sum(axis=1, keepdims=True), 1)
            self.tick_mean = share * TICKS_PER_S

    @staticmethod
    def _means(rows, total_rate):
        width = max((len(r) for r in rows), default=0)
        # Rows with one global count (ERR, MIS) stay as they are: zeros here.
        m = np.array([list(r) if len(r) == width else [0] * width for r in rows], dtype=float)
        return m * (total_rate / max(m.sum(), 1))

    def next(self, prev: MachineSample, t: float) -> MachineSample:
        s = prev
        add = self.rng.poisson(self.irq_mean)
        rows = tuple(replace(r, counts=tuple(int(c + d) for c, d in zip(r.counts, a)), total=int(r.total + a.sum()))
                     if r.counts else r for r, a in zip(s.interrupts.rows, add))
        add = self.rng.poisson(self.soft_mean)
        soft = {k: tuple(int(c + d) for c, d in zip(s.softirqs.counts[k], a)) for k, a in zip(self.kinds, add)}
        stat = s.stat
        if stat is not None:
            add = self.rng.poisson(self.tick_mean)
            cpus = {c: replace(stat.cpus[c], **{f: getattr(stat.cpus[c], f) + int(d) for f, d in zip(self.fields, a)})
                    for c, a in zip(self.cpu_ids, add)}
            total = CpuTimes(*(sum(getattr(x, f) for x in cpus.values()) for f in CpuTimes.__dataclass_fields__))
            stat = replace(stat, total=total, cpus=cpus)
        return MachineSample(t, InterruptTable(s.interrupts.cpus, rows), SoftirqTable(s.softirqs.cpus, soft),
                             stat, s.tasks)


def bench_bytes(sshd: Sshd, ticks: int) -> None:
    root = SysRoot(extract("master.internal"))
    first = Sampler(root).tick()
    files = sum(len(root.read_optional(root.proc(n)) or "") for n in ("interrupts", "softirqs", "stat"))
    interrupts = len(root.read_bytes(root.proc("interrupts")))
    gen = AdvancingCounters(first)
    sender, receiver = StateSender(), StateReceiver()
    sample, sizes, enc, dec = first.sample, [], [], []
    for k in range(ticks + 1):
        nxt = gen.next(sample, sample.time + 1.0)
        state = replace(first, generation=k + 1, sample=nxt, rates=compute_rates(sample, nxt, 1.0), live=True)
        t0 = time.perf_counter()
        line = dumps(sender.form(state))
        t1 = time.perf_counter()
        got = receiver.apply(__import__("json").loads(line))
        t2 = time.perf_counter()
        assert got == state
        sizes.append(len(line))
        enc.append(t1 - t0)
        dec.append(t2 - t1)
        sample = nxt
    per = statistics.median(sizes[1:])
    print(f"2. bytes per tick, master.internal (112 CPUs, {len(first.sample.interrupts.rows)} IRQ rows), "
          f"counters advancing ({IRQS_PER_S:,} IRQs/s, {SOFTIRQS_PER_S:,} softirqs/s), median of {ticks} ticks:")
    print(f"   first (whole) state {sizes[0]:,} B; each tick {per:,.0f} B (encode {statistics.median(enc[1:]) * 1000:.1f} ms "
          f"there, decode {statistics.median(dec[1:]) * 1000:.1f} ms here)")
    print(f"   peer: /proc/interrupts {interrupts:,} B; with softirqs {files:,} B (the capture holds no stat); "
          f"ratio tick / interrupts {per / interrupts:.4f} ({interrupts / per:.0f}x smaller)")
    # This machine, live, through the real agent over ssh.
    here = SysRoot("/")
    live_files = sum(len(here.read_bytes(here.proc(n))) for n in ("interrupts", "softirqs", "stat"))
    s = RemoteSampler(parse_host("s1"), interval=1.0)
    s.connect()
    b = []
    try:
        for _ in range(ticks + 1):
            before = s.client.bytes_read
            s.tick()
            b.append(s.client.bytes_read - before)
            time.sleep(1.0)
    finally:
        s.close()
    n = len(Sampler(here).tick().sample.tasks.tasks)
    print(f"   this machine live over ssh ({len(here.read_bytes(here.proc('interrupts'))):,} B of /proc/interrupts, "
          f"{n} threads): first state {b[0]:,} B, then {statistics.median(b[1:]):,.0f} B per tick "
          f"(threads included); the three counter files alone are {live_files:,} B")


# -- 3. CPU use -------------------------------------------------------------------------------------------------
def _proc_cpu(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return 0.0          # gone
    rest = data[data.rfind(b")") + 2:].split()
    return (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")


def _children_named(word: bytes) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if word in f.read():
                        out.append(int(d))
            except OSError:
                continue
    return out


def cpu_while_sampling(app, seconds: float, remote: bool) -> tuple[float, float]:
    """(the window process's % of one core, the agent's and ssh's % of one core)."""
    from app.host import LocalHost
    from app.remote.host import RemoteHost
    from widgets.application import build_window
    if remote:
        host = RemoteHost(parse_host("s1"), interval=1.0)
        client = host.connect()
        others = [client.hello["pid"], client.proc.proc.pid]
    else:
        host = LocalHost(interval=1.0)
        others = []
    w = build_window(host, interval=1.0)
    thread = w.sampler_thread
    w.resize(1600, 1000)
    w.show()
    thread.start()
    harness.run_for(3.0)
    gc.collect()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    o0 = sum(_proc_cpu(p) for p in others)
    t0 = time.monotonic()
    harness.run_for(seconds)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    o1 = sum(_proc_cpu(p) for p in others)
    wall = time.monotonic() - t0
    thread.stop()
    harness.dispose(w)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return 100 * cpu / wall, 100 * (o1 - o0) / wall


def bench_cpu(app, seconds: float, rounds: int) -> None:
    print(f"3. CPU use, the window sampling every 1 s, {seconds:g} s each, {rounds} alternating pairs:")
    local, remote, agent = [], [], []
    for i in range(rounds):
        for is_remote in ((False, True) if i % 2 == 0 else (True, False)):
            win, other = cpu_while_sampling(app, seconds, is_remote)
            (remote if is_remote else local).append(win)
            if is_remote:
                agent.append(other)
    lw, rw, ag = statistics.median(local), statistics.median(remote), statistics.median(agent)
    print(f"   window on this machine {lw:.2f}% of one core; window on s1 over ssh {rw:.2f}% "
          f"(ratio {rw / max(lw, 1e-9):.2f}); the server's agent and the ssh client {ag:.2f}% more")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ticks", type=int, default=20)
    args = ap.parse_args()
    why = unavailable()
    if why is not None:
        print(f"bench_remote: skipped: {why}")
        return
    folder = Path(tempfile.mkdtemp(prefix="cm-bench-"))
    sshd = Sshd(folder).start()
    os.environ.update(sshd.env)
    os.environ.setdefault("COREMAP_STATE_DIR", str(folder / "local-state"))
    random.seed(1)
    try:
        app = harness.application("bench_remote")
        bench_first_frame(app, sshd, args.rounds)
        bench_bytes(sshd, args.ticks)
        bench_cpu(app, args.seconds, args.rounds)
    finally:
        sshd.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
