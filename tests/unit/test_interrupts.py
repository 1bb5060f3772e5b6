"""parse_interrupts / parse_softirqs on every real sample, and read_irqs on the openshift-nto and hwloc
machines and this one."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from app.errors import ParseError, SysRootReadError
from app.machine.interrupts import parse_action_name, read_interrupts, read_irqs, read_softirqs
from app.parse.interrupts import (MEMO_MAX_BYTES, InterruptRow, InterruptTable, RowMemo, parse_interrupts,
                                  parse_softirqs)
from app.sysroot import SysRoot
from tests.machines import INTERRUPTS_DIR, all_machines, copy_machine, extract, procfs_composite

OPENSHIFT = ("master.internal", "worker1.internal", "worker2.internal", "sno")


def _interrupt_files() -> list[Path]:
    files = sorted(p for p in INTERRUPTS_DIR.rglob("*") if p.is_file() and "interrupts" in p.name)
    for m in all_machines():
        if m.source == "openshift-nto":
            files.append(extract(m) / "proc" / "interrupts")
    files.append(procfs_composite() / "proc" / "interrupts")
    return files


def _softirq_files() -> list[Path]:
    files = sorted(p for p in INTERRUPTS_DIR.rglob("*softirqs") if p.is_file())
    for name in OPENSHIFT:
        files.append(extract(name) / "proc" / "softirqs")
    return files


def _oracle_header(text: str) -> list[int]:
    first = next(line for line in text.split("\n") if line.strip())
    return [int(n) for n in re.findall(r"CPU(\d+)", first)]


@pytest.mark.parametrize("path", _interrupt_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_interrupts_sample_parses(path):
    text = path.read_text()
    t = parse_interrupts(text, what=str(path))
    assert list(t.cpus) == _oracle_header(text)
    labels = [ln.split(":", 1)[0].strip() for ln in text.split("\n")[1:] if ln.strip()]
    assert [r.irq for r in t.rows] == labels
    for r in t.rows:
        if r.counts:
            assert len(r.counts) == len(t.cpus)
            assert r.total == sum(r.counts)
        if r.numbered:
            assert r.chip, r


def test_aarch64_glued_label_single_count_and_chip():
    t = parse_interrupts((INTERRUPTS_DIR / "node_exporter" / "interrupts_aarch64").read_text())
    assert t.cpus == tuple(range(8))
    ipi0 = t.row("IPI0")
    assert ipi0.counts == (2768808080, 2844211768, 2878602432, 2730576120, 2723524623, 3349096412,
                           2717389879, 2154252810)
    assert ipi0.description == "Rescheduling interrupts"
    err = t.row("Err")
    assert err.counts == () and err.total == 0
    r10 = t.row("10")
    assert (r10.chip, r10.hwirq, r10.trigger, r10.actions) == ("GICv3", "27", "Level", ("arch_timer",))
    assert r10.counts[5] == 3641875466
    r57 = t.row("57")
    assert (r57.chip, r57.hwirq, r57.actions) == ("ITS-MSI", "81920", ("ena-mgmnt@pci:0000:00:05.0",))
    r50 = t.row("50")
    assert (r50.chip, r50.hwirq, r50.trigger, r50.actions) == ("ARMH0061:00", "3", "Edge", ("ACPI:Event",))


def test_old_style_chip_and_shared_actions():
    t = parse_interrupts((INTERRUPTS_DIR / "node_exporter" / "interrupts").read_text())
    r16 = t.row("16")
    assert (r16.chip, r16.hwirq, r16.trigger) == ("IR-IO-APIC", None, "fasteoi")
    assert r16.actions == ("ehci_hcd:usb1", "mmc0")
    assert r16.counts == (328511, 322879, 293782, 351412)
    assert (t.row("40").chip, t.row("40").trigger) == ("DMAR_MSI", "edge")
    assert (t.row("42").chip, t.row("42").trigger) == ("IR-PCI-MSI", "edge")
    for label in ("ERR", "MIS"):
        assert t.row(label).counts == () and t.row(label).total == 0
    assert t.row("LOC").total == 174326351 + 135776678 + 168393257 + 130980079


def test_raspberry_pi_fiq_row_without_counts():
    t = parse_interrupts((INTERRUPTS_DIR / "telegraf" / "rpi-bcm2836-interrupts.reconstructed").read_text())
    fiq = t.row("FIQ")
    assert fiq.counts == () and fiq.total == 0 and fiq.description == "usb_fiq"
    assert t.row("IPI2").counts == (23564958, 23464876, 23531165, 23040826)
    r62 = t.row("62")
    assert r62.chip == "ARMCTRL-level" and r62.hwirq == "64" and r62.trigger == "Edge"
    assert r62.actions == ("dwc_otg", "dwc_otg_pcd", "dwc_otg_hcd:usb1")
    assert t.row("24").actions == ("VCHIQ doorbell",)


def test_new_style_chip_with_pci_address_and_spaces_in_actions():
    t = parse_interrupts((INTERRUPTS_DIR / "openshift-nto" / "master.internal-interrupts").read_text())
    assert len(t.cpus) == 112 and len(t.rows) == 1881
    r = t.row("599")
    assert (r.chip, r.hwirq, r.trigger, r.actions) == ("IR-PCI-MSIX-0000:31:00.0", "1", "edge",
                                                        ("i40e-eno12399-TxRx-0",))
    assert t.row("124").actions == ("PCIe PME", "pciehp")
    assert t.row("0").chip == "IR-IO-APIC" and t.row("0").hwirq == "2" and t.row("0").counts[0] == 66
    assert t.row("ERR").counts == ()
    sno = parse_interrupts((INTERRUPTS_DIR / "openshift-nto" / "sno-interrupts").read_text())
    assert sno.row("73").chip == "PCI-MSIX-0000:00:01.0" and sno.row("73").hwirq == "1"
    assert sno.row("1").counts[7] == 9


def test_blank_line_inside_the_table():
    t = parse_interrupts((INTERRUPTS_DIR / "prometheus-procfs" / "interrupts").read_text())
    assert t.row("PIN") is not None and t.row("MIS").counts == ()
    assert t.row("25").hwirq == "114689" and t.row("25").chip == "PCI-MSI"


def test_offline_cpus_header_names_columns():
    text = "     CPU0  CPU1  CPU5\n 3:  1 2 3  IO-APIC 3-edge  x\nLOC: 4 5 6 Local timer\nERR: 7\n"
    t = parse_interrupts(text)
    assert t.cpus == (0, 1, 5)
    assert t.row("3").counts == (1, 2, 3) and t.row("LOC").total == 15 and t.row("ERR").total == 7


@pytest.mark.parametrize("text, line", [
    ("  CPU0 CPU1\n 1: 5 6 chip x\n 2: 7\n", 3),                  # truncated numbered row
    ("  CPU0 CPU1 CPU2\nLOC: 1 2 Local timer\n", 2),               # counts cut short, text after
    ("  CPU0 CPU1\n 1: 5 6 chip x\n 1: 5 6 chip x\n", 3),          # duplicate
    ("  CPU0 CPU1\nno colon here\n", 2),
    ("CPUx\n 1: 2\n", 1),
])
def test_bad_rows_name_the_line(text, line):
    with pytest.raises(ParseError) as e:
        parse_interrupts(text, what="f")
    assert e.value.line == line and str(e.value).startswith(f"f, line {line}")


def test_empty_is_an_error():
    with pytest.raises(ParseError):
        parse_interrupts("\n\n")


# -- hypothesis ------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("CPU0123456789 :\n\t-abcLOCERRIPIFQ,.\x0c\u00b2\u0663+_")),
               max_size=300))
def test_parsers_raise_only_parse_error(text):
    for fn in (parse_interrupts, parse_softirqs):
        try:
            fn(text)
        except ParseError:
            pass


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parsers_raise_only_parse_error_any_text(text):
    for fn in (parse_interrupts, parse_softirqs):
        try:
            fn("CPU0 CPU1\n" + text)
        except ParseError:
            pass


_label = st.one_of(st.integers(0, 5000).map(str),
                   st.from_regex(r"[A-Z][A-Z]{1,3}[0-9]?", fullmatch=True).filter(
                       lambda s: s not in ("ERR", "MIS", "BAD")))
_action = st.from_regex(r"[a-z][a-z0-9_]{0,8}(-[a-zA-Z0-9]{1,5}){0,3}", fullmatch=True)


@st.composite
def _tables(draw):
    cpus = tuple(sorted(draw(st.sets(st.integers(0, 300), min_size=1, max_size=12))))
    labels = draw(st.lists(_label, unique=True, max_size=15))
    rows = []
    for label in labels:
        counts = tuple(draw(st.lists(st.integers(0, 2**32 - 1), min_size=len(cpus), max_size=len(cpus))))
        if label.isdigit():
            chip = draw(st.sampled_from(["IO-APIC", "IR-PCI-MSIX-0000:3b:00.0", "GICv3", "PCI-MSI"]))
            hwirq = str(draw(st.integers(0, 600000)))
            actions = tuple(draw(st.lists(_action, min_size=1, max_size=3)))
            rows.append(InterruptRow(label, counts, sum(counts), chip, hwirq, "edge", actions,
                                     f"{chip} {hwirq}-edge {', '.join(actions)}"))
        else:
            desc = draw(st.sampled_from(["Local timer interrupts", "Rescheduling interrupts", ""]))
            rows.append(InterruptRow(label, counts, sum(counts), description=desc))
    if draw(st.booleans()):
        rows.append(InterruptRow("ERR", (), draw(st.integers(0, 10**6))))
    return InterruptTable(cpus, tuple(rows))


def _format_kernel(t: InterruptTable, new_style: bool) -> str:
    """kernel/irq/proc.c show_interrupts, both before and after v6.x's " %10u" change."""
    prec = 3
    out = [" " * (prec + 2) + "".join(f"CPU{c:<7d}" for c in t.cpus)]
    for r in t.rows:
        if not r.counts:
            out.append(f"{r.irq:>{prec}}: {r.total:10d}")
            continue
        cells = "".join(f" {c:10d}" for c in r.counts) if new_style else " " + "".join(f"{c:10d} " for c in r.counts)
        if r.numbered:
            tail = f" {r.chip:>8} {r.hwirq:>{prec}}-{r.trigger:<8}  {', '.join(r.actions)}"
        else:
            tail = f"   {r.description}"
        out.append(f"{r.irq:>{prec}}:{cells}{tail}")
    return "\n".join(out) + "\n"


