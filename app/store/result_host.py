"""Was a stored probe result measured on the machine a report or an export is about? The one check
every door uses: `coremap report --probe`, `coremap export --jitter`, and the window's report
(app/store/report.py report_from_root), so the three can never disagree (issue 30, wrong answer 2:
`report --root worker1 --probe j.json` printed a 2-vCPU VM's jitter under an 80-CPU Xeon).

What a door does with the answer, and why:
- measured elsewhere: the CLI refuses it, in one line naming both machines, unless --any-host is
  given. A figure under the wrong machine's heading is a wrong answer that looks right, and a
  Prometheus series (export) carries no heading at all: it would be scraped as this node's. With
  --any-host (a deliberate comparison) the report shows the run under its own machine's name, and
  the window's report, which has no such option and never stops with a dialog, does the same.
- host unknown (a result stored before coremap recorded its host, tests/fixtures/results): included,
  with a note saying so; refusing every older result would lose them all for a fact they never held.

Two records name the same machine when their machine ids agree. Without both ids, nothing that both
know may differ: the host name (its first label: "worker1" is "worker1.internal"), then the CPU model;
the kernel release, which a reboot changes, decides only when neither the id nor the host name
says the machine is the same one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from app.format import printable
from app.machine.identity import HostIdentity, machine_id_of

SAME, OTHER, UNKNOWN = "same", "other", "unknown"
ANY_HOST_HINT = "pass --any-host to include it anyway"


def result_identity(result: dict) -> HostIdentity | None:
    """The machine a stored result says it was measured on; None when it does not say (no host
    name and no machine id: a result stored before coremap recorded them)."""
    host = result.get("host")
    if not isinstance(host, dict):
        return None

    def text(key: str) -> str | None:
        v = host.get(key)
        return printable(v.strip()) if isinstance(v, str) and v.strip() else None

    hostname, mid = text("hostname"), machine_id_of(host.get("machine_id") if isinstance(host.get("machine_id"), str)
                                                    else None)
    if hostname is None and mid is None:
        return None
    return HostIdentity(hostname or f"machine {mid[:8]}", hostname, mid, text("kernel"), text("cpu_model"))


@dataclass(frozen=True)
class HostCheck:
    """A result's machine against the one it is reported with: `kind` SAME, OTHER or UNKNOWN."""
    kind: str
    machine: HostIdentity
    measured: HostIdentity | None

    def refusal(self, what: str, instead: str = "report it with that machine's --root or --session") -> str:
        """The one line a door refuses `what` with (kind OTHER); `instead`: what to do rather."""
        return (f"{what} was measured on {describe(self.measured)}, not on {describe(self.machine)}; "
                f"{instead}, or {ANY_HOST_HINT}")

    def note(self, what: str = "") -> str:
        """What a report says of the run ("" when it was measured here, under the same kernel)."""
        lead = f"{what}: " if what else ""
        if self.kind == UNKNOWN:
            return (f"{lead}host unknown: the result does not say which machine it was measured on "
                    "(stored before coremap recorded it)")
        if self.kind == OTHER:
            return f"{lead}measured on {describe(self.measured)}, not on {describe(self.machine)}"
        then, now = self.measured.kernel, self.machine.kernel
        if then and now and then != now:
            return f"{lead}measured on this machine under kernel {then} (now {now})"
        return ""


def check_host(result: dict, machine: HostIdentity) -> HostCheck:
    """Where `result` was measured, against `machine` (app/machine/identity.py read_identity)."""
    m = result_identity(result)
    if m is None:
        return HostCheck(UNKNOWN, machine, None)
    return HostCheck(SAME if _same(m, machine) else OTHER, machine, m)


def _same(a: HostIdentity, b: HostIdentity) -> bool:
    if a.machine_id and b.machine_id:
        return a.machine_id == b.machine_id
    if a.hostname and b.hostname and _short(a.hostname) != _short(b.hostname):
        return False
    if a.cpu_model and b.cpu_model and " ".join(a.cpu_model.split()) != " ".join(b.cpu_model.split()):
        return False
    named_alike = bool(a.hostname and b.hostname)
    return named_alike or not (a.kernel and b.kernel and a.kernel != b.kernel)


def _short(hostname: str) -> str:
    return hostname.split(".", 1)[0].casefold()


def describe(m: HostIdentity) -> str:
    """"vm (Xeon, 6.18.44)": the machine's name, then its CPU model and kernel where known."""
    facts = [x for x in (short_model(m.cpu_model), m.kernel) if x]
    return f"{m.name} ({', '.join(facts)})" if facts else m.name


_MARKS = re.compile(r"\((?:R|TM|r|tm)\)")
_CLOCK = re.compile(r"\s+(?:CPU\s+)?@\s*\S+\s*$")                  # " CPU @ 2.10GHz"
_WORDS = re.compile(r"\b(?:Intel|AMD|CPU|Processor)\b")


def short_model(model: str | None) -> str:
    """A CPU model as a person names it: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz" is "Xeon Gold
    6230", "AMD EPYC 7B13 64-Core Processor" is "EPYC 7B13 64-Core"; the whole name where that
    leaves too little to tell."""
    if not model:
        return ""
    clean = " ".join(_CLOCK.sub("", _MARKS.sub("", model)).split())
    short = " ".join(_WORDS.sub("", clean).split())
    return short if len(short) >= 4 else clean
