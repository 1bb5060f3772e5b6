"""kill -9 in the middle of Make quiet, live on this VM as root: on restart the window says the batch is
partial (N of M writes), badges the CPU "partial", the guard does not take coremap's own interrupted
write for someone else's, and one click finishes the batch or rolls it back; checked in /proc and /sys."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.quiet.guard import Guard
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.pins import settle, show_pins
from tests.live import live_test, read_affinities, restore_quiet
from widgets.application import build_window

ROOT = Path(__file__).resolve().parents[2]


def _killed_isolate(state: Path) -> None:
    """`coremap isolate --cpus 1` killed with SIGKILL once it has journalled a few writes."""
    env = dict(os.environ, COREMAP_STATE_DIR=str(state), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "app", "isolate", "--cpus", "1"], env=env, cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = state / "journal.jsonl"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_bytes().count(b'"ev":"record"') >= 6:
            break
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.wait()


@pytest.fixture
def cut(tmp_path):
    state = tmp_path / "state"
    before = read_affinities()
    _killed_isolate(state)
    svc = AffinityService(SysRoot("/"), Journal(state / "journal.jsonl"))
    [c] = svc.ledger().cut_short
    yield svc, c, before
    restore_quiet(svc)
    svc.journal.close()


def _window(qtbot, svc):
    w = build_window(None)
    qtbot.addWidget(w)
    w.resize(1300, 850)
    w.show()
    qtbot.waitExposed(w)
    show_pins(w, svc)
    assert w.set_state(Sampler(SysRoot("/")).tick())
    return w


@live_test
def test_the_window_says_partial_and_finish_completes_it(cut, qtbot):
    svc, c, _ = cut
    assert c.action == "isolate" and c.cpus == (1,) and 0 < c.made < c.planned
    assert Guard(svc).tick().events == []           # the interrupted write is coremap's own
    w = _window(qtbot, svc)
    cell = w.topology_view.cells()[1]
    assert cell.quiet and cell.partial
    bar = w.quiet_controller.cut_short_bar
    assert bar.isVisibleTo(w) and f"{c.made} of {c.planned} writes made" in bar.label.text()
    bar.finish_button.click()
    settle(w)
    assert not svc.ledger().cut_short and not cell.partial and cell.quiet
    a = read_affinities()
    managed = {e.target_id for e in svc.journal.entries() if e.kind == "irq" and e.code == "managed"}
    assert a.irqs_on(1) <= managed, (a.irqs_on(1), managed)       # every movable IRQ is off CPU 1
    if Path("/sys/fs/cgroup/cpuset/cpuset.cpus").exists():         # the shield stands, this process in it
        assert Path("/proc/self/cpuset").read_text().strip() == "/coremap-system"


@live_test
def test_roll_back_puts_back_what_the_cut_short_batch_wrote(cut, qtbot):
    svc, c, before = cut
    w = _window(qtbot, svc)
    w.quiet_controller.cut_short_bar.roll_back_button.click()
    settle(w)
    after = read_affinities()
    assert after.irqs == {n: m for n, m in before.irqs.items() if n in after.irqs}
    assert after.workqueue == before.workqueue and after.default_irq == before.default_irq
    assert svc.ledger().quiet_cpus == () and not svc.ledger().cut_short
    assert not Path("/sys/fs/cgroup/cpuset/coremap-system").exists()
    assert not w.topology_view.cells()[1].quiet

