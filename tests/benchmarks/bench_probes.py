"""Probes against their peers, measured in the same run (alternating A/B, >= 4 pairs, medians):

  jitter loop period   vs one raw rdtsc read          target ratio <= 1.5
  jitter gaps >= 10 us vs oslat on the same CPU        target ratio in [0.8, 1.25]
  wakeup p50           vs cyclictest, both defaults    target median pair ratio in [0.75, 1.33]
                       and both at SCHED_FIFO 80
  c2c one-way          vs a plain-C ping-pong          target within +-15%
  counters (software)  vs perf stat                    target within 5%
  sweep                flags a CPU loaded by a 10% SCHED_FIFO hog

How each comparison is kept fair: the same CPU, the same duration and threshold, both tools
mlockall()ed, this script's threads kept off the measured CPU while a probe streams its lines there
(as oslat and cyclictest keep their main thread off), the order of the two swapped every pair; c2c
alternates single ~1 ms batches of the probe's loop and a plain-C reference in one process, so both
see the same vCPU placement. BENCH_PAIRS (default 6) sets the number of pairs.

Run: `python -m tests.benchmarks bench_probes` (as root, on a machine with >= 2 CPUs and rt-tests,
linux-perf and a C compiler installed). Prints figures; asserts nothing. Sections can be named:
`python -m tests.benchmarks.bench_probes sweep --sweep-repeats 10` runs only the sweep, 10 sweeps with
the hog and 10 without (default BENCH_PAIRS each).
"""
from __future__ import annotations

import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from probes import histogram as H
from probes import _native
from probes.runner import ProbeRun

PAIRS = int(os.environ.get("BENCH_PAIRS", "6"))
CPUS = sorted(os.sched_getaffinity(0))
CPU = CPUS[-1]
OTHER = [c for c in CPUS if c != CPU] or CPUS
TMP = Path(tempfile.mkdtemp(prefix="bench_probes_"))


def med(xs):
    return statistics.median(xs)


def report(name, ours, peer, lo, hi, unit="", paired=False):
    """paired: the ratio is the median of ours[i] / peer[i] rather than of the two medians - for runs
    taken moments apart that share a state the machine flips between (c2c: a vCPU placement), where
    the ratio of medians compares whichever mode each side happened to catch more of."""
    if paired:
        r = med([o / p for o, p in zip(ours, peer)])
    else:
        r = med(ours) / med(peer) if med(peer) else float("nan")
    ok = "ok" if lo <= r <= hi else "OUT OF RANGE"
    print(f"{name:<34} ours {med(ours):>12.4g}{unit}  peer {med(peer):>12.4g}{unit}  ratio {r:6.3f}  "
          f"target [{lo}, {hi}] {ok}   (ours {['%.4g' % x for x in ours]}, peer {['%.4g' % x for x in peer]})",
          flush=True)


def _set_all_threads(cpus):
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            # a reader thread of a finished probe exited between listdir and the call
            pass


def probe(name, args, timeout=120, off_cpu=None):
    """Run a probe to its end. off_cpu: keep this script's threads (main and the ProbeRun readers that
    parse each JSON line as it arrives) off that CPU while the probe measures there, as oslat keeps
    its main thread on --cpu-main-thread (default 0), away from the CPUs it measures."""
    run = ProbeRun.start(name, [str(a) for a in args])
    if off_cpu is not None:
        _set_all_threads(set(OTHER))  # after the fork: the probe itself keeps the full mask
    try:
        rc = run.wait(timeout)
    finally:
        if off_cpu is not None:
            _set_all_threads(set(CPUS))
        if run.running:
            run.cancel()
    if rc != 0:
        raise SystemExit(f"{name} {args}: exit {rc}: {run.error() or run.stderr_lines[-3:]}")
    return run.lines


# ------------------------------------------------------------------------------- 1. loop vs rdtsc
def bench_loop():
    os.sched_setaffinity(0, {CPU})
    ours, peer = [], []
    for _ in range(PAIRS):
        peer.append(_native.tsc_info()["rdtsc_ns"])
        ours.append(_native.jitter_chunk(200_000_000, 1000, 0, 0)["loop_ns"])
    os.sched_setaffinity(0, set(CPUS))
    report("jitter loop / rdtsc read (ns)", ours, peer, 0, 1.5, " ns")


