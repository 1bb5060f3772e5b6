"""Idle-state residency and frequency per CPU (app/machine/cpuidle.py, app/machine/frequency.py,
app/sampling/cpu_power.py) and `coremap cpus` (issue 22).

Frequency: the hwloc captures that hold scaling_cur_freq (a hybrid Intel laptop, a 48-core AMD, an
NVIDIA DGX), read back against their own files. Idle states: none of the captured machines holds
cpuidle, and this VM has no cpuidle driver, so the idle tests build a cpuidle tree in the kernel's
layout (Documentation/ABI/testing/sysfs-devices-system-cpu: cpuN/cpuidle/stateK/{name,desc,latency,
residency,usage,time}) with intel_idle's Skylake table (drivers/idle/intel_idle.c skl_cstates: POLL 0,
C1 2, C1E 10, C3 70, C6 85 µs exit latency) and times that advance by known amounts: the oracle is the
arithmetic of those amounts. What this machine itself says is checked where it can be (its driver).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from app.machine.cpuidle import read_idle_layout, read_idle_sample
from app.machine.frequency import busy_mhz, read_frequency, read_msrs
from app.sampling.cpu_power import DEEP_SLEEP, CpuPower, PowerReader, idle_rates
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import extract

SKYLAKE = (("POLL", "CPUIDLE CORE POLL IDLE", 0, 0), ("C1", "MWAIT 0x00", 2, 2), ("C1E", "MWAIT 0x01", 10, 20),
           ("C3", "MWAIT 0x10", 70, 100), ("C6", "MWAIT 0x20", 85, 200))
HYBRID = "20em64t-hybrid-1p6c2t+2ca4co1t"


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def _tree(tmp_path: Path, cpus=2) -> Path:
    cpu = tmp_path / "sys" / "devices" / "system" / "cpu"
    (cpu / "cpuidle").mkdir(parents=True)
    (cpu / "cpuidle" / "current_driver").write_text("intel_idle\n")
    (cpu / "online").write_text(f"0-{cpus - 1}\n")
    for c in range(cpus):
        for k, (name, desc, latency, residency) in enumerate(SKYLAKE):
            d = cpu / f"cpu{c}" / "cpuidle" / f"state{k}"
            d.mkdir(parents=True)
            for f, v in (("name", name), ("desc", desc), ("latency", latency), ("residency", residency),
                         ("usage", 0), ("time", 0)):
                (d / f).write_text(f"{v}\n")
    return tmp_path


def _spend(root: Path, cpu: int, **us):
    """Add microseconds to states, as the kernel does when the CPU leaves them."""
    for k, (name, *_rest) in enumerate(SKYLAKE):
        if name in us:
            f = root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "cpuidle" / f"state{k}" / "time"
            f.write_text(f"{int(f.read_text()) + us[name]}\n")


def test_idle_shares_and_the_deep_share(tmp_path):
    root = SysRoot(_tree(tmp_path))
    layout = read_idle_layout(root, (0, 1))
    assert layout.driver == "intel_idle" and [s.name for s in layout.states[0]] == [n for n, *_ in SKYLAKE]
    assert [s.latency_us for s in layout.states[1]] == [0, 2, 10, 70, 85] and not layout.states[0][0].sleeps
    clock = Clock()
    before = read_idle_sample(root, layout, clock=clock)
    # one second: CPU 0 polls 0.1 s, C1 0.2 s, C6 0.6 s (busy 0.1 s); CPU 1 only in C1
    _spend(root.root, 0, POLL=100_000, C1=200_000, C6=600_000)
    _spend(root.root, 1, C1=900_000)
    clock.t += 1.0
    rates = idle_rates(layout, before, read_idle_sample(root, layout, clock=clock))
    zero, one = rates[0], rates[1]
    assert dict(zero.shares) == pytest.approx({"POLL": 0.1, "C1": 0.2, "C1E": 0.0, "C3": 0.0, "C6": 0.6})
    # deeper than the shallowest sleep (C1; POLL is a busy loop): C6 only
    assert zero.shallowest == "C1" and zero.deep_share == pytest.approx(0.6)
    assert one.deep_share == 0.0 and dict(one.shares)["C1"] == pytest.approx(0.9)
    power = CpuPower(1.0, rates)
    assert power.deep_sleepers([0, 1]) == [(0, pytest.approx(0.6))] and DEEP_SLEEP <= 0.6
    assert power.deep_sleepers([1]) == []


def test_a_sleep_counted_late_is_clamped(tmp_path):
    """`time` grows when the CPU leaves a state: a CPU asleep for 3 s shows it in the tick it woke."""
    root = SysRoot(_tree(tmp_path, cpus=1))
    layout = read_idle_layout(root, (0,))
    clock = Clock()
    before = read_idle_sample(root, layout, clock=clock)
    _spend(root.root, 0, C6=3_000_000)
    clock.t += 1.0
    (cpu0,) = idle_rates(layout, before, read_idle_sample(root, layout, clock=clock)).values()
    assert dict(cpu0.shares)["C6"] == 1.0 and cpu0.deep_share == 1.0


def test_the_power_reader_over_ticks(tmp_path):
    root = SysRoot(_tree(tmp_path))
    clock = Clock()
    reader = PowerReader(root, (0, 1), clock=clock, idle=True)
    first = reader.tick()
    assert first.idle == {} and first.idle_why == "idle shares need a second reading"
    _spend(root.root, 0, C3=250_000)
    clock.t += 0.5
    second = reader.tick()
    assert second.seconds == pytest.approx(0.5) and dict(second.idle[0].shares)["C3"] == pytest.approx(0.5)
    assert second.idle[0].deep_share == pytest.approx(0.5)
    # a capture's idle times never move between ticks: not read at all, and said why
    assert PowerReader(root, (0, 1), clock=clock).tick().idle_why == "a capture holds no cpuidle times"


@pytest.mark.parametrize("name", [HYBRID, "48amd64-4pa2n6c-sparse", "nvidia-dgx-gb10"])
def test_frequency_is_each_cpus_scaling_cur_freq(name):
    root = SysRoot(extract(name))
    state = Sampler(root).tick()
    want = {}
    for cpu in state.topology.online:
        f = root.cpu_dir(f"cpu{cpu}", "cpufreq", "scaling_cur_freq")
        if f.exists():
            want[cpu] = int(f.read_text().split()[0]) / 1000
    assert want and state.power.mhz == want and state.power.mhz_source == "scaling_cur_freq"
    assert read_frequency(root, state.topology.online).khz == {c: round(v * 1000) for c, v in want.items()}


def test_busy_mhz_and_msrs_where_there_are_none():
    # TSC 2.4 GHz over 2 s, APERF at 3/4 of MPERF: the CPU ran at 1.8 GHz while it ran
    assert busy_mhz((0, 0, 0), (4_800_000_000, 300, 400), 2.0) == pytest.approx(1800.0)
    assert busy_mhz((5, 5, 5), (5, 5, 5), 1.0) is None
    assert read_msrs(SysRoot(extract(HYBRID)), (0,)) == ({}, "a capture has no MSRs")


def test_this_machine_says_what_it_has():
    root = SysRoot("/")
    power = PowerReader(root, Sampler(root).topology.online).tick()
    driver = root.read_first_line(root.cpu_dir("cpuidle", "current_driver"))
    if driver in (None, "none"):
        assert "no cpuidle driver" in power.idle_why
    if not any(root.cpu_dir(f"cpu{c}", "cpufreq", "scaling_cur_freq").exists() for c in range(os.cpu_count())):
        assert power.mhz == {} and power.mhz_why


@pytest.mark.usefixtures("live_machine")
def test_cpus_command_json_and_text(capsys):
    from app.cli.main import main
    assert main(["cpus", "--seconds", "0.3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["rates"] and 0.25 < out["seconds"] < 5
    online = SysRoot("/").read_first_line(SysRoot("/").cpu_dir("online"))
    from app.parse.cpulist import parse_cpulist
    assert [r["cpu"] for r in out["cpus"]] == list(parse_cpulist(online))
    for r in out["cpus"]:
        assert r["irq_per_s"] >= 0 and r["softirq_per_s"] >= 0 and 0 <= r["busy_pct"] <= 100
    assert out["idle_why"] or out["idle_states"]
    assert main(["cpus", "--seconds", "0.2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("per CPU over ") and "IRQ/s" in text and "frequency: " in text


def test_cpus_command_on_a_capture(capsys):
    from app.cli.main import main
    root = extract(HYBRID)
    assert main(["cpus", "--root", str(root)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "one capture: no rates"
    first = SysRoot(root).cpu_dir("cpu0", "cpufreq", "scaling_cur_freq").read_text().split()[0]
    assert lines[2].split()[:5] == ["0", "-", "-", "-", f"{int(first) / 1000:,.0f}"]
    assert "idle states: a capture holds no cpuidle times" in lines and "frequency: scaling_cur_freq" in lines
