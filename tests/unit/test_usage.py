"""app/usage.py: coremap's own CPU and memory for the status bar, a process's user and memory for the
thread tree's tooltip (psutil)."""
import os
import re
import subprocess
import sys

from app.usage import OwnUsage, process_facts


def test_own_usage_line():
    usage = OwnUsage()
    sum(i * i for i in range(200_000))          # some CPU since the first look
    cpu, rss = usage.read()
    assert cpu >= 0 and rss > 10 << 20
    assert re.fullmatch(r"coremap \d+(\.\d)?% CPU · \d+(\.\d+)? MiB · tick 12\.3 ms", usage.text(0.0123))


def test_process_facts_of_a_live_and_a_gone_process():
    assert process_facts(os.getpid()).endswith(" resident")
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_facts(child.pid) is None
