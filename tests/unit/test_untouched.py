"""The run-wide check of tests/conftest.py (issue 31): a run that writes into the user's coremap folders
or replaces a device file with a regular file is told, because the fingerprint it compares changes."""
from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import untouched_fingerprint


def test_the_tests_own_xdg_folders_are_not_the_users():
    home = str(Path.home())
    for name in ("CONFIG", "STATE", "DATA", "CACHE"):
        assert not os.environ[f"XDG_{name}_HOME"].startswith(home + os.sep), name


def test_a_written_settings_file_changes_the_fingerprint(tmp_path):
    folder = tmp_path / "config" / "coremap"
    folder.mkdir(parents=True)
    before = untouched_fingerprint([folder], [])
    (folder / "settings.ini").write_text("[window]\n")
    assert untouched_fingerprint([folder], []) != before


def test_a_device_replaced_by_a_regular_file_changes_the_fingerprint(tmp_path):
    dev = tmp_path / "zero"
    real = untouched_fingerprint([], [Path("/dev/zero")])
    assert real == {"/dev/zero": ("char device",)}
    dev.write_text("[window]\n")                       # what a writer through a link once left
    assert untouched_fingerprint([], [dev])[str(dev)] != ("char device",)
