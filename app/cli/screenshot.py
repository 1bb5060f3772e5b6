"""`coremap screenshot [--root DIR | --session FILE] --out FILE.png|FILE.svg [--what window|grid]
[--size WxH] [--color-by METRIC]`: render the window or the topology grid offscreen and save it.

Headless: with no DISPLAY or WAYLAND_DISPLAY, Qt's offscreen platform is chosen before Qt is
imported (widgets/ is imported only inside run()).
"""
from __future__ import annotations

import argparse

from app.cli.common import add_command, ensure_headless_qt, opened_host, output_file, pixel_size

WHAT = ("window", "grid")


def register(subparsers) -> None:
    p = add_command(subparsers, "screenshot",
                    "save a PNG or SVG of the window or the topology grid, without a display",
                    "Render the window (or the topology grid alone) offscreen for a machine or a saved "
                    "session and save it as PNG or SVG (vector).")
    # SUPPRESS: the top-level --root/--session/--size/--color-by keep their values when given first.
    p.add_argument("--session", metavar="FILE", default=argparse.SUPPRESS, help="a saved .coremap session")
    p.add_argument("--out", metavar="FILE.png|FILE.svg", required=True, help="the picture to write")
    p.add_argument("--what", choices=WHAT, default="window", help="the whole window (default) or the grid alone")
    p.add_argument("--size", metavar="WxH", type=pixel_size, default=argparse.SUPPRESS, help="size in pixels, e.g. 1600x1000")
    p.add_argument("--color-by", metavar="METRIC", default=argparse.SUPPRESS,
                   help="irq (default), softirq[:KIND], irqtime, busy")
    p.set_defaults(func=run)


def run(args) -> int:
    out = output_file(args, (".png", ".svg"), ".png or .svg")
    fmt = out.suffix.lower().lstrip(".")
    ensure_headless_qt()
    from widgets.application import DEFAULT_SIZE, parse_size, render_window
    from widgets.colors import parse_metric
    from widgets.pictures import GRID_SIZE, render_grid, state_for
    metric = parse_metric(getattr(args, "color_by", None))
    default = GRID_SIZE if args.what == "grid" else DEFAULT_SIZE
    size = parse_size(getattr(args, "size", None)) if getattr(args, "size", None) else default

    with opened_host(args) as host:
        root = host.root
        state = state_for(root)
        if args.what == "grid":
            data = render_grid(state, fmt=fmt, size=size, metric=metric.key)
        else:
            data = render_window(state, fmt=fmt, size=size, metric=metric.key)
        from app.atomic import write_atomic
        write_atomic(out, data)
    note = f" ({state.notes[0]})" if state.notes else ""
    print(f"{out}: {args.what} of {state.topology.hostname or root.root}, coloured by {metric.label}{note}")
    return 0