# ------------------------------------------------------------------------------- 2. jitter vs oslat
def bench_oslat():
    if not shutil.which("oslat"):
        print("oslat: not installed; skipped")
        return
    # Same CPU, same 2 s, same threshold; both mlockall() (oslat always; ours in lock_memory) and
    # both keep their consumer off the measured CPU. oslat's key k is the bucket [k-1, k) us
    # (index = cycles / MHz rounded down, labelled index + 1; rt-tests 2.4 src/oslat/oslat.c), so
    # "lo >= 10 us" is index >= 10, i.e. cycles >= 10 us worth, which is our `d >= threshold`.
    # The order alternates (oslat first in even pairs), so drift over the run hits both alike.
    def run_oslat(i):
        out = TMP / f"oslat{i}.json"
        subprocess.run(["oslat", "--cpu-list", str(CPU), "--cpu-main-thread", str(OTHER[0]), "-D", "2",
                        f"--json={out}"], check=True, capture_output=True)
        t = H.read_oslat_json(out.read_text())[0]
        return sum(c for lo, _, c in t["buckets"] if lo >= 10_000) / t["duration_s"]

    exact = []

    def run_ours():
        lines = probe("jitter", ["--cpu", CPU, "--seconds", 2, "--threshold-ns", 10_000], off_cpu=CPU)
        if not next(l for l in lines if l["type"] == "hello").get("mlocked"):
            print("  (jitter ran without mlockall: not root?)")
        ivs = [l for l in lines if l["type"] == "interval"]
        sampled = sum(l["sampled_ns"] for l in ivs) / 1e9
        # what the run table and the text lead with: the loop's own exact count of gaps >= 10 us
        exact.append(sum(n for iv in ivs for step, n, _lost in iv["at_least"] if step == 10_000) / sampled)
        return sum(c for iv in ivs for lo, _, c in iv["buckets"] if lo >= 10_000) / sampled

    ours, peer = [], []
    for i in range(PAIRS):
        if i % 2 == 0:
            peer.append(run_oslat(i))
            ours.append(run_ours())
        else:
            ours.append(run_ours())
            peer.append(run_oslat(i))
    report(f"gaps >= 10 us per second, CPU {CPU}", ours, peer, 0.8, 1.25, "/s")
    report(f"gaps >= 10 us/s (exact count), CPU {CPU}", exact, peer, 0.8, 1.25, "/s")


# ------------------------------------------------------------------------------- 3. wakeup vs cyclictest
def bench_cyclictest():
    """Wakeup against cyclictest twice, in alternated pairs on one CPU, both mlockall()ed:
    their defaults (SCHED_OTHER, a 1 ms timer, /dev/cpu_dma_latency held at 0 by both: cyclictest
    unless --laptop, coremap unless --no-dma-latency), and the form's "like cyclictest" preset
    (SCHED_FIFO 80, whose timers get no slack in either). The ratio is the median of the pairs'
    p50 ratios: the defaults must agree within the noise, [0.75, 1.33]."""
    if not shutil.which("cyclictest"):
        print("cyclictest: not installed; skipped")
        return
    for name, ct_args, our_args in (
            ("wakeup p50, both defaults, 1 ms", [], []),
            ("wakeup p50, fifo 80, 1 ms", ["-p", "80"], ["--policy", "fifo", "--priority", 80])):
        ours, peer, held = [], [], []

        def run_ct(i):
            out = TMP / f"ct{i}.json"
            subprocess.run(["cyclictest", "-q", "-l", "2000", "-i", "1000", *ct_args, "-t", "1", "-a", str(CPU),
                            "-h", "10000", f"--json={out}"], check=True, capture_output=True)
            t = H.read_cyclictest_json(out.read_text())[0]
            # cyclictest truncates to whole us: key k is [k, k+1) us; compare at the bucket midpoint
            peer.append(H.percentiles(H.buckets_to_histogram(t["buckets"]))["p50"])

        def run_ours(_i):
            from probes.wakeup.measure import summarize
            s = summarize(probe("wakeup", ["--cpu", CPU, "--seconds", 2, *our_args], off_cpu=CPU))
            held.append(s["dma_latency"]["held"])
            ours.append(s["percentiles"]["p50"])

        for i in range(PAIRS):
            for side in ((run_ct, run_ours) if i % 2 == 0 else (run_ours, run_ct)):
                side(i)
        if not all(held):
            print("  (coremap could not hold /dev/cpu_dma_latency: not root?)")
        report(name, ours, peer, 0.75, 1.33, " ns", paired=True)


