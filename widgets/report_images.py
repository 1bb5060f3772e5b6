"""The pictures of a report, and what each probe section shows: the grid coloured by IRQ load, a
plot per probe result (and one of all the histogram runs) and one of each verification's before and
after, rendered offscreen (widgets/pictures.py) and put into the ReportData that app/store/report.py
turns into HTML.

What a probe's section holds is its record's to say (probes/catalog.py), which the model cannot
read (it does not import probes): a histogram probe's run gets its gap plot, the figures its users
read first (probes/text.py lead_figures: a jitter run's gaps per second and per CPU-hour, time lost,
longest gap) and stays in the comparison; any other probe's run gets the picture its record names (if any) with the
record's caption, and the text `coremap probe` prints for it (probes/text.py)."""
from __future__ import annotations

from app.store.report import Image, ProbeSection, ReportData
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot
from probes.catalog import RECORDS
from probes.text import format_result, lead_figures
from widgets.pictures import AXES, GRID_SIZE, axes_of, render_grid, render_probe_plot, render_result_plot, state_for

CAPTIONS = {"gaps": "gap lengths, count per CPU-hour", "latency": "wake-up latencies, count per CPU-hour"}


def add_images(report: ReportData, *, state: MachineState | None = None, root: SysRoot | None = None,
               grid_size=GRID_SIZE, quiet=()) -> ReportData:
    """Fill the report's pictures: the grid coloured by IRQ load (from `state`, else sampled from
    `root`) with the `quiet` CPUs badged as the window shows them, a section per probe result and,
    with several histogram runs, one plot of those drawn on the same axes (the jitter runs', the
    wakeup runs')."""
    if state is None and root is not None:
        state = state_for(root)
    if state is not None:
        png = render_grid(state, fmt="png", size=grid_size, metric="irq", quiet=quiet)
        report.topology_image = Image(png, "image/png", *_png_size(png))
    compared = [(i, p) for i, p in enumerate(report.probes, 1) if _fill_section(p)]
    if len(compared) > 1:
        for axes in AXES:           # jitter runs compared on the gaps' axes, wakeup runs on their own
            alike = [(i, p) for i, p in compared if axes_of(p.result) == axes]
            if len(alike) > 1:
                png = render_probe_plot([p.result for _, p in alike], labels=[f"{i}. {p.title}" for i, p in alike])
                report.comparison_plots.append(Image(png, "image/png", *_png_size(png)))
    for v in report.verifications:
        sides = [v.result["before"], v.result["after"]]
        png = render_probe_plot(sides, labels=[s.get("label", "") for s in sides])
        v.plot = Image(png, "image/png", *_png_size(png))
    return report


def _fill_section(p: ProbeSection) -> bool:
    """Give a probe run's section what its record says it shows; True for a run whose gaps and
    percentiles are compared with the others' (a histogram probe's, or one of a probe this coremap
    does not know)."""
    record = RECORDS.get(p.result.get("probe"))
    if record is None or record.histogram:
        png = render_probe_plot(p.result)
        p.plot, p.caption = Image(png, "image/png", *_png_size(png)), CAPTIONS[axes_of(p.result)]
        p.figures, p.percentiles_of = lead_figures(p.result)
        return True
    p.text = format_result(p.result, verdict=False)       # the report prints the verdict above
    if record.picture:
        png = render_result_plot(p.result)
        p.plot, p.caption = Image(png, "image/png", *_png_size(png)), record.picture
    return False


def _png_size(png: bytes) -> tuple[int, int]:
    # PNG IHDR: width and height are the big-endian words at bytes 16-24 (RFC 2083 section 4.1.1).
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
