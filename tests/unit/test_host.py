"""The machine shown as one Host (app/host.py), opened by open_host(args) (app/sources/live.py) for the
CLI and the window, on real captured machines: what each kind of host has, why a part is absent, and
that closing a host ends what it holds (a session's folder, an ssh link)."""
from __future__ import annotations

import argparse
import os
import tempfile

import pytest

from app.errors import CoremapError
from app.host import CaptureHost, LocalHost
from app.remote.host import RemoteHost
from app.remote.hosts import HostSpec
from app.remote.transport import LinkError
from app.sources.live import HostOptionError, SourceHost, SourceSampler, open_host
from app.store.session import save_session, session_from_root
from app.sysroot import SysRoot
from tests.machines import extract


def _args(**kw) -> argparse.Namespace:
    base = dict(root=None, session=None, host=None, pcp=None, prometheus=None, interval=1.0)
    return argparse.Namespace(**{**base, **kw})


def test_a_capture_is_shown_read_only_and_says_why_it_cannot_be_pinned():
    host = open_host(_args(root=str(extract("sno"))))
    try:
        assert isinstance(host, CaptureHost)
        state = host.sampler.tick()
        assert len(state.topology.online) == 12 and not state.live
        assert host.pins is None and host.quiet is None and host.probes is None and host.capture is None
        assert host.absent("pins") == (f"a capture cannot be pinned — this is a snapshot of {host.name}: "
                                      "pinning needs the live machine")
        assert host.absent("probes").endswith("no live probes")
        assert host.root == SysRoot(extract("sno")) and host.guarded() is None
    finally:
        host.close()


def test_root_and_session_together_are_one_line_and_open_nothing(tmp_path, monkeypatch):
    sno = str(extract("sno"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(HostOptionError, match="--root and --session both given"):
        open_host(_args(root=sno, session=str(tmp_path / "x.coremap")))
    with pytest.raises(HostOptionError, match="--host and --session both given"):
        open_host(_args(host="node7", session=str(tmp_path / "x.coremap")))
    assert os.listdir(tmp_path) == []


def test_a_session_is_a_capture_host_whose_folder_goes_with_it(tmp_path, monkeypatch):
    path = tmp_path / "sno.coremap"
    save_session(path, session_from_root(SysRoot(extract("sno"))))
    extracted = tmp_path / "extracted"
    extracted.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(extracted))
    host = open_host(_args(session=str(path)))
    assert isinstance(host, CaptureHost) and host.sampler.source == str(path)
    assert len(host.sampler.tick().topology.online) == 12
    assert os.listdir(extracted)                  # the session's machine, extracted to be read
    host.close()
    assert os.listdir(extracted) == []


def test_this_machine_opens_its_journal_at_the_first_pin_only(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    host = open_host(_args())
    try:
        assert isinstance(host, LocalHost) and host.root.is_live and host.probes is not None
        assert not host.has_journal() and not (tmp_path / "state").exists()
        assert host.pins is not None and host.quiet is not None
        assert host.pins.journal.path.parent == tmp_path / "state"
        assert host.has_journal()
    finally:
        host.close()


def test_this_machine_without_a_writable_state_folder_says_why_there_are_no_pins(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv("COREMAP_STATE_DIR", str(blocker / "state"))
    host = LocalHost()
    assert host.pins is None and host.quiet is None
    assert str(blocker) in host.absent("pins") and host.absent("quiet") == host.absent("pins")
    assert host.sampler.tick().live                # everything else works


def test_a_metrics_source_is_read_only():
    state = CaptureHost(SysRoot(extract("sno"))).sampler.tick()
    host = SourceHost(SourceSampler(lambda g: state, "prometheus sno via http://prom:9090"), "Prometheus")
    assert host.sampler.tick().live is False
    assert host.pins is None and host.absent("pins") == "read-only: a Prometheus source"
    assert host.absent("capture") == "read-only: a Prometheus source: nothing of the host is here to save"
    assert host.root is None and host.guarded() is None


def test_a_host_over_ssh_owns_the_one_link_its_services_use():
    tries = []

    def refused(spec):
        tries.append(spec)
        raise LinkError(f"{spec}: the connection was refused")
    host = RemoteHost(HostSpec("node7"), connect=refused)
    assert host.pins.link is host.link and host.sampler.link is host.link and host.probes_elsewhere
    with pytest.raises(LinkError, match="node7: the connection was refused"):
        host.connect()
    with pytest.raises(CoremapError, match="node7: disconnected"):
        host.capture()
    host.close()
    assert host.link.closed
    with pytest.raises(LinkError, match="node7: the connection was closed"):
        host.sampler.tick()
    assert len(tries) == 1                         # closed: never connected again
