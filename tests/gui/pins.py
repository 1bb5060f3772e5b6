"""Waiting for the window's pin worker in a test: pins, batches and undo run in its own thread
(widgets/pinning/worker.py), so a test that triggers one waits for it to end before it looks."""
from __future__ import annotations


def settle(ctl, timeout_s: float = 60.0) -> None:
    """Block until every job of PinController `ctl` (or a window's) has run and its callbacks ran."""
    ctl = getattr(ctl, "pin_controller", ctl)
    assert ctl.worker.wait_idle(timeout_s), "the pin worker did not finish within the test's time"


def show_pins(w, service) -> None:
    """Window `w` shows the machine `service` pins (a journal of the test's own, often over a writable
    copy of a capture), as a LocalHost given that service; the state it showed is shown again, and its
    sampler ticks on if it did."""
    from app.host import LocalHost
    state, ticking = w.state, w.sampler_thread is not None and w.sampler_thread.running
    w.set_host(LocalHost(service.root, pins=service, interval=w.interval_spin.value()))
    if state is not None:
        assert w.set_state(state)
    if ticking:
        w.sampler_thread.start()
