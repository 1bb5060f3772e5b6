"""Probes against their peers, measured in the same run (alternating A/B, >= 4 pairs, medians):

  jitter loop period   vs one raw rdtsc read          target ratio <= 1.5
  jitter gaps >= 10 us vs oslat on the same CPU        target ratio in [0.8, 1.25]
  wakeup p50           vs cyclictest (same policy...)  target ratio in [0.75, 1.33]
  c2c one-way          vs a plain-C ping-pong          target within +-15%
  counters (software)  vs perf stat                    target within 5%
  sweep                flags a CPU loaded by a 10% SCHED_FIFO hog

Run: `python -m tests.benchmarks bench_probes` (as root, on a machine with >= 2 CPUs and rt-tests,
linux-perf and a C compiler installed). Prints figures; asserts nothing.
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
from probes.runner import run_to_end

PAIRS = int(os.environ.get("BENCH_PAIRS", "4"))
CPUS = sorted(os.sched_getaffinity(0))
CPU = CPUS[-1]
TMP = Path(tempfile.mkdtemp(prefix="bench_probes_"))


def med(xs):
    return statistics.median(xs)


def report(name, ours, peer, lo, hi, unit=""):
    r = med(ours) / med(peer) if med(peer) else float("nan")
    ok = "ok" if lo <= r <= hi else "OUT OF RANGE"
    print(f"{name:<34} ours {med(ours):>12.4g}{unit}  peer {med(peer):>12.4g}{unit}  ratio {r:6.3f}  "
          f"target [{lo}, {hi}] {ok}   (ours {['%.4g' % x for x in ours]}, peer {['%.4g' % x for x in peer]})",
          flush=True)


def probe(name, args, timeout=120):
    rc, lines, run = run_to_end(name, [str(a) for a in args], timeout=timeout)
    if rc != 0:
        raise SystemExit(f"{name} {args}: exit {rc}: {run.error() or run.stderr_lines[-3:]}")
    return lines


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
    ours, peer = [], []
    for i in range(PAIRS):
        out = TMP / f"oslat{i}.json"
        subprocess.run(["oslat", "--cpu-list", str(CPU), "-D", "2", f"--json={out}"], check=True,
                       capture_output=True)
        t = H.read_oslat_json(out.read_text())[0]
        # key k = [k-1, k) us, so buckets from lo 10 us up are the gaps >= 10 us
        peer.append(sum(c for lo, _, c in t["buckets"] if lo >= 10_000) / t["duration_s"])
        lines = probe("jitter", ["--cpu", CPU, "--seconds", 2, "--threshold-ns", 10_000])
        ivs = [l for l in lines if l["type"] == "interval"]
        sampled = sum(l["sampled_ns"] for l in ivs) / 1e9
        ours.append(sum(c for iv in ivs for lo, _, c in iv["buckets"] if lo >= 10_000) / sampled)
    report("gaps >= 10 us per second", ours, peer, 0.8, 1.25, "/s")


# ------------------------------------------------------------------------------- 3. wakeup vs cyclictest
def bench_cyclictest():
    if not shutil.which("cyclictest"):
        print("cyclictest: not installed; skipped")
        return
    ours, peer = [], []
    for i in range(PAIRS):
        out = TMP / f"ct{i}.json"
        # cyclictest holds /dev/cpu_dma_latency at 0 unless --laptop; ours does with --dma-latency.
        # SCHED_FIFO tasks get no timer slack (kernel/sys.c, rt_task), so slack is alike for both.
        subprocess.run(["cyclictest", "-q", "-l", "2000", "-i", "1000", "-p", "80", "-t", "1", "-a", str(CPU),
                        "-h", "10000", f"--json={out}"], check=True, capture_output=True)
        t = H.read_cyclictest_json(out.read_text())[0]
        # cyclictest truncates to whole us: key k is [k, k+1) us; compare at the bucket midpoint
        peer.append(H.percentiles(H.buckets_to_histogram(t["buckets"]))["p50"])
        from probes.wakeup import summarize
        s = summarize(probe("wakeup", ["--cpu", CPU, "--seconds", 2, "--interval-us", 1000, "--policy", "fifo",
                                       "--priority", 80, "--dma-latency"]))
        ours.append(s["percentiles"]["p50"])
    report("wakeup p50 (ns), fifo 80, 1 ms", ours, peer, 0.75, 1.33, " ns")


# ------------------------------------------------------------------------------- 4. c2c vs plain C
REF_C = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Alignas(64) _Atomic long flag;
static long N;
static void pin(int c){cpu_set_t s;CPU_ZERO(&s);CPU_SET(c,&s);sched_setaffinity(0,sizeof s,&s);}
static void *pong(void *a){pin((int)(long)a);for(long i=0;i<N;i++){while(atomic_load(&flag)!=2*i+1);atomic_store(&flag,2*i+2);}return 0;}
int main(int argc,char**argv){int a=atoi(argv[1]),b=atoi(argv[2]);N=atol(argv[3]);pin(a);
 pthread_t t;pthread_create(&t,0,pong,(void*)(long)b);struct timespec s,e;
 for(long i=0;i<N;i++){if(i==1)clock_gettime(CLOCK_MONOTONIC,&s);atomic_store(&flag,2*i+1);while(atomic_load(&flag)!=2*i+2);}
 clock_gettime(CLOCK_MONOTONIC,&e);pthread_join(t,0);
 double ns=(e.tv_sec-s.tv_sec)*1e9+(e.tv_nsec-s.tv_nsec);printf("%f\n",ns/(N-1)/2);return 0;}
"""


