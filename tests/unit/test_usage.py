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
    time.sleep(0.3)
    idle, _ = usage.read()
    c0 = time.process_time()
    while time.process_time() - c0 < 0.3:       # busy: 0.3 s of CPU time since the idle reading
        pass
    cpu, rss = usage.read()
    # The busy interval reads more than the idle one, and never more than every CPU of the machine.
    assert 0 <= idle < cpu <= 100 * os.cpu_count()
    with open("/proc/self/status") as f:
        vmrss = next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))
    assert 0.8 * vmrss <= rss <= 1.25 * vmrss
    assert re.fullmatch(r"coremap \d+(\.\d)?% CPU · \d+(\.\d+)? MiB · tick 12\.3 ms", usage.text(0.0123))
    assert re.fullmatch(r"coremap · \d+(\.\d+)? MiB · tick 12\.3 ms", usage.text(0.0123, cpu=False))


def test_process_facts_of_a_live_and_a_gone_process():
    assert process_facts(os.getpid()).endswith(" resident")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_facts(child.pid) is None
