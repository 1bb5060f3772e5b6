"""app/sampling/intruders.py on real input: a real thread spinning on a CPU, read from this machine's
/proc (oracle: the thread's own pid, the CPU it was pinned to, and that a spin uses ~100% of a CPU),
and a copy of the sno machine (tests/fixtures) whose IRQ 57 debugfs calls managed, captured twice,
9,388 interrupts apart on CPU 3 (the rate the issue saw on the quiet CPU)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.cli.probe import BUSY_LOOK_ENV
from app.machine.thread_names import ThreadNames
from app.machine.threads import TaskReader
from app.sampling.intruders import BUSY_PCT, busy_line, busy_on, managed_on_quiet, thread_shares
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import CPU_CACHES, copy_machine, extract

MANAGED_IRQ = "57"          # sno: virtio3-req.3, requested and delivered on CPU 3
MANAGED_CPU = 3
EXTRA = 9388                # interrupts on CPU 3 between the two captures, 1 s apart
# How long the tests look at who is busy: a spin uses ~100% of its CPU, ten times BUSY_PCT, in any window
# of some clock ticks; the product's own look (CLI_WINDOW_S, 1 s) is a default these tests do not check.
LOOK_S = 0.3

# PR_SET_NAME (15) names the calling thread, as a JVM names its threads: the kernel keeps 15 bytes.
SPIN = """
import ctypes, os, sys
ctypes.CDLL(None).prctl(15, sys.argv[2].encode(), 0, 0, 0)
os.sched_setaffinity(0, {int(sys.argv[1])})
print("spinning", flush=True)
while True:
    pass
