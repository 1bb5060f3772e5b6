"""Make quiet over ssh, against the real test server: the preview is worked out on the server, applying
it streams each result back as it is written, the server's journal view shows the quiet CPUs, and undo
gives everything back. The agent works on a writable copy of "sno" (openshift-nto) there, so the
test moves no IRQ of this machine."""
from __future__ import annotations

import os
import shutil

import pytest

from app.parse.cpulist import parse_cpulist
from app.pinning.flow import Progress
from app.remote.hosts import parse_host
from app.remote.pins import RemoteAffinityService
from app.remote.quiet import RemoteQuiet
from app.remote.sampler import RemoteSampler
from tests.machines import copy_machine, writable_test_tree


@pytest.fixture
def tree(sshd):
    dst = sshd.writable_tree             # the agent there may write into this copy, and only this one
    shutil.rmtree(dst, ignore_errors=True)
    copy_machine("sno", dst)
    (dst / "sys" / "devices" / "virtual" / "workqueue").mkdir(parents=True)
    (dst / "sys" / "devices" / "virtual" / "workqueue" / "cpumask").write_text("fff\n")
    yield writable_test_tree(dst)
    shutil.rmtree(dst, ignore_errors=True)


def _irqs(tree) -> dict[int, tuple[int, ...]]:
    irq = tree / "proc" / "irq"
    return {int(n): parse_cpulist((irq / n / "smp_affinity_list").read_text()) for n in os.listdir(irq) if n.isdigit()}


def test_make_quiet_over_ssh_previews_there_streams_results_and_undoes(remote_env, tree):
    sampler = RemoteSampler(parse_host("s1"), interval=0.25, root=str(tree))
    try:
        sampler.tick()
        pins = RemoteAffinityService(sampler.link)
        quiet = RemoteQuiet(pins)
        before = _irqs(tree)
        preview = quiet.preview("isolate", [1, 2])
        assert preview.action == "isolate" and preview.cpus == (1, 2) and preview.moves
        assert _irqs(tree) == before                                 # a preview writes nothing
        seen = []
        results = quiet.apply(preview, progress=Progress(lambda r, done, total: seen.append((r.target, done, total))))
        assert [done for _, done, _ in seen] == list(range(1, len(results) + 1))     # each as it was written
        assert [t for t, _, _ in seen] == [r.target for r in results]
        assert all(r.changed for r in results)
        after = _irqs(tree)
        assert all(not {1, 2} & set(m) for n, m in after.items() if set(before[n]) - {1, 2})
        assert pins.ledger().quiet_cpus == (1, 2)                    # the view came back with the batch
        # The preview's tick boxes reach the server: it works the preview out with them.
        assert quiet.preview("include", [1, 2], keep_pins=True).options == ("keep_pins",)
        assert quiet.preview("isolate", [3], move_pinned=True).options == ("move_pinned",)
        hung = tree / "proc" / "sys" / "kernel" / "hung_task_timeout_secs"       # tuned's knobs too (issue 30)
        hung.parent.mkdir(parents=True, exist_ok=True)
        hung.write_text("120\n")
        knobbed = quiet.preview("isolate", [3], knobs=("hung_task",))
        assert knobbed.options == ("hung_task",)
        assert any(m.line().startswith("kernel.hung_task_timeout_secs: 120 -> 600 (tuned's") for m in knobbed.moves)
        with pytest.raises(Exception, match="unknown knob 'swap_off'"):
            quiet.preview("isolate", [3], knobs=("swap_off",))
        with pytest.raises(Exception, match="no longer kept|not made on this connection"):
            quiet.apply(type(preview)(**{**preview.__dict__}))         # only a preview the server made
        undone = pins.undo()
        assert len(undone) == len(results) and _irqs(tree) == before
        assert pins.ledger().quiet_cpus == ()
    finally:
        sampler.close()