# ------------------------------------------------------------------------------- 4. c2c vs plain C
# The textbook ping-pong: one flag, seq_cst atomics, one pinned partner thread per call, timed from
# the second round trip (the first waits for the partner to start). Built as a shared object so the
# bench can call it and the probe's own loop (_native.c2c) in one process, batch by batch: on a VM
# the two vCPUs move between host cores (~40 ns one way, ~180 ns, a descheduled vCPU microseconds),
# and only batches taken moments apart see the same placement. The one-way time also depends on the
# line's address (37, 48 or 58 ns for one vCPU pair on this EPYC host, fixed per address), so the
# probe puts each batch on a fresh mmap()ed page, and so does the reference: each side of a pair is
# the median over C2C_PAGES lines at addresses neither side chose.
REF_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
static _Atomic long *flag;
static long N;
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static void *pong(void *a){pin((int)(long)a);for(long i=0;i<N;i++){while(atomic_load(flag)!=2*i+1);atomic_store(flag,2*i+2);}return 0;}
double pingpong(int a,int b,long n){cpu_set_t saved;sched_getaffinity(0,sizeof saved,&saved);N=n;
 void *pg=mmap(0,4096,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS|MAP_POPULATE,-1,0);flag=pg;*flag=0;pin(a);
 pthread_t t;pthread_create(&t,0,pong,(void*)(long)b);struct timespec s,e;
 for(long i=0;i<N;i++){if(i==1)clock_gettime(CLOCK_MONOTONIC,&s);atomic_store(flag,2*i+1);while(atomic_load(flag)!=2*i+2);}
 clock_gettime(CLOCK_MONOTONIC,&e);pthread_join(t,0);sched_setaffinity(0,sizeof saved,&saved);munmap(pg,4096);
 return ((e.tv_sec-s.tv_sec)*1e9+(e.tv_nsec-s.tv_nsec))/(N-1)/2;}
"""
C2C_TRIPS = 2000      # one batch: ~1 ms of round trips, short enough that the placement rarely moves
C2C_PAGES = 8         # batches (lines on distinct pages) per side of a pair
C2C_PAIRS = 12        # alternating pairs for the engine comparison


def bench_c2c():
    if len(CPUS) < 2 or not shutil.which("cc"):
        print("c2c: needs 2 CPUs and cc; skipped")
        return
    import ctypes
    src, lib_path = TMP / "pp.c", TMP / "pp.so"
    src.write_text(REF_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-pthread", str(src), "-o", str(lib_path)], check=True)
    lib = ctypes.CDLL(str(lib_path))
    lib.pingpong.restype = ctypes.c_double
    lib.pingpong.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long]
    a, b = CPUS[0], CPUS[1]

    def ref_side():
        return med([lib.pingpong(a, b, C2C_TRIPS) for _ in range(C2C_PAGES)])

    def our_side():
        # the probe's loop, one batch per page; c2c.py halves round trips the same way
        return med([rt / 2 for rt in _native.c2c(a, b, C2C_TRIPS, C2C_PAGES)])

    ours, peer = [], []
    for i in range(C2C_PAIRS):
        for side in ((ref_side, our_side) if i % 2 == 0 else (our_side, ref_side)):
            (peer if side is ref_side else ours).append(side())
    report(f"c2c one-way {a}<->{b}, engine (ns)", ours, peer, 0.85, 1.15, " ns", paired=True)

    # End to end: the probe process (its median over C2C_PAGES batches) against the reference side
    # taken just before or after it, alternating.
    ours, peer = [], []
    for i in range(PAIRS):
        def ref_run():
            peer.append(ref_side())

        def probe_run():
            lines = probe("c2c", ["--cpu", f"{a},{b}", "--trips", C2C_TRIPS, "--batches", C2C_PAGES])
            ours.append(next(l for l in lines if l["type"] == "interval")["median_ns"])
        for step in ((ref_run, probe_run) if i % 2 == 0 else (probe_run, ref_run)):
            step()
    report(f"c2c one-way {a}<->{b}, probe (ns)", ours, peer, 0.85, 1.15, " ns", paired=True)


# ------------------------------------------------------------------------------- 5. counters vs perf
def find_perf():
    for p in ["/usr/bin/perf", *sorted(glob.glob("/usr/bin/perf_*"))]:
        if os.access(p, os.X_OK) and subprocess.run([p, "--version"], capture_output=True).returncode == 0:
            return p
    return None


# A command whose counts are big enough to compare within 5%: 2,000 short sleeps (a context switch
# each), 1,000 fresh pages touched (a page fault each) and ~20 ms of arithmetic (task-clock).
# `dd` made only 2-6 switches, where one stray switch is 20%.
SWITCHER_C = r"""
#include <stdlib.h>
#include <time.h>
int main(void){struct timespec t={0,20000};volatile unsigned x=1;
 char *p=malloc(1000*4096);for(int i=0;i<1000;i++)p[i*4096]=1;
 for(int i=0;i<2000;i++){nanosleep(&t,0);for(int j=0;j<20000;j++)x=x*1664525u+1013904223u;}
 return p[4096]==1?0:1;}
