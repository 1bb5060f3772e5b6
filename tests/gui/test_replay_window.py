"""Replay in the window (open_host with --at, widgets/replay.py): a session saved with this machine's real sampled history
opens with a time slider, and moving it redraws the grid and the IRQ table as of that moment."""
from __future__ import annotations

import time
from argparse import Namespace

import pytest

from app.sampling.sampler import Sampler
from app.sources.live import open_host
from app.sources.replay import ReplayError, SessionTimeline, parse_at
from app.store.session import open_session, save_session, session_from_root
from app.sysroot import SysRoot
from widgets.application import build_window
from widgets.session_controller import state_history_tick


@pytest.fixture(scope="module")
def session_file(tmp_path_factory):
    """A session of this machine with five ticks of history, sampled 0.15 s apart: 0.75 s in all, more
    than the half second test_at reads back from the end (0.3 s apart waited out 0.75 s more)."""
    sampler = Sampler(SysRoot("/"))
    history, t0 = [], None
    for _ in range(6):
        state = sampler.tick()
        t0 = state.sample.time if t0 is None else t0
        tick = state_history_tick(state.sample.time - t0, state)
        if tick:
            history.append(tick)
        time.sleep(0.15)
    path = tmp_path_factory.mktemp("replay") / "history.coremap"
    s = session_from_root(SysRoot("/"), history=history)
    save_session(path, s)
    s.close()
    return path


def test_at_reads_seconds_from_either_end_and_refuses_a_wall_clock_time_for_a_session(session_file):
    s = open_session(session_file)
    try:
        tl = SessionTimeline(s)
        assert parse_at("0", tl) == tl.times[0]
        assert parse_at("end", tl) == tl.times[-1]
        assert parse_at("-0.5", tl) == pytest.approx(tl.times[-1] - 0.5)
        with pytest.raises(ReplayError, match="seconds from its start"):
            parse_at("2026-11-25T13:40:00", tl)
        with pytest.raises(ReplayError, match="give seconds from the start"):
            parse_at("yesterday", tl)
    finally:
        s.close()


def _drag_handle(qtbot, slider, value: int) -> None:
    """Press on the slider's handle, move in steps to where `value` sits on the groove, release."""
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtWidgets import QStyle, QStyleOptionSlider
    opt = QStyleOptionSlider()
    slider.initStyleOption(opt)
    style = slider.style()
    handle = style.subControlRect(QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderHandle, slider)
    groove = style.subControlRect(QStyle.ComplexControl.CC_Slider, opt, QStyle.SubControl.SC_SliderGroove, slider)
    span = groove.width() - handle.width()
    x = groove.x() + handle.width() // 2 + QStyle.sliderPositionFromValue(slider.minimum(), slider.maximum(),
                                                                          value, span)
    start = handle.center()
    qtbot.mousePress(slider, Qt.MouseButton.LeftButton, pos=start)
    for k in range(1, 9):
        qtbot.mouseMove(slider, QPoint(start.x() + (x - start.x()) * k // 8, start.y()))
    qtbot.mouseRelease(slider, Qt.MouseButton.LeftButton, pos=QPoint(x, start.y()))


def test_the_slider_redraws_the_window_as_of_each_moment(qtbot, session_file):
    host = open_host(Namespace(session=str(session_file), at="0"))     # as `coremap --session F --at 0`
    tl = host.timeline
    window = build_window(host)
    qtbot.addWidget(window)
    window.show()
    window.sampler_thread.start()
    bar = window.replay.bar
    assert bar is not None and bar.slider.value() == 0
    qtbot.waitUntil(lambda: window.state is not None and "tick 1 of" in window.state.notes[0], timeout=10000)
    assert host.pins is None and "replay" in host.absent("pins")
    for i in (len(tl.times) - 1, 0):
        _drag_handle(qtbot, bar.slider, i)      # the user drags the handle with the mouse
        assert bar.slider.value() == i
        tick = tl.ticks[i]
        want = {int(c): m.get("irq", 0.0) for c, m in tick.get("cpu", {}).items()}
        qtbot.waitUntil(lambda: f"tick {i + 1} of" in window.state.notes[0], timeout=10000)
        got = {c: r.irq_per_s for c, r in window.state.rates.per_cpu.items()}
        assert {c: v for c, v in got.items() if v} == {c: v for c, v in want.items() if v}
        assert window.state.live is False
    assert bar.label.text().strip().endswith(f"(1 of {len(tl.times)})")
    window.set_host(open_host(Namespace()))     # File → Connect…'s "this machine": the slider goes
    assert window.replay.bar is None
    window.sampler_thread.stop()


def test_a_session_renders_headless_as_of_a_moment(session_file, tmp_path, capsys):
    import os
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[2]
    out = tmp_path / "at.png"
    env = dict(os.environ, PYTHONPATH=str(repo), QT_QPA_PLATFORM="offscreen")
    r = subprocess.run([sys.executable, "-m", "app", "--session", str(session_file), "--at", "-0.1", "--screenshot",
                        str(out), "--size", "900x600"], capture_output=True, text=True, timeout=120, env=env, cwd=repo)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert r.stdout.startswith(f"{out}: ") and "tick" not in r.stdout     # the moment drawn, named once
    # The refusal in this process (run_main: the line and status a child gives; a bad --at is refused by a
    # child in tests/remote/test_sources.py): a child of its own cost 0.8 s of start-up.
    from tests.hostile.conftest import run_main
    out.unlink()
    r = run_main(capsys, "--session", session_file, "--at", "noon", "--screenshot", out)
    assert r.returncode == 2 and "--at 'noon'" in r.stderr and not out.exists()
