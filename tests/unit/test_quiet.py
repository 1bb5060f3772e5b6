"""Quiet CPUs (issue 13): the preview, one batch, undo, include — on a writable copy of a real machine
(openshift-nto "sno", 12 CPUs, its IRQ folders) with masks added the way the kernel shows them, and
live on this VM: `coremap isolate --cpus 1` moves every movable IRQ and thread off CPU 1 (counted
from /proc before and after), refuses nothing movable, lists what it cannot move; `coremap undo`
puts every mask back exactly; `coremap include` reverses it. Everything moved is put back in
`finally` blocks."""
from __future__ import annotations

import os
import threading

import pytest

from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.cli.main import main
from app.pinning.journal import Journal
from app.parse.cpulist import parse_cpulist, parse_cpumask
from app.quiet.isolate import LocalQuiet, QuietError, failed_results, outcome_sentence, preview_text
from app.pinning.ledger import Ledger, Moved
from app.sysroot import SysRoot
from tests.live import live_test, read_affinities, restore_quiet
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree

MANAGED_IRQ = 57


@pytest.fixture
def tree(tmp_path) -> SysRoot:
    """sno's proc/irq, CPUs and /proc/interrupts, plus what an isolate also moves: the workqueue
    cpumask, network queues' RPS/XPS masks (and a device whose name coremap will not build a path
    from), and debugfs saying one IRQ is managed."""
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu", "proc/interrupts"),
                 leave_out=(CPU_CACHES,))
    wq = dst / "sys" / "devices" / "virtual" / "workqueue"
    wq.mkdir(parents=True)
    (wq / "cpumask").write_text("fff\n")
    for dev, files in (("eth0", {"rx-0/rps_cpus": "00000006\n", "rx-1/rps_cpus": "0\n", "tx-0/xps_cpus": "fff\n"}),
                       ("we ird", {"rx-0/rps_cpus": "fff\n"})):
        for rel, text in files.items():
            p = dst / "sys" / "class" / "net" / dev / "queues" / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    dbg = dst / "sys" / "kernel" / "debug" / "irq" / "irqs"
    dbg.mkdir(parents=True)
    (dbg / str(MANAGED_IRQ)).write_text("handler:  handle_edge_irq\nstate:    0x00000000\n"
                                        "istate:   0x00000000\nddepth:   0\nwdepth:   0\n"
                                        "dstate:   0x37400200\n            IRQD_AFFINITY_MANAGED\n")
    return SysRoot(writable_test_tree(dst))


