"""The pictures of issue 12, rendered offscreen into resources/screenshots/:

- irq-marks.png: the IRQ table on a writable copy of worker1.internal (isolcpus=managed_irq: red
  where the kernel delivers outside the requested CPUs), after coremap pinned two IRQs there through
  AffinityService: one whose delivery has not followed (amber: a copy's effective list is a file, so
  it never does), and one whose mask was then written back by hand, as irqbalance would (purple).
- drag-chip.png: the drag pixmap of this process's main thread dragged out of the thread table.
- probe-empty.png and probe-full.png: the histogram plot before a run, and after a 2-second jitter
  run on CPU 0 of this machine (coremap probe jitter --json).

    PYTHONPATH=. QT_QPA_PLATFORM=offscreen python -m tests.shots
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from widgets.harness import application  # noqa: E402  (Qt through widgets/ only)

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "resources" / "screenshots"


def irq_marks(tmp: Path) -> Path:
    from app.pinning.service import AffinityService, PinRequest, PinTarget
    from app.pinning.journal import Journal
    from app.sampling.sampler import Sampler
    from app.sysroot import SysRoot
    from tests.machines import copy_machine, writable_test_tree
    from widgets.tables.irqs import IrqTableWidget
    copy = tmp / "worker1.internal"
    copy_machine("worker1.internal", copy)
    root = SysRoot(writable_test_tree(copy))
    service = AffinityService(root, Journal(tmp / "journal.jsonl"))
    first = Sampler(root).tick()
    # Two IRQs coremap may move (not kernel-managed), delivered on one CPU each.
    numbered = sorted((int(irq), info) for irq, info in first.irqs.info.items() if irq.isdigit())
    movable = [str(irq) for irq, info in numbered if not info.managed and info.effective and info.requested][:2]
    moving, reverted = movable
    for irq, cpus in ((moving, (7,)), (reverted, (8,))):
        service.apply(PinRequest((PinTarget("irq", int(irq)),), cpus, origin="pin"))
    # irqbalance (or anyone) writes the second IRQ's mask back.
    Path(root.irq_dir(int(reverted), "smp_affinity_list")).write_text("0-79\n")
    widget = IrqTableWidget()
    widget.model.set_pins({str(k): v for k, v in service.ledger().pinned_irqs().items()})
    widget.set_state(Sampler(root).tick())
    widget.resize(1250, 520)
    widget.view.sortByColumn(0, widget.view.horizontalHeader().sortIndicatorOrder().AscendingOrder)
    widget.set_filter("")
    widget.show()
    application().processEvents()
    path = OUT / "irq-marks.png"
    widget.grab().save(str(path))
    widget.close()
    return path


def drag_chip() -> Path:
    from app.sampling.sampler import Sampler
    from app.sysroot import SysRoot
    from widgets.pinning.drag import pin_drag
    from widgets.tables.threads import ThreadTableWidget
    w = ThreadTableWidget()
    w.resize(900, 400)
    w.set_state(Sampler(SysRoot("/")).tick())
    pid = os.getpid()
    w.select_thread(pid, pid)
    drag = pin_drag(w.view, 0)
    path = OUT / "drag-chip.png"
    drag.pixmap().save(str(path))
    return path


def probe_plots() -> list[Path]:
    from widgets.probe.histogram_plot import HistogramPlot
    plot = HistogramPlot()
    plot.resize(800, 420)
    plot.show()
    application().processEvents()
    empty = OUT / "probe-empty.png"
    plot.grab().save(str(empty))
    out = subprocess.run([sys.executable, "-m", "app", "probe", "jitter", "--cpu", "0", "--seconds", "2", "--json"],
                         cwd=REPO, capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)))
    result = json.loads(out.stdout)
    plot.set_run(1, "jitter, CPU 0, 2 s", result["buckets"], float(result["sampled_seconds"]) * 1e9)
    application().processEvents()
    full = OUT / "probe-full.png"
    plot.grab().save(str(full))
    plot.close()
    return [empty, full]


def main() -> None:
    application("coremap-shots")
    with tempfile.TemporaryDirectory(prefix="coremap-shots-") as tmp:
        paths = [irq_marks(Path(tmp)), drag_chip(), *probe_plots()]
    for p in paths:
        print(p.relative_to(REPO))


if __name__ == "__main__":
    main()
