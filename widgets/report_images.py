"""The pictures of a report: the grid coloured by IRQ load, a plot per probe result (and one of all the
histogram runs) and one of each verification's before and after, rendered offscreen
(widgets/pictures.py) and put into the ReportData that app/store/report.py turns into HTML. A messaging,
first-touch or scaling run also gets the text `coremap probe` prints for it (probes/text.py), which
the model cannot make: it does not import probes."""
from __future__ import annotations

from app.store.report import Image, ReportData
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot
from probes.spec import SERIES_PROBES
from probes.text import format_result
from widgets.pictures import GRID_SIZE, SERIES_PLOTS, render_grid, render_probe_plot, render_series_plot, state_for


def add_images(report: ReportData, *, state: MachineState | None = None, root: SysRoot | None = None,
               grid_size=GRID_SIZE) -> ReportData:
    """Fill the report's pictures: the grid coloured by IRQ load (from `state`, else sampled from
    `root`), a plot per probe result and, with several, one plot of all of them."""
    if state is None and root is not None:
        state = state_for(root)
    if state is not None:
        png = render_grid(state, fmt="png", size=grid_size, metric="irq")
        report.topology_image = Image(png, "image/png", *_png_size(png))
    compared = []
    for i, p in enumerate(report.probes, 1):
        if p.result.get("probe") in SERIES_PROBES:
            png = render_series_plot(p.result)
            p.text = format_result(p.result, verdict=False)       # the report prints the verdict above
            p.caption = SERIES_PLOTS[p.result["probe"]][1]
        else:
            png = render_probe_plot(p.result)
            compared.append((i, p))
        p.plot = Image(png, "image/png", *_png_size(png))
    if len(compared) > 1:
        png = render_probe_plot([p.result for _, p in compared],
                                labels=[f"{i}. {p.title}" for i, p in compared])
        report.comparison_plot = Image(png, "image/png", *_png_size(png))
    for v in report.verifications:
        sides = [v.result["before"], v.result["after"]]
        png = render_probe_plot(sides, labels=[s.get("label", "") for s in sides])
        v.plot = Image(png, "image/png", *_png_size(png))
    return report


def _png_size(png: bytes) -> tuple[int, int]:
    # PNG IHDR: width and height are the big-endian words at bytes 16-24 (RFC 2083 section 4.1.1).
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")

