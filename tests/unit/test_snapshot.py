"""coremap snapshot: capture the live machine and a fixture, extract, open with SysRoot/read_sample."""
from __future__ import annotations

import json
import os
import posixpath
import tarfile
from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.interrupts import read_interrupts
from app.machine.sample import read_sample, read_snapshot_pair
from app.parse.cpulist import parse_cpulist
from app.store.capture import SnapshotError, take_snapshot
from app.sysroot import SysRoot
from tests.machines import copy_machine, extract


def _extract(tarball: Path, dest: Path) -> Path:
    with tarfile.open(tarball) as tf:
        names = tf.getnames()
        top = names[0].split("/")[0]
        for m in tf.getmembers():
            # Never escape the top folder, by name or by link target.
            assert m.name == top or m.name.startswith(top + "/"), m.name
            assert ".." not in m.name.split("/")
            if m.issym():
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(m.name), m.linkname))
                assert resolved.startswith(top + "/"), (m.name, m.linkname)
            assert not m.islnk()
        tf.extractall(dest, filter="data")   # the stdlib's own escape check as a second opinion
    return dest / top


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """A snapshot of this machine with its second capture, and its tarball extracted: taken once for the
    module, as the tests below only read it (a capture of the live machine and its extraction took
    1 s of CPU for each)."""
    folder = tmp_path_factory.mktemp("live")
    out = folder / "live.tar.gz"
    res = take_snapshot(out, SysRoot("/"), interval=0.15)
    return folder, out, res, _extract(out, folder / "x")


def test_live_snapshot_round_trip(live):
    folder, out, res, extracted = live
    assert out.exists() and not [p for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert 0.1 < res.interval < 1.0
    root = SysRoot(extracted)
    assert root.root.name == res.top
    meta = root.snapshot_meta()
    assert meta["format"] == 1 and meta["interval"] == res.interval and meta["kernel"]
    assert set(meta) >= {"format", "coremap", "host", "time", "interval", "kernel", "skipped"}
    # The real content, not sysfs's 4096-byte size.
    online = root.read(root.cpu_dir("online"))
    assert parse_cpulist(online) == parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    assert os.path.getsize(root.cpu_dir("online")) == len(online) < 4096
    later = root.later()
    assert later is not None and later[1] == res.interval
    first, second = read_snapshot_pair(root)
    assert (first.time, second.time) == (0.0, res.interval)
    assert first.interrupts is not None and second.interrupts is not None
    assert second.stat.total.total >= first.stat.total.total
    # Threads are in the first capture (issue 30), this test's own among them; the second holds counters.
    assert os.getpid() in first.tasks.processes and second.tasks is None
    assert read_sample(root).interrupts.cpus == first.interrupts.cpus
    # every IRQ folder's affinity was captured
    irqs = [d for d in os.listdir("/proc/irq") if d.isdigit()]
    assert irqs and all(root.irq_dir(i, "smp_affinity_list").exists() for i in irqs)
    # PCI devices stay links, as in sysfs, and point at captured folders
    for dev in os.listdir("/sys/bus/pci/devices"):
        link = root.sys("bus", "pci", "devices", dev)
        assert link.is_symlink() and (link / "vendor").read_text() == \
            Path(f"/sys/bus/pci/devices/{dev}/vendor").read_text()


def test_fixture_recapture_is_faithful(tmp_path):
    src = extract("sno")
    out = tmp_path / "sno.tar.gz"
    res = take_snapshot(out, SysRoot(src))
    assert res.interval is None                      # a capture's counters cannot move
    root = SysRoot(_extract(out, tmp_path / "x"))
    assert root.later() is None and read_snapshot_pair(root) is None
    for rel in ("proc/interrupts", "proc/cmdline", "sys/devices/system/cpu/cpu5/online",
                "sys/devices/system/cpu/cpu5/topology/thread_siblings_list",
                "sys/devices/system/node/node0/cpulist", "proc/irq/11/effective_affinity_list",
                "proc/softirqs", "sys/devices/system/cpu/offline"):
        assert (src / rel).exists() and (root.root / rel).read_bytes() == (src / rel).read_bytes(), rel
    assert read_interrupts(root) == read_interrupts(SysRoot(src))
    assert "proc/stat: missing" in root.snapshot_meta()["skipped"]   # the fixture has none
    n_src = len(os.listdir(src / "sys/bus/pci/devices"))
    assert len(os.listdir(root.sys("bus/pci/devices"))) == n_src


def test_recapture_of_a_snapshot_keeps_its_second_capture(live, tmp_path):
    root = live[3]
    again = take_snapshot(tmp_path / "b.tar.gz", SysRoot(root))
    root2 = SysRoot(_extract(tmp_path / "b.tar.gz", tmp_path / "y"))
    assert again.interval == SysRoot(root).later()[1] == root2.later()[1]
    assert (root2.later()[0].proc("stat")).read_bytes() == (root / ".coremap/t1/proc/stat").read_bytes()


def test_unreadable_file_is_skipped_with_a_note(tmp_path):
    src = extract("sno")
    tree = tmp_path / "tree"
    copy_machine(src, tree, only=("proc",))      # proc/ is enough, and quick
    irq = sorted(d for d in os.listdir(tree / "proc/irq") if d.isdigit())[0]
    bad = tree / "proc/irq" / irq / "node"
    bad.unlink(missing_ok=True)
    bad.symlink_to("node")                     # ELOOP on open: an unreadable file
    res = take_snapshot(tmp_path / "s.tar.gz", SysRoot(tree), second=False)
    assert any(s.startswith(f"proc/irq/{irq}/node:") for s in res.skipped), res.skipped
    root = _extract(tmp_path / "s.tar.gz", tmp_path / "x")
    assert not (root / "proc/irq" / irq / "node").exists()
    assert (root / "proc/irq" / irq / "smp_affinity_list").exists()


def test_refuses_missing_folder_and_keeps_old_file(tmp_path, capsys):
    with pytest.raises(SnapshotError, match="does not exist"):
        take_snapshot(tmp_path / "nope" / "x.tar.gz", SysRoot("/"), second=False)
    assert main(["snapshot", str(tmp_path / "nope" / "x.tar.gz"), "--no-second"]) == 2
    assert "folder" in capsys.readouterr().err
    old = tmp_path / "old.tar.gz"
    old.write_bytes(b"previous")
    empty = tmp_path / "empty"
    (empty / "proc").mkdir(parents=True)
    (empty / "proc" / "cpuinfo").mkdir()        # passes SysRoot's check, holds nothing to capture
    with pytest.raises(SnapshotError, match="nothing to capture"):
        take_snapshot(old, SysRoot(empty), second=False)
    assert old.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "old.tar.gz"]


def test_cli_snapshot_with_top_level_root(tmp_path, capsys):
    src = extract("sno")
    out = tmp_path / "sno.tar.gz"
    assert main(["--root", str(src), "snapshot", str(out), "--interval", "0.1"]) == 0
    assert "counters once" in capsys.readouterr().out
    root = _extract(out, tmp_path / "x")
    meta = json.loads((root / ".coremap/meta.json").read_text())
    assert meta["live"] is False and meta["interval"] is None