"""


class Spinner:
    """A process spinning on one CPU under a given comm; stopped by `stop`."""

    def __init__(self, cpu: int, comm: str):
        self.cpu = cpu
        self.proc = subprocess.Popen([sys.executable, "-c", SPIN, str(cpu), comm], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "spinning"
        self.pid = self.proc.pid

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def spinner(live_machine):
    """A thread called market-data-fee (the kernel's cut of "market-data-feed-handler-0") spinning on
    the last CPU this test may use."""
    s = Spinner(max(os.sched_getaffinity(0)), "market-data-fee")
    yield s
    s.stop()


def managed_tree(tmp_path: Path) -> Path:
    """sno's CPUs, proc/irq and /proc/interrupts, debugfs saying IRQ 57 is managed, and a second capture
    a second later in which IRQ 57 rang EXTRA more times on CPU 3."""
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    text = (src / "proc" / "interrupts").read_text()
    (dst / "proc" / "interrupts").write_text(text)
    dbg = dst / "sys" / "kernel" / "debug" / "irq" / "irqs"
    dbg.mkdir(parents=True)
    (dbg / MANAGED_IRQ).write_text("handler:  handle_edge_irq\nstate:    0x00000000\nistate:   0x00000000\n"
                                   "ddepth:   0\nwdepth:   0\ndstate:   0x37400200\n            IRQD_AFFINITY_MANAGED\n")
    later = dst / ".coremap" / "t1" / "proc"
    later.mkdir(parents=True)
    lines = text.splitlines()
    ncpus = len(lines[0].split())
    for i, line in enumerate(lines):
        if line.split(":")[0].strip() == MANAGED_IRQ:
            head, counts = line.split(":", 1)
            words = counts.split()
            words[MANAGED_CPU] = str(int(words[MANAGED_CPU]) + EXTRA)
            lines[i] = f"{head}: " + " ".join(f"{w:>10}" for w in words[:ncpus]) + "  " + " ".join(words[ncpus:])
    (later / "interrupts").write_text("\n".join(lines) + "\n")
    (dst / ".coremap" / "meta.json").write_text(json.dumps({"interval": 1.0, "host": "sno"}))
    return dst


def test_a_managed_irq_on_a_quiet_cpu_is_found_with_its_rate_there(tmp_path):
    state = Sampler(SysRoot(managed_tree(tmp_path))).tick()
    assert state.irqs.info[MANAGED_IRQ].managed is True and state.rates is not None
    found = managed_on_quiet(state.irqs, state.rates, [MANAGED_CPU])
    assert list(found) == [MANAGED_IRQ]
    assert found[MANAGED_IRQ].per_s == {MANAGED_CPU: pytest.approx(EXTRA)}
    sentence = found[MANAGED_IRQ].sentence()
    assert sentence.startswith(f"managed IRQ 57 is still delivered on quiet CPU 3 (9,388/s)")
    assert "isolcpus=managed_irq" in sentence
    # quiet CPUs it is not delivered on, and no quiet CPU at all, find nothing
    assert managed_on_quiet(state.irqs, state.rates, [0, 1, 2]) == {}
    assert managed_on_quiet(state.irqs, state.rates, []) == {}


def test_an_irq_debugfs_does_not_call_managed_is_never_marked(tmp_path):
    root = managed_tree(tmp_path)
    (root / "sys" / "kernel" / "debug" / "irq" / "irqs" / MANAGED_IRQ).write_text("dstate:   0x00400000\n")
    state = Sampler(SysRoot(root)).tick()
    assert managed_on_quiet(state.irqs, state.rates, [MANAGED_CPU]) == {}


def test_a_thread_busy_on_the_cpu_is_named_by_its_full_name(spinner):
    reader = TaskReader(SysRoot("/"))
    earlier = reader.sample()
    start = time.monotonic()
    time.sleep(LOOK_S)
    later = reader.sample()
    shares = thread_shares(earlier, later, time.monotonic() - start)
    assert shares[spinner.pid] >= BUSY_PCT      # a spin (sharing its CPU with whatever else runs there)
    # the full name as the JVM's reader gives it (app/sampling/java_names.py)
    names = ThreadNames({spinner.pid: {spinner.pid: "market-data-feed-handler-0"}})
    busy = busy_on([spinner.cpu], later, shares, names)
    (mine,) = [b for b in busy if b.tid == spinner.pid]
    assert (mine.cpu, mine.pid, mine.name, mine.confined) == (spinner.cpu, spinner.pid, "market-data-feed-handler-0", True)
    assert all(b.pct >= BUSY_PCT for b in busy)
    line = busy_line(busy, LOOK_S)
    assert f"thread {spinner.pid} market-data-feed-handler-0 (process {spinner.pid}) used" in line
    assert f"may run only on CPU {spinner.cpu}" in line and "market-data-fee " not in line
    # not on the other CPUs, and not when it is coremap's own (a run keeps coremap off its CPUs)
    others = [c for c in os.sched_getaffinity(0) if c != spinner.cpu]
    assert all(b.tid != spinner.pid for b in busy_on(others, later, shares, names))
    assert all(b.tid != spinner.pid for b in busy_on([spinner.cpu], later, shares, names, skip_pids={spinner.pid}))


def test_coremap_probe_prints_the_same_line(spinner, monkeypatch):
    monkeypatch.setenv(BUSY_LOOK_ENV, str(LOOK_S))     # a look (tests/conftest.py turns it off for the rest)
    # The warning is read_busy's finding (app/cli/probe.py _busy_warning), asserted below by tid and comm: a
    # read_busy of the test's own before it found the same, 0.3 s more.
    out = subprocess.run([sys.executable, "-m", "app", "probe", "jitter", "-c", str(spinner.cpu), "--seconds", "0.1"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (warning,) = [l for l in out.stderr.splitlines() if l.startswith("coremap: warning: ")]
    assert f"thread {spinner.pid} market-data-fee (process {spinner.pid}) used" in warning
    assert warning.endswith("move it off first for the CPU's own figures")
    assert "jitter on CPU" in out.stdout


def test_a_probe_that_refuses_its_input_says_one_line_without_the_busy_warning(spinner, monkeypatch):
    monkeypatch.setenv(BUSY_LOOK_ENV, str(LOOK_S))     # a look (tests/conftest.py turns it off for the rest)
    # The warning came before the refusal, so bad input said two lines (a loaded CI run's first-touch test).
    out = subprocess.run([sys.executable, "-m", "app", "probe", "first-touch", "-c", str(spinner.cpu),
                          "--size", "900T"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "more than the memory available now" in out.stderr and "warning" not in out.stderr


@pytest.mark.parametrize("look", ["abc", "-1", "nan", "61"])
def test_a_busy_look_that_is_not_seconds_is_refused_in_one_line_and_runs_nothing(look, capsys, monkeypatch):
    argv = ["probe", "jitter", "-c", str(min(os.sched_getaffinity(0))), "--seconds", "0.1"]
    monkeypatch.setenv(BUSY_LOOK_ENV, look)
    if look == "abc":           # the process path once: exit status and stderr as a shell sees them
        out = subprocess.run([sys.executable, "-m", "app", *argv], capture_output=True, text=True, timeout=60)
    else:                       # the other refusals in this process: the same main(), a Python start less each
        from tests.hostile.conftest import run_main
        out = run_main(capsys, *argv)
    assert out.returncode == 2 and out.stdout == "", out
    assert out.stderr.count("\n") == 1, out.stderr
    assert f"{BUSY_LOOK_ENV} " in out.stderr and "give 0 to 60 s" in out.stderr, out.stderr
