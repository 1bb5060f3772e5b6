"""A script that builds the window, starts its worker threads (sampler and pin guard) and exits
without closing it must exit cleanly: a QThread destroyed while it runs aborts the process
("QThread: Destroyed while thread 'coremap-guard' is still running", SIGABRT). CI saw exactly that
from a test that never closed its window; widgets/sampler_thread.stop_at_exit stops both threads at
interpreter exit."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys, time
from pathlib import Path
from widgets.harness import application
from widgets.pinning.guard import GuardThread
from widgets.sampler_thread import SamplerThread
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
app = application()
root = SysRoot(sys.argv[1])
sampler = SamplerThread(Sampler(root))
sampler.start()
guard = GuardThread(interval=0.05)
guard.start(root, Path(sys.argv[2]))
deadline = time.monotonic() + 5
while not (sampler.running and guard.running) and time.monotonic() < deadline:
    app.processEvents()
    time.sleep(0.01)
print("running:", sampler.running, guard.running)
"""


def test_running_worker_threads_end_with_the_interpreter(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", SCRIPT, "/", str(tmp_path / "journal.jsonl")], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=120)
    assert "running: True True" in out.stdout, out.stdout + out.stderr[-2000:]
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Destroyed while thread" not in out.stderr
