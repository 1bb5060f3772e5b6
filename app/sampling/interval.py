"""The sampling interval's bounds, shared by the sampler, the window's spin box and `--interval` on the
command line. A module of its own so that building the command line's parser (every `coremap` run)
does not import the sampler and the whole model behind it (issue 12: start-up time)."""

MIN_INTERVAL, MAX_INTERVAL = 0.25, 5.0


def clamp_interval(seconds: float) -> float:
    """The sampling interval the window offers: 0.25 s (finer floods the UI thread with states on a
    1000-CPU machine) to 5 s."""
    return min(MAX_INTERVAL, max(MIN_INTERVAL, float(seconds)))
