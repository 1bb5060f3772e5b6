"""`pin --java NAME --pid P` never signals a process that is not a HotSpot JVM (issue 10): jcmd's
attach starts with SIGQUIT, which kills a Python process; coremap checks libjvm first and says so."""
from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from tests.hostile.conftest import run_cli


@pytest.mark.skipif(shutil.which("jcmd") is None and shutil.which("jstack") is None,
                    reason="no JDK (jcmd/jstack): Debian's default-jdk-headless, installed by .ci/run")
def test_a_python_process_is_not_attached_to():
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.3)
        r = run_cli("pin", "--java", "main", "--pid", victim.pid, "--cpus", "0", timeout=60)
        assert r.returncode == 2
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"process {victim.pid} (python" in lines[0] and "is not a Java VM" in lines[0]
        time.sleep(0.3)
        assert victim.poll() is None, "the process was signalled"
    finally:
        victim.kill()
        victim.wait()