@settings(max_examples=150, deadline=None)
@given(_tables(), st.booleans())
def test_round_trip_kernel_format(t, new_style):
    assert parse_interrupts(_format_kernel(t, new_style)) == t


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 10), min_size=1, max_size=8, unique=True),
       st.dictionaries(st.from_regex(r"[A-Z_]{2,8}", fullmatch=True), st.integers(0, 2**32), max_size=10))
def test_softirqs_round_trip(cpus, kinds):
    text = " " * 13 + "".join(f"CPU{c:<7d}" for c in cpus) + "\n"
    counts = {k: tuple(v + i for i in range(len(cpus))) for k, v in kinds.items()}
    for k, c in counts.items():
        text += f"{k:>12}:" + "".join(f" {x:10d}" for x in c) + "\n"
    t = parse_softirqs(text)
    assert t.cpus == tuple(cpus) and t.counts == counts


# -- softirqs ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", _softirq_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_softirqs_sample_parses(path):
    text = path.read_text()
    t = parse_softirqs(text, what=str(path))
    assert list(t.cpus) == _oracle_header(text)
    assert {"TIMER", "NET_RX", "SCHED", "RCU"} <= set(t.counts)
    assert all(len(c) == len(t.cpus) for c in t.counts.values())


def test_softirq_values():
    t = parse_softirqs((INTERRUPTS_DIR / "openshift-nto" / "sno-softirqs").read_text())
    assert t.counts["NET_RX"][:3] == (32599, 33088, 33079) and t.counts["NET_RX"][11] == 67542


