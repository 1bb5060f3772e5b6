"""irqbalance cooperation, live on this VM as root with a real irqbalance (Debian's package, started
here in the foreground with a 1 s pass and stopped at the end): an isolate tells it to leave the quiet
CPU alone and the give-back lifts that; a pin of an IRQ bans the IRQ so its next passes leave the pin
where it is, and undo lifts the ban. What irqbalance leaves alone is asked of irqbalance itself (its
socket's `setup`), where IRQs are is read in /proc; every IRQ's mask is put back at the end, since
irqbalance moves them all."""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.irqbalance_socket import IrqbalanceSetup, parse_setup, read_setup, socket_path
from app.pinning.journal import Journal
from app.pinning.service import AffinityService
from app.sysroot import SysRoot
from tests.live import cpulist, live_test, restore_quiet

IRQ = Path("/proc/irq")


def test_setup_answers_are_read():
    s = parse_setup(7, "SLEEP 10 IRQ 25 LOAD 0 DIFF 3 CLASS 0 IRQ 0 LOAD 1 DIFF 0 CLASS 2 BANNED 00000000,00000006")
    assert s == IrqbalanceSetup(7, 10, (1, 2), (0, 25))
    assert parse_setup(7, "SLEEP 1 BANNED 00000000").banned_cpus == ()
    for bad in ("", "stats", "SLEEP x BANNED 0", "SLEEP 10 BANNED zz"):
        with pytest.raises(Exception, match="irqbalance"):
            parse_setup(7, bad)


def _masks() -> dict[int, str]:
    out = {}
    for n in os.listdir(IRQ):
        if n.isdigit():
            try:
                out[int(n)] = (IRQ / n / "smp_affinity_list").read_text().strip()
            except OSError:
                continue
    return out


def _movable(masks: dict[int, str]) -> list[int]:
    """IRQs whose mask the kernel lets user space write (managed ones answer EIO)."""
    out = []
    for n, m in masks.items():
        try:
            (IRQ / str(n) / "smp_affinity_list").write_text(m + "\n")
        except OSError:
            continue
        out.append(n)
    return out


class _Passes:
    """irqbalance's passes as it runs them: with --debug it prints a line of dashes as each pass starts
    (irqbalance.c scan()), read here off its stdout as they come."""
    MARK = "-" * 20

    def __init__(self, proc: subprocess.Popen):
        self.started = 0
        self._seen = threading.Condition()
        self.reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self.reader.start()

    def _read(self, out) -> None:
        for line in out:
            if line.startswith(self.MARK):
                with self._seen:
                    self.started += 1
                    self._seen.notify_all()

    def wait(self, n: int) -> None:
        """Until irqbalance has run `n` whole passes that began after now (the pass under way when this
        is called may have begun before what the test just did), i.e. until pass n + 1 from now starts.
        This waits for the passes themselves, not for n intervals of sleep: a loaded machine slows them."""
        with self._seen:
            target = self.started + n + 1
            assert self._seen.wait_for(lambda: self.started >= target, timeout=30 + 5 * n), \
                f"irqbalance ran {self.started - target + n + 1} of {n + 1} passes in {30 + 5 * n} s"


@pytest.fixture
def irqbalance(tmp_path, monkeypatch):
    if shutil.which("irqbalance") is None:
        pytest.skip("irqbalance is not installed (.ci/run installs it)")
    if subprocess.run(["pgrep", "-x", "irqbalance"], capture_output=True).returncode == 0:
        pytest.skip("an irqbalance already runs here: the test does not take it over")
    monkeypatch.setenv("COREMAP_STATE_DIR", str(tmp_path / "state"))
    masks = _masks()
    Path("/run/irqbalance").mkdir(mode=0o755, exist_ok=True)
    # --debug: irqbalance says where each pass starts (_Passes), so the test waits for passes, not seconds;
    # stdbuf -oL: its stdio would hold the lines back in 4 KB blocks (a pipe is no terminal), seconds late
    proc = subprocess.Popen(["stdbuf", "-oL", "irqbalance", "--foreground", "--debug", "--interval=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    passes = _Passes(proc)
    svc = AffinityService(SysRoot("/"), Journal(tmp_path / "state" / "journal.jsonl"))
    try:
        sock = socket_path(svc.root, proc.pid)
        deadline = time.monotonic() + 10
        while not sock.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "irqbalance did not start"
            time.sleep(0.05)
        yield proc, svc, passes
    finally:
        restore_quiet(svc)
        svc.journal.close()
        proc.terminate()
        proc.wait(10)
        passes.reader.join(10)                  # it read to the end of irqbalance's output
        proc.stdout.close()
        for n, m in masks.items():              # irqbalance moved them: every one back as found
            try:
                (IRQ / str(n) / "smp_affinity_list").write_text(m + "\n")
            except OSError:
                pass                            # freed meanwhile, or managed


@live_test
def test_isolate_bans_the_quiet_cpu_and_a_pinned_irq_and_gives_both_back(irqbalance, capsys):
    proc, svc, passes = irqbalance
    root = svc.root
    before = read_setup(root, proc.pid)
    assert 1 not in before.banned_cpus
    assert main(["isolate", "--cpus", "1"]) == 0
    assert f"irqbalance (pid {proc.pid}) leaves CPU 1 alone" in capsys.readouterr().out
    now = read_setup(root, proc.pid)
    # irqbalance itself says so: it takes the ban in at its next pass, a rescan (it sets the banned CPUs
    # when it builds its tree, then sleeps a pass interval, then places every IRQ)
    assert 1 in now.banned_cpus

    # A pin of an IRQ onto the quiet CPU on purpose: irqbalance would move it off (CPU 1 is banned) unless
    # it leaves the IRQ alone. Pinned before the passes are waited for, so one rescan takes both bans in and
    # the same passes show both (waited for after each, the second wait was 3 of the test's 7 s).
    movable = _movable(_masks())
    irq = movable[-1]
    assert main(["pin", "--irq", str(irq), "--cpus", "1"]) == 0
    assert "may move IRQ" not in capsys.readouterr().out
    assert irq in read_setup(root, proc.pid).banned_irqs
    passes.wait(2)                               # the rescan that takes the bans in, and one more pass
    on_quiet = [n for n in movable if n != irq and 1 in cpulist((IRQ / str(n) / "smp_affinity_list").read_text())]
    assert on_quiet == [], f"irqbalance placed IRQs {on_quiet} on the quiet CPU"
    assert cpulist((IRQ / str(irq) / "smp_affinity_list").read_text()) == {1}, "irqbalance moved the pinned IRQ"

    assert main(["undo"]) == 0                   # the pin and its ban
    assert irq not in read_setup(root, proc.pid).banned_irqs
    assert main(["include", "--cpus", "1"]) == 0
    after = read_setup(root, proc.pid)
    assert after.banned_cpus == before.banned_cpus and after.banned_irqs == before.banned_irqs
    assert proc.poll() is None


@live_test
def test_an_undo_after_irqbalance_restarted_has_nothing_to_give_back(irqbalance, capsys):
    proc, svc, _ = irqbalance
    assert main(["isolate", "--cpus", "1"]) == 0
    proc.terminate()
    proc.wait(10)
    capsys.readouterr()
    assert main(["include", "--cpus", "1"]) == 0
    out = capsys.readouterr().out
    assert "irqbalance for CPU 1" in out and "not running" in out
