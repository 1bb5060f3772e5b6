"""The messaging probe against the same transfer written as plain C (tests/benchmarks/msg_peer.c),
alternating A/B, BENCH_PAIRS pairs (default 6), medians of each run's median msgs/s per 100 ms window:

  shm ring, pipe, UDP (unicast), each with sender and receiver on one CPU and on two     within 10%
                                          (the median of the pairs' ratios)
  UDP (multicast as the probe runs it)  vs  iperf3 -u -l 64 -b 0 on the same CPUs        reported

then one `--placement auto` run over the shared-memory ring at its default paces (10k, 100k, 1M msg/s
and saturation) shown whole: each placement's throughput per window (the time series), its median, CV,
migrations, latency and loss at each pace, and the verdict.

Run: `make bench ARGS=probes_messaging` (needs a C compiler; iperf3 from Debian for the second peer).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

from app.format import format_compact
from probes import _native
from probes.messaging.measure import summarize
from probes.text import format_result
from tests.benchmarks.peers import CPUS, PAIRS, compile_peer, med, probe, report, whole_affinity

SECONDS = 1.0
WINDOWS = int(SECONDS * 10)


def probe_median(transport: str, send: int, recv: int, *, multicast: bool = False) -> float:
    # saturation only: the peer sends as fast as it can, so the probe's paces would leave it 1/4 of the time
    args = ["--placement", f"{send}:{recv}", "--seconds", SECONDS, "--rounds", 1, "--transport", transport,
            "--rates", "max"]
    lines = probe("messaging", args + ([] if multicast else ["--no-multicast"]))
    return summarize(lines)["placements"][0]["median_rate"]


def peer_median(exe, transport: str, send: int, recv: int, hz: float) -> float:
    whole_affinity()
    out = subprocess.run([str(exe), transport, str(send), str(recv), str(WINDOWS), str(hz)], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return med([int(c) * 10 for c in out.split()])


def iperf3_rate(send: int, recv: int) -> float | None:
    """Datagrams per second the iperf3 server received from a client sending 64-byte UDP as fast as
    it can for SECONDS (its own pacing and accounting: a second opinion, not the same loop)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port), "-A", str(recv)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        r = subprocess.run(["iperf3", "-u", "-c", "127.0.0.1", "-p", str(port), "-b", "0", "-l", "64",
                            "-t", str(SECONDS), "-A", str(send), "-J"], capture_output=True, text=True, timeout=60)
        end = json.loads(r.stdout)["end"]["sum"]
        return (end["packets"] - end["lost_packets"]) / end["seconds"]
    except (ValueError, KeyError):
        return None
    finally:
        server.kill()
        server.wait()


def main() -> None:
    hz = _native.tsc_info()["hz"]
    exe = compile_peer("msg_peer.c", "-lpthread")
    a, b = (CPUS[0], CPUS[-1])
    print(f"bench_probes_messaging: CPUs {CPUS}, {PAIRS} alternating pairs of {SECONDS:g} s; kernel "
          f"{os.uname().release}", flush=True)
    for transport in ("shm", "pipe", "udp"):
        for send, recv in ((b, b), (a, b)):
            ours, peer = [], []
            for i in range(PAIRS):
                steps = [lambda: ours.append(probe_median(transport, send, recv)),
                         lambda: peer.append(peer_median(exe, transport, send, recv, hz))]
                for step in (steps if i % 2 == 0 else steps[::-1]):
                    step()
            # paired: a cross-CPU ring runs at the speed of the vCPUs' current placement on the host,
            # which the two sides of a pair share and successive pairs may not
            report(f"messaging {transport} {send}->{recv} (msgs/s)", ours, peer, 0.9, 1.1, paired=True)
    if shutil.which("iperf3"):
        ours, peer = [], []
        for i in range(PAIRS):
            steps = [lambda: ours.append(probe_median("udp", a, b, multicast=True)),
                     lambda: peer.append(iperf3_rate(a, b) or float("nan"))]
            for step in (steps if i % 2 == 0 else steps[::-1]):
                step()
        report(f"messaging udp {a}->{b} multicast vs iperf3 -u", ours, peer, 0.0, float("inf"))
    else:
        print("iperf3: not installed (apt install iperf3); the UDP second opinion skipped")
    lines = probe("messaging", ["--placement", "auto", "--seconds", 2, "--transport", "shm"])
    s = summarize(lines)
    print("\n" + format_result(s))
    for p in s["placements"]:
        print(f"  {p['name']:<24} msgs/s per 100 ms: {' '.join(format_compact(r) for r in p['series'])}")


if __name__ == "__main__":
    main()
