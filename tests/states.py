"""The first state of a fixture machine (tests/machines.py), read once per test process.

A capture's first tick reads every file of the machine: master.internal's 1,874 IRQ folders take about a
second, and the GUI and codec tests that only show, encode or compare that state read it again in each
test and each module (issue 31: shared set-up). MachineState is frozen, and so is everything it holds that
a test reads; a test that needs another state makes it with dataclasses.replace, and one that exercises the
sampler itself (its second tick, its intervals) builds its own Sampler."""
from __future__ import annotations

import functools

from app.sampling.machine_state import MachineState
from app.sampling.sampler import Sampler
from app.sysroot import SysRoot
from tests.machines import extract


@functools.cache
def first_state(name: str) -> MachineState:
    """What `Sampler(SysRoot(extract(name))).tick()` returns, read once per process and machine."""
    return Sampler(SysRoot(extract(name))).tick()