def test_truncated_softirqs():
    with pytest.raises(ParseError) as e:
        parse_softirqs("  CPU0 CPU1\n  HI: 1 2\n  TIMER: 3\n")
    assert e.value.line == 3


# -- machines ------------------------------------------------------------------------------------------
def test_read_irqs_master_affinity_node_and_queues():
    root = SysRoot(extract("master.internal"))
    t = read_irqs(root)
    assert len(t.rows) == 1881 and len(t.info) == sum(1 for r in t.rows if r.numbered)
    files = extract("master.internal") / "proc" / "irq"
    for irq in ("0", "8", "599", "1201", "2015"):
        i = t.info[irq]
        assert i.requested == tuple(_cpulist((files / irq / "smp_affinity_list").read_text()))
        assert i.effective == tuple(_cpulist((files / irq / "effective_affinity_list").read_text()))
    assert t.info["599"].requested == (88,) and t.info["599"].node == 0
    dev = t.info["599"].device
    assert (dev.pci_address, dev.driver, dev.netdev, dev.queue) == ("0000:31:00.0", "i40e", "eno12399", "TxRx-0")
    assert t.info["2015"].device.netdev == "eno8303" and t.info["2015"].device.queue == "tx-0"
    assert t.info["144"].device.queue == "q0" and t.info["144"].device.pci_address == "0000:b1:00.0"
    assert t.info["1201"].device.queue == "AEQ"
    assert t.info["0"].device is None and t.info["0"].managed is None