def bench_c2c():
    if len(CPUS) < 2 or not shutil.which("cc"):
        print("c2c: needs 2 CPUs and cc; skipped")
        return
    src, exe = TMP / "pp.c", TMP / "pp"
    src.write_text(REF_C)
    subprocess.run(["cc", "-O2", "-pthread", str(src), "-o", str(exe)], check=True)
    a, b = CPUS[0], CPUS[1]
    ours, peer = [], []
    for _ in range(PAIRS):
        peer.append(med([float(subprocess.run([str(exe), str(a), str(b), "20000"], capture_output=True,
                                               text=True, check=True).stdout) for _ in range(5)]))
        lines = probe("c2c", ["--cpu", f"{a},{b}", "--trips", 20000, "--batches", 5])
        ours.append(next(l for l in lines if l["type"] == "interval")["median_ns"])
    report(f"c2c one-way {a}<->{b} (ns)", ours, peer, 0.85, 1.15, " ns")


# ------------------------------------------------------------------------------- 5. counters vs perf
def find_perf():
    for p in ["/usr/bin/perf", *sorted(glob.glob("/usr/bin/perf_*"))]:
        if os.access(p, os.X_OK) and subprocess.run([p, "--version"], capture_output=True).returncode == 0:
            return p
    return None


def bench_perf():
    perf = find_perf()
    if not perf:
        print("perf: not found; skipped")
        return
    cmd = ["dd", "if=/dev/zero", "of=/dev/null", "bs=64k", "count=20000"]
    events = ["context-switches", "cpu-migrations", "page-faults", "task-clock"]
    ours = {e: [] for e in events}
    peer = {e: [] for e in events}
    for _ in range(PAIRS):
        r = subprocess.run([perf, "stat", "-x,", "-e", ",".join(events), "--", *cmd], capture_output=True, text=True)
        for line in r.stderr.splitlines():
            f = line.split(",")
            if len(f) > 2 and f[2] in events and f[0] not in ("<not supported>", "<not counted>"):
                v = float(f[0])
                peer[f[2]].append(v * 1e6 if f[2] == "task-clock" else v)  # perf prints msec
        lines = probe("counters", ["--cpu", CPU, "--modes", "unpinned", "--", *cmd])
        counts = next(l for l in lines if l["type"] == "interval")["counts"]
        for e in events:
            ours[e].append(counts[e])
    for e in events:
        if med(peer[e]) == 0 and med(ours[e]) == 0:
            print(f"{'counters ' + e:<34} ours 0  peer 0  (both zero)")
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


def bench_sweep():
    if len(CPUS) < 2:
        print("sweep: needs 2 CPUs; skipped")
        return
    src, exe = TMP / "hog.c", TMP / "hog"
    src.write_text(HOG_C)
    subprocess.run(["cc", "-O2", str(src), "-o", str(exe)], check=True)
    from probes.sweep import summarize
    hog_cpu = CPUS[1]
    cpus = f"{CPUS[0]},{CPUS[1]}"
    for i in range(PAIRS):
        for with_hog in (False, True):
            hog = subprocess.Popen([str(exe), str(hog_cpu)]) if with_hog else None
            try:
                time.sleep(0.05)
                if hog and hog.poll() is not None:
                    print("hog: could not get SCHED_FIFO (run as root); skipped")
                    return
                s = summarize(probe("sweep", ["--cpu", cpus, "--rounds", 30]))
            finally:
                if hog:
                    hog.kill()
                    hog.wait()
            loss = {c["cpu"]: round(100 * c["loss_vs_best"], 1) for c in s["cpus"]}
            want = [hog_cpu] if with_hog else []
            label = f"with 10% FIFO hog on CPU {hog_cpu}" if with_hog else "no hog"
            print(f"sweep {label:<28} flagged {s['flagged']} "
                  f"(want {want}) loss % {loss}  {'ok' if s['flagged'] == want else 'MISMATCH'}", flush=True)


if __name__ == "__main__":
    print(f"bench_probes on CPU {CPU} (of {CPUS}), {PAIRS} alternating pairs; kernel {os.uname().release}")
    which = sys.argv[1:] or ["loop", "oslat", "cyclictest", "c2c", "perf", "sweep"]
    for w in which:
        globals()[f"bench_{w}"]()
    shutil.rmtree(TMP, ignore_errors=True)
