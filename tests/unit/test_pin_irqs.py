"""`coremap pin` of several IRQs (issue 30): --irq given again, lists, handler name patterns, --device,
--spread over the CPUs given (the device's NUMA node first) and --rps, each pinned as ONE batch that one
undo reverts; on copies of the sno and worker1 captures (worker1: 4 i40e ports of 80 queues each, all on
node 0)."""
import json
import os
from pathlib import Path

import pytest

from app.cli.main import main
from app.parse.cpulist import format_cpumask, parse_cpulist
from app.pinning.spread import queue_targets, spread
from app.machine.interrupts import IrqDevice
from tests.machines import CPU_CACHES, copy_machine, extract, writable_test_tree


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture
def sno(tmp_path):
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    return writable_test_tree(dst)


def _copy_worker1(dst):
    """What a pin of worker1's IRQs reads and writes: its IRQ folders and /proc/interrupts, its CPUs and
    nodes, its PCI devices (their numa_node); copied, so it may be written."""
    src = extract("worker1.internal")
    nodes = [f"sys/devices/system/node/{n}/cpulist" for n in ("node0", "node1")]
    buses = [f"sys/devices/{bus.name}" for bus in (src / "sys" / "devices").glob("pci*")]  # bus/pci/devices/* link there
    copy_machine(src, dst, only=("proc/irq", "proc/interrupts", "sys/devices/system/cpu", *nodes,
                                 "sys/devices/system/node/online", "sys/bus/pci", *buses), leave_out=(CPU_CACHES,))
    return writable_test_tree(dst)


@pytest.fixture(scope="module")
def worker1(tmp_path_factory):
    """A copy the dry runs share (a dry run writes nothing; each test checks that it did not)."""
    return _copy_worker1(tmp_path_factory.mktemp("dry") / "worker1")


@pytest.fixture
def worker1_own(tmp_path):
    return _copy_worker1(tmp_path / "worker1")


def _smp(root, n):
    return (root / "proc" / "irq" / str(n) / "smp_affinity_list").read_text().strip()


def _eno1_queues(root):
    """IRQ number -> queue of every i40e-eno1-TxRx-N line of the capture's /proc/interrupts."""
    out = {}
    for line in (root / "proc" / "interrupts").read_text().splitlines():
        words = line.split()
        if words and words[-1].startswith("i40e-eno1-TxRx-"):
            out[int(words[0].rstrip(":"))] = int(words[-1].rsplit("-", 1)[1])
    return out