@pytest.fixture
def service(tree, tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    yield AffinityService(tree, j)
    j.close()


def _masks(root: SysRoot) -> dict:
    """Every mask of the tree, read straight from its files (the oracle)."""
    out = {}
    for n in os.listdir(root.proc("irq")):
        if n.isdigit():
            out[("irq", n)] = parse_cpulist(root.irq_dir(n, "smp_affinity_list").read_text())
    out["default"] = parse_cpumask(root.proc("irq", "default_smp_affinity").read_text())
    out["workqueue"] = parse_cpumask(root.workqueue_cpumask().read_text())
    for rel in ("rx-0/rps_cpus", "rx-1/rps_cpus", "tx-0/xps_cpus"):
        out[rel] = parse_cpumask((root.net_dir("eth0") / "queues" / rel).read_text())
    return out


# -- the preview -------------------------------------------------------------------------------------
def test_preview_moves_every_mask_touching_the_quiet_cpus_and_says_what_stays(tree, service):
    before = _masks(tree)
    p = LocalQuiet(service).preview("isolate", "1-2")
    hk = tuple(c for c in range(12) if c not in (1, 2))
    assert (p.cpus, p.housekeeping) == ((1, 2), hk)
    moved = {(m.target.kind, m.target.netdev, m.target.id): m for m in p.moves}
    irqs_touching = set()
    for n in os.listdir(tree.proc("irq")):
        if not n.isdigit():
            continue
        req = set(before[("irq", n)])
        eff = set(parse_cpulist(tree.irq_dir(n, "effective_affinity_list").read_text()))
        if (req | eff) & {1, 2}:
            irqs_touching.add(int(n))
    assert irqs_touching - {MANAGED_IRQ} == {k[2] for k in moved if k[0] == "irq"}
    for k, m in moved.items():
        if k[0] == "irq":
            left = tuple(sorted(set(before[("irq", str(k[2]))]) - {1, 2}))
            assert m.after == (left or hk) and m.before == before[("irq", str(k[2]))]
    only_quiet = [m for m in p.moves if m.target.kind == "irq" and not set(m.before) - {1, 2}]
    assert only_quiet and all(m.after == hk and "housekeeping" in m.note for m in only_quiet)
    assert moved[("irqdefault", None, 0)].after == hk and moved[("workqueue", None, 0)].after == hk
    assert moved[("rps", "eth0", 0)].after == hk                  # had CPUs 1 and 2 only
    assert moved[("xps", "eth0", 0)].after == hk
    assert ("rps", "eth0", 1) not in moved                        # RPS off (a zero mask) touches nothing
    stays = {(s.code, s.what or s.target.describe()) for s in p.stays}
    if MANAGED_IRQ in irqs_touching:
        assert any(code == "managed" for code, _ in stays)
    assert ("name", "network device 'we ird'") in stays
    assert any("threads are moved only on the live machine" in n for n in p.notes)
    assert _masks(tree) == before                                 # a preview writes nothing
    assert service.journal.entries() == []
    text = preview_text(p)
    assert "move" in text and "cannot move" in text and "RPS eth0 rx-0" in text


@pytest.mark.parametrize("cpus, why", [("99", "does not exist"), ("0-11", "leaves no CPU"), ("2-x", "not a CPU"),
                                       ("", "names no CPU")])
def test_bad_cpu_lists_are_refused_before_any_journal_line(service, cpus, why):
    with pytest.raises(QuietError, match=why):
        LocalQuiet(service).preview("isolate", cpus)
    assert service.journal.entries() == [] and service.journal.quiet_events() == []


def test_an_offline_cpu_is_refused(tree, service):
    tree.cpu_dir("online").write_text("0-2,4-11\n")
    tree.cpu_dir("cpu3", "online").write_text("0\n")
    with pytest.raises(QuietError, match="CPU 3 is offline"):
        LocalQuiet(service).preview("isolate", "3")


# -- apply, undo, redo, include ---------------------------------------------------------------------------
def test_one_batch_one_undo_and_include_reverses_it(tree, service):
    before = _masks(tree)
    p = LocalQuiet(service).preview("isolate", "1-2")
    results = LocalQuiet(service).apply(p)
    assert len(results) == len(p.moves) and all(r.ok for r in results), [r.line() for r in results if not r.ok]
    [q] = service.journal.quiet_events()
    assert (q.action, q.cpus) == ("isolate", (1, 2))
    assert {e.batch for e in service.journal.entries()} == {q.id}          # one batch, named by the isolate
    isolated = _masks(tree)
    for m in p.moves:
        key = ("irq", str(m.target.id)) if m.target.kind == "irq" else None
        if key:
            assert isolated[key] == m.after
    assert isolated["rx-0/rps_cpus"] == p.housekeeping and isolated["rx-1/rps_cpus"] == ()
    assert service.ledger().quiet_cpus == (1, 2)
    # one of a kind is said in the singular ("1 odd device names" before)
    assert outcome_sentence(p, results).endswith("; 1 could not: 1 odd device name")

    undone = service.undo()
    assert all(r.ok for r in undone) and _masks(tree) == before            # every mask back, exactly
    assert service.ledger().quiet_cpus == ()
    service.redo()
    assert _masks(tree) == isolated and service.ledger().quiet_cpus == (1, 2)

    back = LocalQuiet(service).preview("include", "1-2")
    # Everything that lost a quiet CPU gets it back; an IRQ only rewritten (its effective CPU was
    # quiet, its mask not) lost nothing and has nothing to get back.
    assert {m.target.key for m in back.moves} == {m.target.key for m in p.moves if set(m.before) - set(m.after)}
    assert all(r.ok for r in LocalQuiet(service).apply(back))
    assert _masks(tree) == before and service.ledger().quiet_cpus == ()
    again = LocalQuiet(service).preview("include", "1-2")
    assert again.moves == () and "not quiet" in again.notes[0]
    service.undo()                                                           # undo the include: quiet again
    assert _masks(tree) == isolated and service.ledger().quiet_cpus == (1, 2)


def test_include_one_cpu_at_a_time_ends_where_it_began(tree, service):
    before = _masks(tree)
    LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "1-2"))
    LocalQuiet(service).apply(LocalQuiet(service).preview("include", "1"))
    assert service.ledger().quiet_cpus == (2,)
    partial = _masks(tree)
    assert all(2 not in v for v in partial.values() if v != before.get("rx-1/rps_cpus"))
    LocalQuiet(service).apply(LocalQuiet(service).preview("include", "2"))
    assert _masks(tree) == before


