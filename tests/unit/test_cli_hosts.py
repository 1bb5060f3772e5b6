"""Every command opens its machine through open_host (app/sources/live.py), the door the window and the
fleet use (issue 29): a saved session, a capture and this machine are each one Host, opened cheaply
(a command that reads one file pays for no sampler, journal or probe runner) and closed after the
command. On real captured machines and sessions saved from them."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from app.cli.main import main
from app.errors import CoremapError
from app.host import CaptureHost, LocalHost
from app.sources.live import host_of_root
from app.store.session import save_session, session_from_root
from app.sysroot import SysRoot
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def session(tmp_path, monkeypatch):
    """A session saved from the sno capture, the folder its machine is extracted into when opened, and
    the capture (extracted before temporary files go there)."""
    sno = extract("sno")
    path = tmp_path / "sno.coremap"
    save_session(path, session_from_root(SysRoot(sno)))
    extracted = tmp_path / "extracted"
    extracted.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(extracted))
    return path, extracted, sno


OPENS = r"""
import sys, argparse
from app.sources.live import open_host
with open_host(argparse.Namespace(root=sys.argv[1])) as host:
    host.root.read(host.root.proc("interrupts"))
print("\n".join(sorted(sys.modules)))
"""
# What a host must not import until a part of it is used: a command that reads /proc/interrupts
# through it (coremap irqs) would pay ~50 ms for them.
PARTS = ("app.sampling.sampler", "app.pinning.journal", "app.pinning.service", "app.quiet.isolate", "probes.runner",
         "app.store.session", "app.remote.host", "app.remote.client")


@pytest.mark.parametrize("root", ["/", "fixture"])
def test_a_host_opens_without_its_parts(root):
    root = str(extract("sno")) if root == "fixture" else root
    r = subprocess.run([sys.executable, "-c", OPENS, root], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert [m for m in PARTS if m in r.stdout.split()] == []


def test_the_check_sees_a_part_imported():
    """The check can fail: the same script asking the host for its sampler imports the sampler."""
    script = OPENS.replace('host.root.read(host.root.proc("interrupts"))', "host.sampler")
    r = subprocess.run([sys.executable, "-c", script, "/"], cwd=ROOT, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert "app.sampling.sampler" in r.stdout.split()


def test_a_command_reads_a_sessions_machine_and_closes_it(session, capsys):
    path, extracted, sno = session
    assert main(["--session", str(path), "irqs", "--json"]) == 0
    from_session = json.loads(capsys.readouterr().out)
    assert main(["--root", str(sno), "irqs", "--json"]) == 0
    assert from_session == json.loads(capsys.readouterr().out)        # the session's machine is sno's
    assert os.listdir(extracted) == []                                  # and its folder went with the command


def test_root_and_session_together_are_refused_in_one_line_by_every_command(session, capsys):
    path, extracted, sno = session
    for argv in (["topology"], ["report", "--out", str(path.parent / "r.html")]):
        assert main(["--root", str(sno), "--session", str(path), *argv]) == 2
        err = capsys.readouterr().err
        assert err == "coremap: --root and --session both given: open one machine at a time\n"
    assert os.listdir(extracted) == [] and not (path.parent / "r.html").exists()


def test_a_captures_pins_only_plan():
    """A capture has no pins (the window hints why, a pin command prints it), but a dry run may ask
    what a pin or an isolate would do there: that service refuses every write itself."""
    with host_of_root(SysRoot(extract("sno"))) as host:
        assert isinstance(host, CaptureHost) and host.pins is None
        with pytest.raises(CoremapError, match="^a capture cannot be pinned — this is a snapshot of "):
            host.open_pins()
        planner = host.open_pins(dry_run=True)
        assert planner.journal.readonly and host.pins is None
    assert not Path(os.environ["COREMAP_STATE_DIR"]).exists()          # nothing created for a dry run


def test_a_copy_the_tests_may_write_is_pinned_through_its_host(tmp_path, capsys):
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    with host_of_root(SysRoot(writable_test_tree(dst))) as host:
        assert isinstance(host, LocalHost) and host.pins is not None and host.probes is None
        assert host.absent("probes") == "a copy of sno: no live probes"
    assert main(["pin", "--irq", "24", "--cpus", "1", "--root", str(dst), "--dry-run"]) == 0
    assert capsys.readouterr().out.endswith("dry run: it would go; nothing was written\n")
    assert main(["pin", "--irq", "24", "--cpus", "1", "--root", str(dst)]) == 0
    assert (dst / "proc" / "irq" / "24" / "smp_affinity_list").read_text().strip() == "1"