def _cpulist(s: str) -> list[int]:
    out = []
    for piece in s.strip().split(","):
        if piece:
            a, _, b = piece.partition("-")
            out.extend(range(int(a), int(b or a) + 1))
    return out


def test_worker1_effective_affinity_against_isolcpus():
    root = extract("worker1.internal")
    assert "isolcpus=managed_irq,0-4,11-79" in (root / "proc" / "cmdline").read_text()
    t = read_irqs(SysRoot(root))
    # Values read off proc/irq/N by hand. The capture shows the RT worker's NIC queue 75 delivered
    # on housekeeping CPU 5, while rtc0 (a non-managed legacy IRQ) is effective on isolated CPU 28.
    assert t.info["599"].effective == (5,) and t.info["599"].device.queue == "TxRx-75"
    assert t.info["8"].requested == tuple(range(0, 80, 2)) and t.info["8"].effective == (28,)
    assert t.info["30"].requested == (30, 70) and t.info["30"].effective == (30,)
    assert t.info["24"].node is None            # node file holds -1
    assert t.info["253"].device.netdev == "eno1"


def test_a_device_found_from_msi_irqs_and_class_net(tmp_path):
    real = extract("2pa-pcidomain32bits")
    with pytest.raises(SysRootReadError) as e:
        read_irqs(SysRoot(real))
    assert str(e.value).endswith("proc/interrupts: missing")
    # The same tree with a /proc/interrupts row for the vector sysfs lists under the NIC's msi_irqs.
    copy_machine(real, tmp_path / "m")
    (tmp_path / "m" / "proc" / "interrupts").write_text("  CPU0\n 24: 7 PCI-MSI 49152-edge virtio0-input.0\n")
    i = read_irqs(SysRoot(tmp_path / "m")).info["24"]
    assert i.requested is None and i.effective is None     # this tree has no proc/irq
    assert (i.device.pci_address, i.device.driver, i.device.netdev) == ("0000:00:03.0", "virtio-pci", "ens3")