def test_set_quiet_toggles_only_when_needed(service):
    assert LocalQuiet(service).set_quiet((3,), False) is None
    sentence, results = LocalQuiet(service).set_quiet((3,), True)
    assert sentence.startswith("isolate CPU 3 (threads moved):") and results
    assert LocalQuiet(service).set_quiet((3,), True) is None
    sentence, _ = LocalQuiet(service).set_quiet((3,), False)
    assert sentence.startswith("include CPU 3:") and service.ledger().quiet_cpus == ()


def test_an_isolate_keeps_a_pin_made_onto_the_quiet_cpus(tree, service):
    irq = next(int(n) for n in sorted(os.listdir(tree.proc("irq"))) if n.isdigit() and int(n) != MANAGED_IRQ
               and parse_cpulist(tree.irq_dir(n, "smp_affinity_list").read_text()) == tuple(range(12)))
    [r] = service.apply(PinRequest((PinTarget("irq", irq),), (5,)))
    assert r.ok
    p = LocalQuiet(service).preview("isolate", "5")
    [kept] = [s for s in p.stays if s.target.kind == "irq" and s.target.id == irq]
    assert kept.code == "pinned" and "your pin stays" in kept.reason
    assert irq not in {m.target.id for m in p.moves if m.target.kind == "irq"}


def test_pinning_a_moved_irq_back_onto_a_quiet_cpu_warns(tree, service):
    p = LocalQuiet(service).preview("isolate", "1")
    LocalQuiet(service).apply(p)
    irq = next(m.target.id for m in p.moves if m.target.kind == "irq")
    results = service.apply(PinRequest((PinTarget("irq", irq),), (1,)))
    [r] = results
    w = results.warning
    assert r.warning == w and f"IRQ {irq}" in w and "quiet CPU 1" in w and "isolate #" in w


def test_the_warning_rule_for_threads():
    """Unrelated = moved off by the isolate and either background work (IRQ, kernel thread, mask) or
    a pin that mixes quiet and housekeeping CPUs; a user thread placed on quiet CPUs only is the point."""
    t = PinTarget("thread", 4321, 4321, "java")
    state = Ledger(quiet_cpus=(2, 3), moved={t.key: Moved(t, (0, 1, 2, 3), (0, 1), (2, 3), 7)})
    assert state.quiet_warning(t, (2,)) == ""                              # a placement
    assert "spread" in state.quiet_warning(t, (1, 2))                       # mixed
    assert "kernel thread" in state.quiet_warning(t, (2,), kthread=True)
    assert state.quiet_warning(PinTarget("thread", 99), (2,)) == ""         # not moved off: nothing to say
    assert state.quiet_warning(t, (0, 1)) == ""                             # not onto a quiet CPU


# -- live, on this VM ----------------------------------------------------------------------------------
live = live_test


@pytest.fixture
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    return tmp_path / "state"


def _service(state_dir):
    return AffinityService(SysRoot("/"), Journal(state_dir / "journal.jsonl"))


