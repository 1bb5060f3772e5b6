"""A thousand hosts from one Prometheus (issue 21, "A fleet that streams"): time to the first tiles and to all
of them, beside a plain `curl` of the same queries.

    PYTHONPATH=. QT_QPA_PLATFORM=offscreen python -m tests.benchmarks.bench_fleet_sources [--hosts 1000] [--cpus 8]

Prometheus is loaded with synthetic series through its own backfill (`promtool tsdb create-blocks-from
openmetrics`): per host, node_exporter's series for `--cpus` CPUs (node_cpu_seconds_total in 8 modes,
node_interrupts_total for 12 IRQs, node_cpu_info, node_uname_info), five scrapes 15 s apart, each counter
rising at its own rate. The fleet is read at the last scrape's time, as `coremap fleet --prometheus` reads
now. Then:
1. coremap, Qt-free: FleetStream's first round (app/sources/stream.py), its batches timed as they arrive;
2. the window: FleetWindow offscreen fed by the same stream, timed to its first tiles and to all of them
   built and laid out (tiles past the viewport build their grid lazily, as they would on screen);
3. curl: the exact queries coremap sent (recorded in 1), one `curl` process each, one after another, and
   again 4 at a time (coremap's own batches run one after another in this version).
The goal is first tiles within 2 s and all within 10 s on this machine; the figures are printed, not
asserted (benchmarks never gate CI on an absolute time).
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from app.sources.prometheus import Prometheus  # noqa: E402
from app.sources.stream import FleetStream, prometheus_rounds  # noqa: E402
from tests.engines import Engines, free_port  # noqa: E402

MODES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
IRQS = [("LOC", "Local timer interrupts", ""), ("RES", "Rescheduling interrupts", ""),
        ("CAL", "Function call interrupts", ""), ("TLB", "TLB shootdowns", ""), ("NMI", "Non-maskable interrupts", "")] + \
       [(str(24 + i), "PCI-MSIX-0000:00:03.0", f"virtio{i}-input.0") for i in range(7)]
SCRAPES, STEP = 5, 15


def write_openmetrics(path: Path, hosts: int, cpus: int, end: int, seed: int = 21) -> int:
    """The synthetic scrapes as one OpenMetrics file for promtool; returns the number of series."""
    rnd = random.Random(seed)
    series = 0
    with open(path, "w") as f:
        def family(name: str, kind: str, rows) -> None:
            nonlocal series
            f.write(f"# TYPE {name} {kind}\n")
            sample = f"{name}_total" if kind == "counter" else name      # OpenMetrics: a counter's samples end _total
            for labels, start, rate in rows:
                series += 1
                for k in range(SCRAPES):
                    t = end - (SCRAPES - 1 - k) * STEP
                    f.write(f"{sample}{{{labels}}} {start + rate * k * STEP:.2f} {t}\n")
        for h in range(hosts):
            inst = f'instance="host{h:04d}:9100",job="node"'
            load = rnd.uniform(0.2, 5.0)                    # some hosts are busier than others
            family("node_cpu_seconds", "counter",
                   [(f'{inst},cpu="{c}",mode="{m}"', 1000.0, rnd.uniform(0.0, 0.3) * (1 if m != "idle" else 3))
                    for c in range(cpus) for m in MODES])
            family("node_interrupts", "counter",
                   [(f'{inst},cpu="{c}",type="{t}",info="{i}",devices="{d}"', 1e6, rnd.expovariate(1 / 200) * load)
                    for c in range(cpus) for t, i, d in IRQS])
            family("node_cpu_info", "gauge",
                   [(f'{inst},cpu="{c}",core="{c // 2}",package="0",model_name="Synthetic CPU"', 1, 0)
                    for c in range(cpus)])
            family("node_uname_info", "gauge",
                   [(f'{inst},nodename="host{h:04d}",release="6.1.0-synthetic",machine="x86_64"', 1, 0)])
        f.write("# EOF\n")
    return series


class Recorder(Prometheus):
    """Prometheus that notes each query it sends, to replay them with curl."""
    sent: list

    def query(self, expr, at=None):
        self.sent.append((expr, at))
        return super().query(expr, at)


def coremap_round(url: str, at: float):
    p = Recorder(url)
    p.sent = []
    marks = []
    t0 = time.monotonic()
    stream = FleetStream(prometheus_rounds(p, at), on_rows=lambda rows: marks.append((time.monotonic() - t0, len(rows))))
    stream.run_round()
    rows = stream.rows()
    return marks, rows, p.sent


def window_round(url: str, at: float, hosts: int, screenshot: str | None = None):
    from widgets import harness
    from widgets.fleet.window import FleetWindow
    from widgets.pictures import settle
    app = harness.application()
    p = Prometheus(url)
    stream = FleetStream(prometheus_rounds(p, at), interval=3600)
    t0 = time.monotonic()
    w = FleetWindow([], "irq", stream=stream, sort="busiest")
    w.resize(1600, 1000)
    w.show()
    w.start()
    first = every = None
    print(f"  (window built and shown after {time.monotonic() - t0:.2f} s)")
    while time.monotonic() - t0 < 120:
        app.processEvents()
        n = len(w.grids.tiles)
        if n and first is None:
            first = (time.monotonic() - t0, n)          # laid out and painted by the processEvents above
        if n >= hosts and stream.round and not w._timer.isActive():
            settle()
            every = (time.monotonic() - t0, n)
            break
        time.sleep(0.01)
    built = sum(t.view is not None for t in w.grids.tiles)
    if screenshot:
        w.grids.fit()
        settle()
        w.grab().save(screenshot)
    w.close()
    return first, every, built


def curl_all(url: str, sent, parallel: int = 1) -> float:
    def one(q):
        expr, at = q
        argv = ["curl", "-s", "-o", "/dev/null", "--data-urlencode", f"query={expr}"]
        if at is not None:
            argv += ["--data-urlencode", f"time={at:.3f}"]
        subprocess.run(argv + [f"{url}/api/v1/query"], check=True)
    t0 = time.monotonic()
    if parallel == 1:
        for q in sent:
            one(q)
    else:
        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(one, sent))
    return time.monotonic() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--cpus", type=int, default=8)
    ap.add_argument("--data", metavar="DIR", help="keep the loaded Prometheus data here and reuse it next time")
    ap.add_argument("--screenshot", metavar="OUT.png", help="save the window once every tile is there")
    args = ap.parse_args()
    for tool in ("prometheus", "promtool", "curl"):
        if shutil.which(tool) is None:
            print(f"bench_fleet_sources: {tool} is not installed (apt-get install prometheus curl); skipped")
            return 0
    e = Engines(Path(tempfile.mkdtemp(prefix="coremap-bench-prom-")))
    try:
        data = Path(args.data) if args.data else e.folder / "data"
        stamp = data / f"coremap-{args.hosts}x{args.cpus}.end"
        if stamp.exists():
            end, n, t_gen, t_blocks = int(stamp.read_text()), 0, 0.0, 0.0
        else:
            end = int(time.time()) - 3600                  # an hour ago: wholly in the backfilled blocks
            t0 = time.monotonic()
            n = write_openmetrics(e.folder / "series.om", args.hosts, args.cpus, end)
            t_gen = time.monotonic() - t0
            t0 = time.monotonic()
            subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(e.folder / "series.om"),
                            str(data)], check=True, capture_output=True)
            t_blocks = time.monotonic() - t0
            (e.folder / "series.om").unlink()
            stamp.write_text(str(end))
        (e.folder / "prometheus.yml").write_text("global:\n  scrape_interval: 15s\n")
        port = free_port()
        e.start("prometheus", ["prometheus", f"--config.file={e.folder / 'prometheus.yml'}",
                               f"--storage.tsdb.path={data}", "--storage.tsdb.retention.time=10y",
                               f"--web.listen-address=127.0.0.1:{port}"], port)
        url = f"http://127.0.0.1:{port}"
        if n:
            print(f"loaded {args.hosts} hosts × {args.cpus} CPUs = {n:,} series × {SCRAPES} scrapes "
                  f"(written in {t_gen:.1f} s, blocks in {t_blocks:.1f} s)")
        else:
            print(f"{args.hosts} hosts × {args.cpus} CPUs: the series loaded before, in {data}")
        coremap_round(url, end)                              # warm Prometheus' caches for both sides alike
        marks, rows, sent = coremap_round(url, end)
        ok = sum(r.ok for r in rows)
        first, last = marks[0], marks[-1]
        print(f"coremap (Qt-free): first {first[1]} hosts after {first[0]:.2f} s, all {len(rows)} "
              f"({ok} read) after {last[0]:.2f} s, {len(sent)} queries")
        c1 = curl_all(url, sent)
        c4 = curl_all(url, sent, parallel=4)
        print(f"curl, the same {len(sent)} queries: {c1:.2f} s one after another, {c4:.2f} s 4 at a time")
        print(f"ratio coremap / curl (one after another): {last[0] / c1:.2f}")
        wfirst, wall, built = window_round(url, end, args.hosts, args.screenshot)
        if wfirst is not None:
            print(f"window: first {wfirst[1]} tiles after {wfirst[0]:.2f} s", end="")
        if wall is not None:
            print(f", all {wall[1]} after {wall[0]:.2f} s ({built} grids built, the rest when scrolled to)")
        else:
            print(", not all tiles within 120 s")
        shown_first = wfirst[0] if wfirst is not None else float("inf")
        shown_all = wall[0] if wall is not None else float("inf")
        goal = shown_first <= 2 and shown_all <= 10
        print(f"goal, in the window (first tiles <= 2 s, all <= 10 s): {'met' if goal else 'NOT met'}")
    finally:
        e.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