def test_irq_given_twice_pins_both_as_one_batch(sno, capsys):
    # Wrong answer 7: argparse kept the last --irq, so IRQ 24 was silently left where it was.
    before = (_smp(sno, 24), _smp(sno, 25))
    assert main(["pin", "--irq", "24", "--irq", "25", "--cpus", "3", "--root", str(sno)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"IRQ 24: {before[0]} -> 3 ok (effective 1)",
                                                    f"IRQ 25: {before[1]} -> 3 ok (effective 2)"]
    assert (_smp(sno, 24), _smp(sno, 25)) == ("3", "3")
    assert main(["undo", "--root", str(sno)]) == 0       # one undo: both back
    assert (_smp(sno, 24), _smp(sno, 25)) == before
    capsys.readouterr()
    assert main(["journal", "--json"]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    assert {e["batch"] for e in entries if e["origin"] == "cli"} == {entries[0]["id"]}


def test_a_list_and_a_number_again_select_each_irq_once(sno, capsys):
    assert main(["pin", "--irq", "24,25-26", "--irq", "25", "--cpus", "0-1", "--root", str(sno)]) == 0
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["IRQ 24", "IRQ 25", "IRQ 26"]
    assert {_smp(sno, n) for n in (24, 25, 26)} == {"0-1"}


def test_a_word_that_selects_nothing_refuses_the_whole_pin(sno, worker1, capsys):
    before = _smp(sno, 24), _smp(worker1, 253)
    for root, args, said in ((sno, ["--irq", "24", "--irq", "999"], "IRQ 999 does not exist"),
                             (sno, ["--irq", "24,30-2"], "is not an IRQ number or range"),
                             (worker1, ["--irq", "253", "--irq", "nothing-like-this-*"], "no IRQ handler on"),
                             (worker1, ["--device", "eno9"], "no IRQ of that device"),
                             (worker1, ["--tid", "1", "--device", "eno1"], "exactly one of"),
                             (worker1, ["--irq", "252", "--rps"], "IRQ 252: not a network queue's")):
        code = main(["pin", *args, "--cpus", "1", "--root", str(root)])
        out, err = capsys.readouterr()
        assert code == 2 and (out + err).count("\n") == 1 and said in out + err, (args, out, err)
    assert (_smp(sno, 24), _smp(worker1, 253)) == before
    assert main(["journal"]) == 0
    assert "is empty" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:            # not a word at all: argparse's own one line
        main(["pin", "--irq", "\x1b[31m", "--cpus", "1"])
    assert e.value.code == 2


def test_a_pattern_selects_every_queue_by_its_handler_name(worker1, capsys):
    queues = _eno1_queues(worker1)
    assert len(queues) == 80
    assert main(["pin", "--irq", "i40e-eno1-TxRx-*", "--cpus", "5", "--dry-run", "--root", str(worker1)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == "dry run: it would go; nothing was written"
    named = [line.split(":")[0] for line in lines[:-1]]
    assert named == [f"IRQ {n} (i40e-eno1-TxRx-{q})" for n, q in sorted(queues.items())]


def test_a_device_selects_every_vector_of_its_pci_function(worker1, capsys):
    # eno1 is 0000:19:00.0: its 80 queues, its misc vector and its flow director's, as its chip names them.
    on_function = [int(line.split(":")[0]) for line in (worker1 / "proc/interrupts").read_text().splitlines()
                   if "PCI-MSIX-0000:19:00.0 " in line]
    assert main(["pin", "--device", "eno1", "--cpus", "5", "--dry-run", "--root", str(worker1)]) == 0
    lines = capsys.readouterr().out.splitlines()[:-1]
    assert [int(line.split()[1]) for line in lines] == sorted(on_function) and len(on_function) == 82
    assert main(["pin", "--device", "0000:19:00.0", "--cpus", "5", "--dry-run", "--root", str(worker1)]) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == lines


def test_spread_of_worker1s_eno1_queues_over_node0_is_previewed_one_per_cpu(worker1, capsys):
    # The issue's done-when: 80 queues over node 0's 40 CPUs, a dry run on a writable copy.
    node0 = parse_cpulist((worker1 / "sys/devices/system/node/node0/cpulist").read_text())
    assert (worker1 / "sys/bus/pci/devices/0000:19:00.0/numa_node").read_text().strip() == "0"
    queues = _eno1_queues(worker1)
    before = {n: _smp(worker1, n) for n in queues}
    assert main(["pin", "--irq", "i40e-eno1-TxRx-*", "--cpus", ",".join(map(str, node0)), "--spread",
                 "--dry-run", "--root", str(worker1)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("spread 80 IRQs over CPUs 0,2,4,") and out[-1].startswith("dry run: it would go")
    placed = {}
    for line in out[1:-1]:
        irq = int(line.split()[1])
        if line.endswith(" already; nothing changes"):      # a queue already on its CPU
            placed[irq] = int(line.split("): ")[1].split()[0])
            assert placed[irq] == int(before[irq])
            continue
        assert line.endswith(" would be written") and f"(i40e-eno1-TxRx-{queues[irq]}): {before[irq]} -> " in line
        placed[irq] = int(line.split(" -> ")[1].split()[0])
    # Queue q on the q-th CPU of the node, round robin: each CPU takes two of the 80.
    assert placed == {n: node0[q % len(node0)] for n, q in queues.items()}
    assert {n: _smp(worker1, n) for n in queues} == before          # nothing written


def test_spread_over_both_nodes_fills_the_devices_node_first_and_undoes_as_one(worker1_own, capsys):
    worker1 = worker1_own
    node0 = set(parse_cpulist((worker1 / "sys/devices/system/node/node0/cpulist").read_text()))
    queues = _eno1_queues(worker1)
    before = {n: _smp(worker1, n) for n in queues}
    assert main(["pin", "--irq", "i40e-eno1-TxRx-*", "--cpus", "0-79", "--spread", "--root", str(worker1)]) == 0
    capsys.readouterr()
    placed = {n: int(_smp(worker1, n)) for n in queues}
    by_queue = [placed[n] for n in sorted(queues, key=queues.get)]
    assert set(by_queue[:40]) == node0 and set(by_queue[40:]) == set(range(80)) - node0
    assert main(["undo", "--root", str(worker1)]) == 0
    assert {n: _smp(worker1, n) for n in queues} == before
    assert main(["undo", "--root", str(worker1)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "nothing to undo"


def test_rps_is_refused_whole_where_its_queue_files_are_not(worker1, capsys):
    # The capture holds no sys/class/net: moving the IRQs without their queues is not what was asked,
    # so nothing is written, dry run or not.
    before = _smp(worker1, 253), _smp(worker1, 254)
    for dry in (["--dry-run"], []):
        assert main(["pin", "--irq", "i40e-eno1-TxRx-0", "--irq", "i40e-eno1-TxRx-1", "--cpus", "2,4", "--spread",
                     "--rps", *dry, "--root", str(worker1)]) == 2
        out = capsys.readouterr().out.splitlines()
        assert out[1:] == ["IRQ 253 (i40e-eno1-TxRx-0): RPS eno1 rx-0 does not exist on this machine (no "
                           "sys/class/net/eno1/queues); nothing was written, drop --rps"]
    assert (_smp(worker1, 253), _smp(worker1, 254)) == before


def test_spread_rule():
    nodes = {c: c % 2 for c in range(6)}            # worker1's shape: even CPUs node 0, odd node 1
    assert spread([10, 11, 12, 13], [0, 1, 2, 3], {10: 1, 11: 1, 12: 1, 13: 1}, nodes) == ((1,), (3,), (0,), (2,))
    assert spread([10, 11, 12], [4], {}, nodes) == ((4,), (4,), (4,))            # more IRQs than CPUs
    assert spread([1, 2, 3], [0, 1, 2], {1: None, 2: 0, 3: 0}, nodes) == ((0,), (2,), (1,))
    with pytest.raises(ValueError):
        spread([1], [], {}, nodes)


def test_queue_targets_by_direction():
    def q(queue, netdev="eth0"):
        return [(t.kind, t.id, t.netdev) for t in queue_targets(IrqDevice(None, None, netdev, queue, ""))]
    assert q("TxRx-3") == [("rps", 3, "eth0"), ("xps", 3, "eth0")]
    assert q("input.0") == [("rps", 0, "eth0")] and q("output.0") == [("xps", 0, "eth0")]
    assert q("rx-2") == [("rps", 2, "eth0")] and q("tx-5") == [("xps", 5, "eth0")]
    assert q("misc") == [] and q("TxRx-1", netdev=None) == []


def test_spread_goes_by_the_devices_node_not_the_irqs_own():
    # master.internal: nvme0q0's /proc/irq/N/node says 0, its drive (PCI numa_node) is on node 1
    # (issue 30, wrong answer 4). Offered CPU 0 (node 0) and CPU 1 (node 1), it goes to CPU 1.
    from app.machine.interrupts import read_irqs
    from app.machine.topology import read_topology
    from app.pinning.spread import spread_irqs
    from app.sysroot import SysRoot
    root = SysRoot(extract("master.internal"))
    table, topology = read_irqs(root), read_topology(root)
    [irq] = [int(r.irq) for r in table.rows if r.actions == ("nvme0q0",)]
    info = table.info[str(irq)]
    assert (info.node, info.device_node) == (0, 1)
    assert {c.id: c.node for c in topology.cpus if c.id < 2} == {0: 0, 1: 1}
    assert spread_irqs([irq], [0, 1], table, topology) == ((1,),)


# -- live: this machine's own IRQs, put back ----------------------------------------------------------------
LIVE_CPUS = tuple(sorted(os.sched_getaffinity(0)))
IRQ = Path("/proc/irq")


def _live_mask(n: int) -> str:
    return (IRQ / str(n) / "smp_affinity_list").read_text().strip()


def _movable_irqs(count: int) -> list[int]:
    """IRQs whose mask the kernel lets user space write (a managed one answers EIO): each written back
    as it was, which moves nothing."""
    found = []
    for n in sorted((int(d) for d in os.listdir(IRQ) if d.isdigit())):
        mask = _live_mask(n)
        try:
            (IRQ / str(n) / "smp_affinity_list").write_text(mask + "\n")
        except OSError:
            continue
        found.append(n)
        if len(found) == count:
            break
    return found


live_two_cpus = pytest.mark.skipif(os.geteuid() != 0 or len(LIVE_CPUS) < 2,
                                   reason="moving this machine's IRQs needs root and two CPUs")


@live_two_cpus
def test_live_spread_moves_two_real_irqs_and_one_undo_puts_both_back(live_machine, capsys):
    irqs = _movable_irqs(2)
    assert len(irqs) == 2, "this machine has no two IRQs whose affinity may be set"
    before = {n: _live_mask(n) for n in irqs}
    cpus = LIVE_CPUS[:2]
    try:
        assert main(["pin", "--irq", str(irqs[0]), "--irq", str(irqs[1]), "--cpus", ",".join(map(str, cpus)),
                     "--spread"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert len(out) == 3 and out[0].startswith("spread 2 IRQs over CPUs"), out
        assert sorted(_live_mask(n) for n in irqs) == sorted(map(str, cpus))      # one each
        assert main(["undo"]) == 0
        assert {n: _live_mask(n) for n in irqs} == before
    finally:
        for n, mask in before.items():
            (IRQ / str(n) / "smp_affinity_list").write_text(mask + "\n")


def _live_queue_irqs() -> list[int]:
    """The IRQs here of one network device's queues that may be moved and whose RPS file is there (a
    virtio NIC's input.0/output.0, a NIC's TxRx-N)."""
    from app.machine.interrupts import read_irqs
    from app.sysroot import SysRoot
    by_dev: dict[str, list[int]] = {}
    for irq, info in sorted(read_irqs(SysRoot("/")).info.items(), key=lambda kv: int(kv[0])):
        masks = queue_targets(info.device)
        if masks and Path(f"/sys/class/net/{masks[0].netdev}/queues/rx-0/rps_cpus").exists() \
                and _movable_irqs_one(int(irq)):
            by_dev.setdefault(masks[0].netdev, []).append(int(irq))
    return next(iter(by_dev.values()), [])


def _movable_irqs_one(n: int) -> bool:
    try:
        (IRQ / str(n) / "smp_affinity_list").write_text(_live_mask(n) + "\n")
    except OSError:
        return False
    return True


def _steering_file(e) -> Path:
    return Path(f"/sys/class/net/{e.netdev}/queues/{'rx' if e.kind == 'rps' else 'tx'}-{e.target_id}/{e.kind}_cpus")


@live_two_cpus
def test_live_rps_follows_each_queue_and_undo_puts_it_back(live_machine, capsys):
    irqs = _live_queue_irqs()[:2]
    if not irqs:
        pytest.skip("no network queue IRQ with an rps_cpus file on this machine (a NIC without MSI-X queues)")
    from app.pinning.journal import Journal
    from app.store.folders import journal_path
    before = {n: _live_mask(n) for n in irqs}
    cpus = LIVE_CPUS[:len(irqs)]
    written = []
    try:
        assert main(["pin", *[a for n in irqs for a in ("--irq", str(n))], "--cpus", ",".join(map(str, cpus)),
                     "--spread", "--rps"]) == 0, capsys.readouterr()
        capsys.readouterr()
        with Journal(journal_path(create=False), readonly=True) as j:
            entries = j.entries()
        written = [e for e in entries if e.kind in ("rps", "xps")]
        assert any(e.kind == "rps" for e in written), [(e.kind, e.target_id) for e in entries]
        irq_cpu = {e.target_id: e.requested for e in entries if e.kind == "irq"}
        for e in written:         # each queue's mask is its IRQ's one CPU, as the file reads now
            assert e.requested in irq_cpu.values() and len(e.requested) == 1
            assert int(_steering_file(e).read_text().replace(",", ""), 16) == 1 << e.requested[0]
        assert sorted(_live_mask(n) for n in irqs) == sorted(str(c) for c in cpus)
        assert main(["undo"]) == 0
        assert {n: _live_mask(n) for n in irqs} == before
        for e in written:
            assert parse_cpulist(",".join(str(c) for c in e.before)) == e.before
            assert int(_steering_file(e).read_text().replace(",", ""), 16) == sum(1 << c for c in e.before)
    finally:
        for n, mask in before.items():
            (IRQ / str(n) / "smp_affinity_list").write_text(mask + "\n")
        for e in written:
            _steering_file(e).write_text(format_cpumask(e.before) + "\n")


def test_a_spread_crosses_the_wire_whole_and_a_forged_one_is_refused():
    # The window spreads a machine it shows over ssh too: the request goes to its agent with each IRQ's CPU.
    from app.pinning.targets import PinRequest, PinTarget
    from app.remote.codec import Encoder, wire_schema
    from app.remote.decode import DecodeError, Decoder
    request = PinRequest((PinTarget("irq", 24), PinTarget("irq", 25)), (1, 2), "drop", each=((2,), (1,)), rps=True)
    decoder = Decoder(wire_schema(), PinRequest)
    assert decoder.decode(Encoder().encode(request)) == request
    forged = Encoder().encode(PinRequest((PinTarget("irq", 24),), (1, 2), "drop"))
    forged["f"][4] = [[7]]                   # a CPU the pin did not ask for
    with pytest.raises(DecodeError, match="per-target CPUs"):
        decoder.decode(forged)
