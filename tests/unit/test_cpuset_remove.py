"""A shield's cpuset is removed even while a task that exited in it is not yet reaped: rmdir answers EBUSY
for it although no list names it (seen under two suites' load: `cpuset /coremap-system: Device or resource
busy` ended an include). CpusetWriter tries again, draining between tries, and gives up with the kernel's
own error when the folder stays busy."""
from __future__ import annotations

import errno
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.pinning import cgroups


class _BusyRoot:
    """The folder's rmdir is refused `busy` times; its task lists are empty (the unreaped task is in none)."""

    def __init__(self, busy: int):
        self.busy, self.removed, self.reads = busy, False, 0

    def is_dir(self, path) -> bool:
        return not self.removed

    def remove_dir(self, path) -> None:
        if self.busy:
            self.busy -= 1
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        self.removed = True

    def read_optional(self, path, limit=None) -> str:
        self.reads += 1
        return ""


def _writer(root) -> cgroups.CpusetWriter:
    w = cgroups.CpusetWriter(root)
    w._layout = SimpleNamespace(kind="v1")
    w.dir = lambda index: Path("/sys/fs/cgroup/cpuset/coremap-system") if index else Path("/sys/fs/cgroup/cpuset")
    return w


def test_a_busy_rmdir_is_tried_again_after_a_drain(monkeypatch):
    monkeypatch.setattr(cgroups, "RMDIR_WAIT_S", 0.02)
    root = _BusyRoot(busy=3)
    _writer(root).write(SimpleNamespace(id=cgroups.SYSTEM), ())
    assert root.removed and root.busy == 0
    assert root.reads >= 2 * 4          # both lists, once before the first rmdir and after each refusal


def test_a_folder_that_stays_busy_is_the_kernels_error(monkeypatch):
    monkeypatch.setattr(cgroups, "RMDIR_WAIT_S", 0.02)
    root = _BusyRoot(busy=10 ** 6)
    with pytest.raises(OSError) as e:
        _writer(root).write(SimpleNamespace(id=cgroups.SYSTEM), ())
    assert e.value.errno == errno.EBUSY and not root.removed
    assert root.busy == 10 ** 6 - cgroups.RMDIR_TRIES