@live
def test_live_isolate_cpu1_undo_and_include(state_dir, capsys):
    parked = threading.Event()
    th = threading.Thread(target=parked.wait, name="quiet-me")     # a thread of ours, allowed on CPU 1
    th.start()
    svc = _service(state_dir)
    try:
        os.sched_setaffinity(th.native_id, {0, 1})
        a0 = read_affinities()
        assert a0.irqs_on(1) and a0.threads_on(1)
        assert main(["isolate", "--cpus", "1"]) == 0
        out = capsys.readouterr().out
        a1 = read_affinities()
        entries = svc.journal.entries()
        failed = [e for e in entries if e.state == "failed"]
        assert all(e.code in ("managed", "gone") for e in failed), [(e.kind, e.target_id, e.code) for e in failed]
        managed = {e.target_id for e in failed if e.code == "managed"}
        # Counted from /proc: no IRQ but a managed one, no pinnable thread that was there before, on CPU 1.
        assert a1.irqs_on(1) <= managed, (a0.irqs_on(1), a1.irqs_on(1))
        left = a1.threads_on(1) & a0.threads_on(1)
        assert not left, [(k, a1.pid_of.get(k[0])) for k in left]
        assert a1.workqueue == frozenset({0}) and a1.default_irq == frozenset({0})
        assert frozenset(os.sched_getaffinity(th.native_id)) == {0}
        # What it cannot move is listed: per-CPU kernel threads (and the managed IRQs' lines).
        assert out.startswith("isolate CPU 1 (cpuset shield):") and "could not move:" in out and "per-CPU kernel thread" in out
        # Every thread still allowed on CPU 1 that was there before is one the kernel refuses to move,
        # and the output names it.
        kept = (a1.threads_on(1, pinnable=False) - a1.threads_on(1)) & set(a0.threads)
        unlisted = [(k, a1.pid_of.get(k[0])) for k in kept if f"thread {k[0]} (" not in out]
        assert kept and not unlisted, (unlisted, out)

        assert main(["undo"]) in (0, 1)
        undo_out = capsys.readouterr().out
        assert all(line.endswith(("ok", ")")) or "exited" in line or "moving" in line
                   for line in undo_out.splitlines() if line.strip()), undo_out
        a2 = read_affinities()
        moved = {(e.kind, e.target_id): e for e in entries if e.state == "done"}
        for (kind, ident), e in moved.items():
            if kind == "irq":
                assert a2.irqs[ident] == frozenset(e.before), ident
            elif kind == "thread" and (ident, e.starttime) in a2.threads:
                assert a2.threads[(ident, e.starttime)] == frozenset(e.before), (ident, e.label)
        assert a2.workqueue == a0.workqueue and a2.default_irq == a0.default_irq
        assert svc.ledger().quiet_cpus == ()

        assert main(["isolate", "--cpus", "1"]) == 0
        assert main(["include", "--cpus", "1"]) in (0, 1)
        inc = capsys.readouterr().out
        assert "include CPU 1:" in inc
        a3 = read_affinities()
        assert a3.irqs == {n: m for n, m in a0.irqs.items() if n in a3.irqs}
        assert frozenset(os.sched_getaffinity(th.native_id)) == {0, 1}
        assert a3.workqueue == a0.workqueue and svc.ledger().quiet_cpus == ()
    finally:
        restore_quiet(svc)
        parked.set()
        th.join()
        svc.journal.close()


@live
def test_live_dry_run_writes_nothing(state_dir, capsys):
    a0 = read_affinities()
    assert main(["isolate", "--cpus", "1", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("isolate CPU 1; housekeeping CPU 0") and "move" in out
    assert read_affinities().irqs == a0.irqs
    assert not (state_dir / "journal.jsonl").exists() or _service(state_dir).journal.entries() == []


@live
def test_live_failed_results_are_only_the_kernels_refusals(state_dir):
    svc = _service(state_dir)
    try:
        p = LocalQuiet(svc).preview("isolate", (1,))
        results = LocalQuiet(svc).apply(p)
        assert failed_results(results) == [], [r.line() for r in failed_results(results)]
    finally:
        restore_quiet(svc)
        svc.journal.close()


def test_an_isolate_in_a_session_and_a_report_is_one_row(tree, service, tmp_path):
    from app.store.report_pins import pin_lines
    from app.store.session import Session, journal_rows, open_session, save_session
    results = LocalQuiet(service).apply(LocalQuiet(service).preview("isolate", "1-2"))
    path = tmp_path / "s.coremap"
    save_session(path, Session(machine_dir=extract("sno"), journal=journal_rows(service.journal.entries())))
    s = open_session(path)
    try:
        assert len(s.journal) == len(results) and s.problems == []       # mask kinds pass the door
        [row] = pin_lines(s.journal)
        assert row.target.startswith("Make quiet CPUs 1-2 (#") and row.change.startswith(f"{len(results)} targets: ")
        assert row.result == "done"
    finally:
        s.close()
