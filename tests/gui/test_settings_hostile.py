"""A hostile settings.ini (issue 32): QSettings never touches the file. It is read through the confined
reader (a link, a FIFO, a device, a 2 GB sparse file, another user's folder are refused at once, with a
note on the status line, and the window opens with its defaults) and written through the one writer
(never through a link, never into a device). Numbers that are nan, inf or past a field's range are
dropped and the field keeps its default."""
from __future__ import annotations

import json
import os
import resource
import stat
import time

import pytest

from app.store.folders import settings_path
from app.sysroot import SysRoot
from tests.machines import extract
from app.sources.live import host_of_root
from widgets.application import build_window
from widgets.settings import WindowSettings

NOBODY = 65534


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    w = build_window(host_of_root(SysRoot(extract("sno"))))
    qtbot.addWidget(w)
    settings_path().parent.mkdir(parents=True)
    yield w
    w.close()


def _opened(w) -> tuple[WindowSettings, float]:
    t0 = time.monotonic()
    s = WindowSettings()
    s.restore(w)
    return s, time.monotonic() - t0


def _fingerprint(path):
    st = os.lstat(path)
    return stat.S_IFMT(st.st_mode), st.st_ino, st.st_rdev, st.st_size


def test_a_settings_ini_linked_to_a_file_is_neither_read_nor_written_through(window, tmp_path):
    victim = tmp_path / "victim.conf"
    victim.write_text("[General]\nformat=1\n[grid]\nmetric=softirq\n")
    settings_path().symlink_to(victim)
    before = window.topology_view.color_metric.key
    s, _ = _opened(window)
    assert window.topology_view.color_metric.key == before            # not read through the link
    s.save(window)
    assert settings_path().is_symlink() and victim.read_text().startswith("[General]\nformat=1\n[grid]")
    assert any("symbolic link" in n for n in s.notes) and any(n.startswith("settings not saved") for n in s.notes)
    assert "settings not saved" in window.statusBar().currentMessage() or s.notes


@pytest.mark.skipif(os.geteuid() != 0, reason="a device node of our own takes root")
def test_a_settings_ini_linked_to_a_device_leaves_the_device_a_device(window, tmp_path):
    # A device of our own with /dev/zero's numbers (1, 5): the case that replaced /dev/zero with INI text.
    zero = tmp_path / "zero"
    os.mknod(zero, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    settings_path().symlink_to(zero)
    before = _fingerprint(zero)
    s, spent = _opened(window)
    s.save(window)
    assert _fingerprint(zero) == before and stat.S_ISCHR(os.stat(settings_path()).st_mode)
    assert spent < 2


@pytest.mark.parametrize("kind", ["fifo", "sparse", "device"])
def test_a_settings_ini_that_is_no_small_regular_file_opens_the_defaults_at_once(window, kind):
    path = settings_path()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        with open(path, "wb") as f:
            f.truncate(2 << 30)
    else:
        if os.geteuid() != 0:
            pytest.skip("a device node of our own takes root")
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    before_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shape = _fingerprint(path)
    s, spent = _opened(window)
    assert spent < 2 and s.notes and s.notes[0].startswith(f"settings {path}: is ")
    s.save(window)
    if kind == "sparse":
        assert path.stat().st_size < 64 * 1024          # a regular file of ours: replaced by what the window holds
    else:
        assert _fingerprint(path) == shape             # refused by the writer too: never replaced
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_rss) < 200 * 1024


@pytest.mark.skipif(os.geteuid() != 0, reason="a link of another user takes root")
def test_a_config_folder_linked_by_another_user_is_refused(window, tmp_path):
    elsewhere = tmp_path / "etc"
    elsewhere.mkdir()
    folder = settings_path().parent
    folder.rmdir()
    folder.symlink_to(elsewhere)
    os.lchown(folder, NOBODY, NOBODY)
    s, _ = _opened(window)
    s.save(window)
    assert list(elsewhere.iterdir()) == []
    assert any(f"is a link of uid {NOBODY}" in n for n in s.notes)


def test_a_settings_folder_others_may_write_is_not_believed(window):
    path = settings_path()
    path.write_text("[General]\nformat=1\n[grid]\nmetric=softirq\n")
    path.parent.chmod(0o777)
    before = window.topology_view.color_metric.key
    s, _ = _opened(window)
    assert window.topology_view.color_metric.key == before
    assert any("others may write it (mode 0777)" in n for n in s.notes)
    path.parent.chmod(0o775)            # umask 002's folder: the user's private group may write it
    s, _ = _opened(window)
    assert window.topology_view.color_metric.key == "softirq" and not s.notes


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "1e999", "1e300", "-5"])
def test_a_probe_form_with_nan_inf_or_out_of_range_numbers_keeps_its_defaults(window, bad):
    form = window.probe_panel.form
    default = form.seconds_spin.value()
    text = '{"common": {"seconds_spin": %s, "priority_spin": %s, "cpu_edit": "1"}}' % (bad, bad)
    path = settings_path()
    path.write_text("[General]\nformat=1\n[probes]\nform=" + json.dumps(text) + "\n")
    path.chmod(0o600)
    s = WindowSettings()
    assert s.restore(window) == ["probe form"]          # the CPU field, of its kind; the numbers dropped
    assert form.seconds_spin.value() == default and form.cpu_edit.text() == "1"


def test_saving_keeps_the_mode_of_the_settings_file(window):
    path = settings_path()
    path.write_text("[General]\nformat=1\n")
    path.chmod(0o600)
    s, _ = _opened(window)
    s.save(window)
    assert not path.is_symlink() and (os.stat(path).st_mode & 0o777) == 0o600
    assert "window" in path.read_text() and not s.notes