def test_unreadable_irq_folder_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "proc" / "irq" / "5").mkdir(parents=True)
    (tmp_path / "proc" / "interrupts").write_text("  CPU0\n  5: 1 IO-APIC 5-edge x\n")
    root = SysRoot(tmp_path)
    real = root.listdir

    def listdir(path):
        if path == root.irq_dir("5"):
            raise SysRootReadError(path, "permission denied; run as a user who may read it")
        return real(path)
    monkeypatch.setattr(root, "listdir", listdir)
    with pytest.raises(SysRootReadError) as e:
        read_irqs(root)
    assert "proc/irq/5" in str(e.value)


def test_action_names():
    a = parse_action_name("i40e-eno1-TxRx-3")
    assert (a.driver, a.netdev, a.queue) == ("i40e", "eno1", "TxRx-3")
    a = parse_action_name("eno3-TxRx-0", netdevs=frozenset({"eno3"}))
    assert (a.driver, a.netdev, a.queue) == (None, "eno3", "TxRx-0")
    assert parse_action_name("eth0-Tx-Rx-5").netdev == "eth0"
    assert parse_action_name("eth0-Tx-Rx-5").queue == "Tx-Rx-5"
    assert parse_action_name("enp1s0-rx-0").queue == "rx-0"
    assert (parse_action_name("nvme0q3").block, parse_action_name("nvme0q3").queue) == ("nvme0", "q3")
    assert parse_action_name("megasas0-msix5").queue == "msix5"
    a = parse_action_name("mlx5_comp3@pci:0000:3b:00.0")
    assert (a.queue, a.pci_address) == ("mlx5_comp3", "0000:3b:00.0")
    assert parse_action_name("ahci[0000:00:11.5]").pci_address == "0000:00:11.5"
    assert parse_action_name("timer") == type(a)()


def test_live_machine():
    t = read_irqs(SysRoot("/"))
    assert t.rows and t.cpus
    live = read_interrupts(SysRoot("/"))
    assert set(t.info) <= {r.irq for r in live.rows} | set(t.info)
    for irq, i in t.info.items():
        if i.requested is not None:
            assert set(i.requested) <= set(range(4096))
    assert read_softirqs(SysRoot("/")) is not None


def test_the_hwdb_is_asked_once_per_device_not_per_read(monkeypatch):
    """The window reads the IRQ table every few seconds; each read used to make a libudev context
    (pyudev finds libudev through ctypes.util.find_library, which runs `ldconfig -p`, a child
    process) and ask the hwdb for every device again."""
    pyudev = pytest.importorskip("pyudev")
    from app.machine import interrupts as mi
    from app.machine.interrupts import read_irqs
    from app.sysroot import SysRoot
    monkeypatch.setattr(mi, "_UDEV_CONTEXT", [])
    monkeypatch.setattr(mi, "_UDEV_MODELS", {})
    contexts, asked = [], []
    real_context, real_from_path = pyudev.Context, pyudev.Devices.from_path

    def context():
        contexts.append(1)
        return real_context()

    def from_path(ctx, path):
        asked.append(path)
        return real_from_path(ctx, path)
    monkeypatch.setattr(pyudev, "Context", context)
    monkeypatch.setattr(pyudev.Devices, "from_path", staticmethod(from_path))
    first = read_irqs(SysRoot("/"))
    n = len(asked)
    second = read_irqs(SysRoot("/"))
    assert len(asked) == n and len(contexts) <= 1
    assert len(set(asked)) == len(asked)
    assert [i.device for i in first.info.values()] == [i.device for i in second.info.values()]
    if any(i.device is not None and i.device.pci_address for i in first.info.values()):
        assert n > 0 and len(contexts) == 1          # this machine has PCI devices with IRQs


