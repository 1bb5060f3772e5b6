"""CpuDetailsWidget: the chosen CPU's position, and the IRQs, softirqs and threads on it."""
from __future__ import annotations

import os
import time

import pytest

from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.gui.test_tables import LiveStates, raw_interrupts
from tests.machines import extract
from widgets.cpu_details import TOP_ROWS, CpuDetailsWidget, cpu_irqs, cpu_threads

pytestmark = pytest.mark.qt_log_level_fail("WARNING")


@pytest.fixture(scope="module")
def master():
    root = extract("master.internal")
    return root, Sampler(SysRoot(root)).tick()


def test_irqs_landing_on_a_cpu_of_master(qtbot, master):
    root, state = master
    cpus, raw = raw_interrupts(root)
    cpu = 57                       # an online CPU of the second package: its column is not CPU 0's
    col = cpus.index(cpu)
    expected = sorted(((k, c[col]) for k, (c, _) in raw.items() if len(c) == len(cpus) and c[col]),
                      key=lambda kv: (-kv[1], kv[0]))
    assert expected, "CPU 57 took interrupts on master.internal"
    landed = cpu_irqs(state, cpu)
    assert [(x.key, int(x.value)) for x in landed] == expected
    assert not any(x.rate for x in landed)        # one capture: counts, never called rates

    widget = CpuDetailsWidget()
    qtbot.addWidget(widget)
    widget.set_state(state)
    assert widget.title_label.text() == "No CPU chosen"
    widget.set_cpu(cpu)
    assert widget.title_label.text() == f"CPU {cpu}"
    rows = widget.irq_table.texts()
    assert [r[0] for r in rows] == [k for k, _ in expected[:TOP_ROWS]]
    assert [r[2] for r in rows] == [f"{n:,}" for _, n in expected[:TOP_ROWS]]
    assert widget.irq_caption.text().startswith(f"IRQs landing here: {len(expected)}")
    assert "counts since boot" in widget.irq_caption.text()
    assert widget.irq_table.horizontalHeaderItem(2).text() == "Count"

    # Softirqs: the CPU's column of proc/softirqs, largest first.
    lines = (root / "proc" / "softirqs").read_text().splitlines()
    scol = [int(t[3:]) for t in lines[0].split()].index(cpu)
    soft = sorted(((ln.split()[0].rstrip(":"), int(ln.split()[1 + scol])) for ln in lines[1:] if ln.strip()),
                  key=lambda kv: (-kv[1], kv[0]))
    soft = [kv for kv in soft if kv[1]]
    assert [(r[1], r[2]) for r in widget.softirq_table.texts()] == [(k, f"{n:,}") for k, n in soft]

    # Position, from the fixture's own sysfs files.
    topo = root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
    package = (topo / "physical_package_id").read_text().strip()
    siblings = (topo / "thread_siblings_list").read_text().strip()
    text = widget.position_label.text()
    assert f"package {package}" in text and f"CPUs {siblings}" in text

    # Another CPU: the tables follow (and their items are reused, not rebuilt).
    first_item = widget.irq_table.item(0, 0)
    widget.set_cpu(0)
    assert widget.irq_table.item(0, 0) is first_item
    assert widget.irq_table.texts()[0][0] == sorted(
        ((k, c[cpus.index(0)]) for k, (c, _) in raw.items() if len(c) == len(cpus) and c[cpus.index(0)]),
        key=lambda kv: (-kv[1], kv[0]))[0][0]


def test_isolated_cpu_position_on_worker1(qtbot):
    root = extract("worker1.internal")     # booted with isolcpus=managed_irq,0-4,11-79 nohz_full=0-4,11-79
    state = Sampler(SysRoot(root)).tick()
    widget = CpuDetailsWidget()
    qtbot.addWidget(widget)
    widget.set_state(state)
    widget.set_cpu(3)
    # managed_irq without domain: not isolated from the scheduler, and its flags said (issue 30)
    assert "managed_irq, nohz_full" in widget.position_label.text()
    assert "isolated" not in widget.position_label.text()
    widget.set_cpu(7)
    assert "isolated" not in widget.position_label.text() and "nohz_full" not in widget.position_label.text()


def test_live_threads_and_rates_on_a_cpu(qtbot):
    sampler = LiveStates()
    sampler.tick()
    time.sleep(0.3)
    state = sampler.tick()
    me = state.sample.tasks.tasks[os.getpid()]
    cpu = state.rates.tasks[me.tid].last_cpu
    widget = CpuDetailsWidget()
    qtbot.addWidget(widget)
    widget.set_cpu(cpu)
    widget.set_state(state)
    threads = cpu_threads(state, cpu)
    assert str(me.tid) in [x.key for x in threads]
    tasks, rates = state.sample.tasks.tasks, state.rates.tasks
    # A thread born during the interval has no rate yet: its stat line's CPU counts.
    assert all((rates[int(x.key)].last_cpu if int(x.key) in rates else tasks[int(x.key)].last_cpu) == cpu
               for x in threads)
    assert {x.key for x in threads} == {str(t) for t, task in tasks.items()
                                        if (rates[t].last_cpu if t in rates else task.last_cpu) == cpu}
    pcts = [x.value for x in threads]
    assert pcts == sorted(pcts, reverse=True)
    shown = widget.thread_table.texts()
    assert len(shown) == min(len(threads), TOP_ROWS)
    # Rates now: the IRQ column is per second and matches the state's rates for that CPU.
    landed = cpu_irqs(state, cpu)
    assert all(x.rate for x in landed)
    col = state.rates.cpus.index(cpu)
    for x in landed:
        assert x.value == state.rates.irqs[x.key].per_cpu[col]
    assert "counts since boot" not in widget.irq_caption.text()
    assert widget.irq_table.horizontalHeaderItem(2).text() == "Rate (/s)"
