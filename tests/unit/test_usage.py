"""app/machine/usage.py: coremap's own CPU and memory for the status bar, a process's user and memory for the
thread tree's tooltip (psutil)."""
import os
import re
import subprocess
import sys
import time

from app.machine.usage import OwnUsage, process_facts


def test_own_usage_line():
    usage = OwnUsage()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.3:          # a busy loop: close to 100% of one CPU since the first look
        pass
    cpu, rss = usage.read()
    assert 50 <= cpu <= 200
    with open("/proc/self/status") as f:
        vmrss = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))
    assert 0.8 * vmrss <= rss <= 1.25 * vmrss
    assert re.fullmatch(r"coremap \d+(\.\d)?% CPU · \d+(\.\d+)? MiB · tick 12\.3 ms", usage.text(0.0123))


def test_process_facts_of_a_live_and_a_gone_process():
    assert process_facts(os.getpid()).endswith(" resident")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_facts(child.pid) is None