"""


def bench_perf():
    perf = find_perf()
    if not perf or not shutil.which("cc"):
        print("perf or cc: not found; skipped")
        return
    src, exe = TMP / "switcher.c", TMP / "switcher"
    src.write_text(SWITCHER_C)
    subprocess.run(["cc", "-O2", str(src), "-o", str(exe)], check=True)
    cmd = [str(exe)]
    events = ["context-switches", "cpu-migrations", "page-faults", "task-clock"]
    ours = {e: [] for e in events}
    peer = {e: [] for e in events}

    def run_perf():
        r = subprocess.run([perf, "stat", "-x,", "-e", ",".join(events), "--", *cmd], capture_output=True, text=True)
        for line in r.stderr.splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2] in events and f[0] not in ("<not supported>", "<not counted>"):
                v = float(f[0])
                peer[f[2]].append(v * 1e6 if f[2] == "task-clock" else v)  # perf prints msec

    def run_ours():
        lines = probe("counters", ["--cpu", CPU, "--modes", "unpinned", "--", *cmd])
        counts = next(l for l in lines if l["type"] == "interval")["counts"]
        for e in events:
            ours[e].append(counts[e])

    for i in range(PAIRS):
        for step in ((run_perf, run_ours) if i % 2 == 0 else (run_ours, run_perf)):
            step()
    for e in events:
        if med(peer[e]) == 0 and med(ours[e]) == 0:
            print(f"{'counters ' + e:<34} ours 0  peer 0  (both zero; unpinned, nothing else runs)")
            continue
        report(f"counters {e}", ours[e], peer[e], 0.95, 1.05)


# ------------------------------------------------------------------------------- 6. sweep vs a FIFO hog
HOG_C = r"""
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <time.h>
static long ns(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
int main(int argc,char**argv){int cpu=atoi(argv[1]);cpu_set_t s;CPU_ZERO(&s);CPU_SET(cpu,&s);sched_setaffinity(0,sizeof s,&s);
 struct sched_param p={.sched_priority=50};if(sched_setscheduler(0,SCHED_FIFO,&p))return 1;
 long next=ns();for(;;){long end=next+1000000;while(ns()<end);next+=10000000;
 struct timespec t={next/1000000000L,next%1000000000L};clock_nanosleep(CLOCK_MONOTONIC,TIMER_ABSTIME,&t,0);}}
"""


SWEEP_REPEATS = PAIRS  # --sweep-repeats N: sweeps with the hog and as many without
# --sweep-fifo: run the sweep as SCHED_FIFO 1, under the hog's 50: other engineers' SCHED_OTHER work on
# this shared VM can no longer delay it, the hog (and IRQs, and the host) still can
SWEEP_ARGS: list[str] = []
QUIET_SHARE = 0.05     # a CPU more than 5% busy with other tasks around a sweep makes that sweep "busy"


def _cpu_busy_jiffies():
    """{cpu: (busy, total)} from /proc/stat; idle and iowait are not busy (Documentation/filesystems/
    proc.rst, 1.7). Under NO_HZ the idle figure is timed on idle entry and exit, not sampled by ticks."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            name, *v = line.split()
            if name.startswith("cpu") and name != "cpu":
                v = [int(x) for x in v[:8]]
                out[int(name[3:])] = (sum(v) - v[3] - v[4], sum(v))
    return out


def _background(seconds=0.3, hog_cpu=None):
    """Share of each CPU used by everything else (other engineers' tests, daemons) over `seconds`,
    with nothing of ours running but the hog, whose 10% is taken off its CPU."""
    a = _cpu_busy_jiffies()
    time.sleep(seconds)
    b = _cpu_busy_jiffies()
    return {c: max(0.0, (b[c][0] - a[c][0]) / max(1, b[c][1] - a[c][1]) - (0.1 if c == hog_cpu else 0.0))
            for c in a}


def bench_sweep():
    """The sweep, with and without a 10% SCHED_FIFO hog (1 ms of every 10 ms) on the second CPU,
    SWEEP_REPEATS times each in alternation, at the probe's default rounds and rule. Each sweep is
    bracketed by two 0.3 s readings of the other tasks' load on each CPU: this VM is shared, and a
    sweep rightly reports a CPU that someone else's work slows, so the counts are given for all
    sweeps and for the quiet ones (every CPU under 5% busy with other tasks before and after)."""
    if len(CPUS) < 2:
        print("sweep: needs 2 CPUs; skipped")
        return
    src, exe = TMP / "hog.c", TMP / "hog"
    src.write_text(HOG_C)
    subprocess.run(["cc", "-O2", str(src), "-o", str(exe)], check=True)
    from probes.sweep.measure import summarize
    hog_cpu = CPUS[1]
    cpus = f"{CPUS[0]},{CPUS[1]}"
    # Printed after the last sweep, not between them: whatever consumes our stdout (a terminal, a
    # log relay) runs on these two CPUs, and a sweep rightly counts its time as lost (seen: a relay
    # process taking 85-130 ms of CPU 1 during a sweep flagged CPU 1 with no hog running).
    out, tally, seconds = [], {}, []
    for i in range(SWEEP_REPEATS):
        for with_hog in ((False, True) if i % 2 == 0 else (True, False)):
            hog = subprocess.Popen([str(exe), str(hog_cpu)]) if with_hog else None
            try:
                time.sleep(0.05)
                if hog and hog.poll() is not None:
                    print("\n".join(out + ["hog: could not get SCHED_FIFO (run as root); skipped"]))
                    return
                before = _background(hog_cpu=hog_cpu if hog else None)
                t0 = time.monotonic()
                lines = probe("sweep", ["--cpu", cpus, *SWEEP_ARGS])  # the probe's default rounds and rule
                seconds.append(time.monotonic() - t0)
                after = _background(hog_cpu=hog_cpu if hog else None)
                s = summarize(lines)
            finally:
                if hog:
                    hog.kill()
                    hog.wait()
            bg = {c: max(before[c], after[c]) for c in (CPUS[0], CPUS[1])}
            quiet = all(v < QUIET_SHARE for v in bg.values())
            loss = {c["cpu"]: round(100 * c["trimmed_loss"], 1) for c in s["cpus"]}
            limit = {c["cpu"]: round(100 * c["limit_ns"] / s["baseline_trimmed_ns"], 1)
                     for c in s["cpus"] if c["limit_ns"] is not None}
            p = {c["cpu"]: float(f"{c['p_value']:.2g}") for c in s["cpus"] if c["p_value"] is not None}
            want = [hog_cpu] if with_hog else []
            ok = s["flagged"] == want
            key = (with_hog, quiet)
            tally[key] = [tally.get(key, [0, 0])[0] + ok, tally.get(key, [0, 0])[1] + 1]
            label = f"with 10% FIFO hog on CPU {hog_cpu}" if with_hog else "no hog"
            out.append(f"sweep {label:<28} flagged {s['flagged']} (want {want}) trimmed loss % {loss} "
                       f"limit % {limit} p {p} others' load % {({c: round(100 * v) for c, v in bg.items()})} "
                       f"{'quiet' if quiet else 'BUSY'}  {'ok' if ok else 'MISMATCH'}")

    def count(with_hog, quiet=None):
        keys = [k for k in tally if k[0] == with_hog and (quiet is None or k[1] == quiet)]
        return f"{sum(tally[k][0] for k in keys)}/{sum(tally[k][1] for k in keys)}"
    print("\n".join(out))
    print(f"sweep{' ' + ' '.join(SWEEP_ARGS) if SWEEP_ARGS else ''}: hog flagged alone {count(True)} (quiet machine {count(True, True)}), nothing flagged "
          f"without it {count(False)} (quiet machine {count(False, True)}); one sweep took "
          f"{med(seconds):.2f} s (median, process start included)", flush=True)


if __name__ == "__main__":
    argv = sys.argv[1:]
    if "--sweep-repeats" in argv:  # `bench_probes sweep --sweep-repeats 10`: sections named, 10 hogged + 10 plain sweeps
        i = argv.index("--sweep-repeats")
        SWEEP_REPEATS = int(argv[i + 1])
        del argv[i:i + 2]
    if "--sweep-fifo" in argv:
        SWEEP_ARGS = ["--policy", "fifo", "--priority", "1"]
        argv.remove("--sweep-fifo")
    print(f"bench_probes on CPU {CPU} (of {CPUS}), {PAIRS} alternating pairs; kernel {os.uname().release}")
    which = argv or ["loop", "oslat", "cyclictest", "c2c", "perf", "sweep"]
    for w in which:
        globals()[f"bench_{w}"]()
    shutil.rmtree(TMP, ignore_errors=True)
