"""The pictures of a report: the grid coloured by IRQ load, a plot per probe result (and one of
all of them) and one of each verification's before and after, rendered offscreen (widgets/pictures.py) and put into the ReportData that
app/report.py turns into HTML."""
from __future__ import annotations

from app.report import Image, ReportData
from app.state import MachineState
from app.sysroot import SysRoot
from widgets.pictures import GRID_SIZE, render_grid, render_probe_plot, state_for


def add_images(report: ReportData, *, state: MachineState | None = None, root: SysRoot | None = None,
               grid_size=GRID_SIZE) -> ReportData:
    """Fill the report's pictures: the grid coloured by IRQ load (from `state`, else sampled from
    `root`), a plot per probe result and, with several, one plot of all of them."""
    if state is None and root is not None:
        state = state_for(root)
    if state is not None:
        png = render_grid(state, fmt="png", size=grid_size, metric="irq")
        report.topology_image = Image(png, "image/png", *_png_size(png))
    for p in report.probes:
        png = render_probe_plot(p.result)
        p.plot = Image(png, "image/png", *_png_size(png))
    if len(report.probes) > 1:
        png = render_probe_plot([p.result for p in report.probes],
                                labels=[f"{i}. {p.title}" for i, p in enumerate(report.probes, 1)])
        report.comparison_plot = Image(png, "image/png", *_png_size(png))
    for v in report.verifications:
        sides = [v.result["before"], v.result["after"]]
        png = render_probe_plot(sides, labels=[s.get("label", "") for s in sides])
        v.plot = Image(png, "image/png", *_png_size(png))
    return report


def _png_size(png: bytes) -> tuple[int, int]:
    # PNG IHDR: width and height are the big-endian words at bytes 16-24 (RFC 2083 section 4.1.1).
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")

