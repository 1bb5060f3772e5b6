"""The first frame imports only what it shows (issue 12): the window on the live machine, shown and
given its first state, has not imported pyqtgraph, numpy or hdrh (the plots sit in docks tabbed
behind the thread table; on a capture, which has no thread table, the Probes dock shows and its
plot is built); showing a plot's dock builds it. The grid's viridis scale, read from pyqtgraph's
colormap file without importing pyqtgraph, is pyqtgraph's own."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys
from widgets.application import build_window
from widgets.harness import application
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
app = application()
state = Sampler(SysRoot("/")).tick()
w = build_window(None)
w.resize(1600, 1000)
w.show()
w.set_state(state)
for _ in range(3):
    app.processEvents()
print("first frame:", sorted(m for m in ("pyqtgraph", "numpy", "hdrh") if m in sys.modules))
w.probe_dock.raise_()
for _ in range(3):
    app.processEvents()
print("probes shown:", "pyqtgraph" in sys.modules, type(w.probe_panel.plots.currentWidget()).__name__)
"""


def test_the_first_frame_does_not_import_the_plots():
    env = dict(os.environ, PYTHONPATH=str(REPO), QT_QPA_PLATFORM="offscreen")
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert "first frame: []" in lines, out.stdout
    assert "probes shown: True HistogramPlot" in lines, out.stdout


def test_the_grid_scale_is_pyqtgraphs_viridis(qtbot):
    import pyqtgraph as pg

    from widgets.colors import LUT
    ref = pg.colormap.get("viridis").getLookupTable(nPts=len(LUT), alpha=False)
    ours = [(c.red(), c.green(), c.blue()) for c in LUT]
    # Within one step of a byte: pyqtgraph interpolates with numpy, this module with Python floats.
    assert all(abs(int(a) - b) <= 1 for r, o in zip(ref, ours) for a, b in zip(r, o))