def test_refresh_affinities_reads_the_cpus_again_and_keeps_the_rest(tmp_path):

    from app.machine.interrupts import read_irqs, refresh_affinities
    from app.sysroot import SysRoot
    from tests.machines import extract
    # The table is read from the capture; what refresh_affinities reads again is the IRQ folders only
    # (it lists nothing, reads no device), so only those are copied to be changed, with the
    # proc/interrupts that makes a folder a SysRoot: 2,219 of the capture's 11,000 files.
    table = read_irqs(SysRoot(extract("worker1.internal")))
    copy = tmp_path / "worker1"
    copy_machine("worker1.internal", copy, only=("proc/irq", "proc/interrupts"))
    root = SysRoot(copy)
    irq = next(k for k, v in table.info.items() if v.requested and len(v.requested) > 1)
    (copy / "proc" / "irq" / irq / "smp_affinity_list").write_text("3\n")
    fresh = refresh_affinities(root, table)
    assert fresh.info[irq].requested == (3,)
    assert fresh.info[irq].device == table.info[irq].device and fresh.info[irq].node == table.info[irq].node
    assert all(fresh.info[k] is v for k, v in table.info.items() if k != irq)
    assert fresh.rows is table.rows


def _bump_first_count(text: str, label: str) -> str:
    """`text` with the first count of row `label` one higher, printed in the same width."""
    out = []
    for line in text.split("\n"):
        if line.split(":", 1)[0].strip() == label:
            head, rest = line.split(":", 1)
            m = re.match(r"(\s*)(\d+)", rest)
            n = str(int(m.group(2)) + 1)
            rest = (m.group(1)[:len(m.group(1)) - (len(n) - len(m.group(2)))] + n + rest[m.end():])
            line = head + ":" + rest
        out.append(line)
    return "\n".join(out)


@pytest.mark.parametrize("path", [p for p in _interrupt_files() if p.stat().st_size <= MEMO_MAX_BYTES],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_memo_gives_unchanged_lines_their_rows_and_parses_the_rest(path):
    """RowMemo (the sampler's, every tick): a parse with it equals one without; an unchanged line
    gives the very row of the parse before, a changed one a new row with the new count (in files up
    to MEMO_MAX_BYTES: the next test)."""
    text = path.read_text()
    memo = RowMemo()
    first = parse_interrupts(text, what=str(path), memo=memo)
    assert first == parse_interrupts(text, what=str(path))
    counted = next(r for r in first.rows if r.counts)
    later = _bump_first_count(text, counted.irq)
    second = parse_interrupts(later, what=str(path), memo=memo)
    assert second == parse_interrupts(later, what=str(path))
    for a, b in zip(first.rows, second.rows):
        if a.irq == counted.irq:
            assert b is not a and b.counts[0] == a.counts[0] + 1
        else:
            assert b is a


def test_a_memo_forgets_rows_when_the_header_changes_and_still_refuses_twins():
    memo = RowMemo()
    two = "           CPU0       CPU1\n 24:          5          7  PCI-MSI 1-edge  eth0\n"
    one = "           CPU0\n 24:          5          7  PCI-MSI 1-edge  eth0\n"
    assert parse_interrupts(two, memo=memo).rows[0].counts == (5, 7)
    # The same line under a one-CPU header is one count and an action, not the memo's two counts.
    assert parse_interrupts(one, memo=memo).rows[0].counts == (5,)
    twice = two + " 24:          5          7  PCI-MSI 1-edge  eth0\n"
    with pytest.raises(ParseError, match="appears twice"):
        parse_interrupts(twice, memo=memo)


def test_a_memo_keeps_no_lines_of_a_big_file():
    memo = RowMemo()
    line = " 24:" + "          1" * 2 + "  PCI-MSI 1-edge  eth0\n"
    rows = "".join(line.replace(" 24:", f" {n}:") for n in range(MEMO_MAX_BYTES // len(line) + 10))
    parse_interrupts("           CPU0       CPU1\n" + rows, memo=memo)
    assert memo.rows == {}
