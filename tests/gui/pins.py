"""Waiting for the window's pin worker in a test: pins, batches and undo run in its own thread
(widgets/pinning/worker.py), so a test that triggers one waits for it to end before it looks."""
from __future__ import annotations


def settle(ctl, timeout_s: float = 60.0) -> None:
    """Block until every job of PinController `ctl` (or a window's) has run and its callbacks ran."""
    ctl = getattr(ctl, "pin_controller", ctl)
    assert ctl.worker.wait_idle(timeout_s), "the pin worker did not finish within the test's time"
