"""Performance Co-Pilot as a source: each host's pmcd through one pmproxy's REST API (PMWEBAPI(3)).

- `/pmapi/context?hostspec=H&polltimeout=S` opens a context on host H's pmcd (kept by pmproxy while it is
  used at least every S seconds; opened again when pmproxy forgot it);
- `/pmapi/_fetch?context=C&names=...` answers `{"timestamp": {"s", "us"}, "values": [{"name", "instances":
  [{"instance", "value"}]}]}`; `/pmapi/indom?context=C&name=M` names the instances (instance ids are pmcd's
  own). The compatible `_fetch`, not `fetch`: `fetch` writes its time as seconds "." nanoseconds with the
  nanoseconds unpadded (pmproxy 6.0's webapi.c `%I.%I`), so 0.022159340 s past a second reads as
  .22159340, up to a second late: one fetch in ten, and a rate between two fetches 0.5 s apart then had
  no interval (issue 31's flaky PCP test). `_fetch` writes seconds and microseconds apart.

Metrics (pmdalinux): `kernel.percpu.interrupts` (instances "IRQ::cpuN"; the agent names each column by the
CPU id of /proc/interrupts' header, so offline CPUs need no remapping here), `kernel.percpu.softirqs`
("KIND::cpuN"), `kernel.percpu.cpu.{user,nice,sys,idle,wait.total,irq.hard,irq.soft,steal}` (milliseconds,
"cpuN"), `hinv.map.cpu_node`, `hinv.cpu.model_name`, `kernel.uname.{nodename,release,machine}`. PCP names
no core or package of a CPU: the grid draws each CPU alone and says so. Rates are counted here between two
fetches, on pmcd's own timestamps, by app.sampling.rates (a counter that went down gives 0 and a note).
"""
from __future__ import annotations

import re
import threading
import time

from app.errors import CoremapError, excerpt
from app.sampling.machine_state import MachineState
from app.sampling.rates import rates
from app.parse.number import NumberError, parse_float
from app.sources.host import MAX_CPUS, Cleaner, CpuFacts, HostCounters, HostFacts, sample_of, topology_of
from app.sources.http import DEADLINE, TIMEOUT, JsonClient, SourceAuth, SourceError, host_budget

POLLTIMEOUT = 60
FETCH = "/pmapi/_fetch"         # seconds and microseconds apart (see above)
RATE_WAIT = 0.5
CPU_MODES = {"user": "kernel.percpu.cpu.user", "nice": "kernel.percpu.cpu.nice", "system": "kernel.percpu.cpu.sys",
             "idle": "kernel.percpu.cpu.idle", "iowait": "kernel.percpu.cpu.wait.total",
             "irq": "kernel.percpu.cpu.irq.hard", "softirq": "kernel.percpu.cpu.irq.soft",
             "steal": "kernel.percpu.cpu.steal"}
COUNTERS = ("kernel.percpu.interrupts", "kernel.percpu.softirqs", *CPU_MODES.values())
FACTS = ("hinv.map.cpu_node", "hinv.cpu.model_name", "kernel.uname.nodename", "kernel.uname.release",
         "kernel.uname.machine")
PER_CPU = frozenset((*CPU_MODES.values(), "hinv.map.cpu_node"))      # one instance per CPU
_CPU = re.compile(r"^cpu([0-9]{1,5})$")
_PAIR = re.compile(r"^([^:]{1,40})::cpu([0-9]{1,5})$")
_HOSTSPEC = re.compile(r"^[A-Za-z0-9_.:\[\]@,/-]{1,255}$")


MAX_TIME = 253402300799.0   # 9999-12-31T23:59:59Z: the latest time coremap writes or reads


def _timestamp(ts) -> float | None:
    """pmproxy's fetch time in seconds: a number, or older pmproxy's {"s": ..., "us": ...}; each part
    through the one number parser (a string or 1e308 there stopped coremap with a traceback, issue 32)."""
    try:
        if isinstance(ts, dict):
            s, us = ts.get("s", 0), ts.get("us", 0)
            if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (s, us)):
                return None
            return parse_float(repr(s), what="s", lo=0, hi=MAX_TIME) + parse_float(repr(us), what="us", lo=0, hi=1e6) / 1e6
        if isinstance(ts, (int, float)) and not isinstance(ts, bool):
            return parse_float(repr(ts), what="timestamp", lo=0, hi=MAX_TIME)
    except NumberError:
        return None
    return None


class Pmproxy:
    """One pmproxy; `host(hostspec)` reads a host's pmcd through it."""

    def __init__(self, url: str, *, auth: SourceAuth | None = None, timeout: float = TIMEOUT, deadline: float = DEADLINE):
        self.http = JsonClient(url, what="pmproxy", auth=auth, timeout=timeout, deadline=deadline)
        self.url = self.http.base

    def call(self, path: str, params: dict) -> dict:
        doc = self.http.get(path, params)
        if not isinstance(doc, dict) or not ("context" in doc or "success" in doc or "timestamp" in doc):
            raise SourceError(f"{self.url} answered JSON that is not pmproxy's REST API; give the address of a "
                              "pmproxy (http://server:44322)")
        if doc.get("success") is False:
            raise SourceError(f"pmproxy at {self.url}: {excerpt(str(doc.get('message', 'refused')), 160)}")
        return doc

    def host(self, hostspec: str) -> "PcpHost":
        if not _HOSTSPEC.match(hostspec):
            raise SourceError(f"PCP host {excerpt(hostspec, 60)}: give a pmcd hostspec such as node7 or node7:44321")
        return PcpHost(self, hostspec)


class PcpHost:
    """One host's pmcd: its facts (once), its counters (each call), its states (rates between two calls)."""

    def __init__(self, proxy: Pmproxy, hostspec: str):
        self.proxy, self.hostspec = proxy, hostspec
        self._context: int | None = None
        self._names: dict[str, dict[int, str]] = {}
        self._facts: HostFacts | None = None
        self._topology = None
        self._last = None
        self._lock = threading.Lock()

    def _ctx(self) -> int:
        if self._context is None:
            doc = self.proxy.call("/pmapi/context", {"hostspec": self.hostspec, "polltimeout": POLLTIMEOUT})
            ctx = doc.get("context")
            if not isinstance(ctx, int):
                raise SourceError(f"pmproxy at {self.proxy.url} opened no context for {self.hostspec}")
            self._context = ctx
        return self._context

    def _fetch(self, names) -> tuple[float, dict[str, list]]:
        params = {"names": ",".join(names)}
        try:
            doc = self.proxy.call(FETCH, {"context": self._ctx(), **params})
        except SourceError as e:
            if "context" not in str(e).lower():
                raise
            self._context = None        # pmproxy forgot it (polltimeout passed): open it again, once
            self._names.clear()
            doc = self.proxy.call(FETCH, {"context": self._ctx(), **params})
        ts = _timestamp(doc.get("timestamp"))
        if ts is None:
            raise SourceError(f"pmproxy at {self.proxy.url} sent a fetch without a valid timestamp for "
                              f"{self.hostspec} (seconds since 1970, a number)")
        out: dict[str, list] = {}
        for v in doc.get("values") or []:
            if isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("instances"), list):
                if v["name"] in PER_CPU and len(v["instances"]) > MAX_CPUS:
                    # A capture past its CPU bound is refused at once; so is a pmcd (issue 32: 43 s, 1.2 GB).
                    raise SourceError(f"{self.hostspec}: pmcd names {len(v['instances']):,} CPUs in {v['name']}, "
                                      f"more than coremap draws ({MAX_CPUS:,}); check that host's pmdalinux")
                out[v["name"]] = v["instances"][:100_000]
        return ts, out

    def _instance_names(self, metric: str, ids) -> dict[int, str]:
        known = self._names.get(metric, {})
        if any(i not in known for i in ids):
            doc = self.proxy.call("/pmapi/indom", {"context": self._ctx(), "name": metric})
            known = {d["instance"]: str(d["name"])[:64] for d in (doc.get("instances") or [])[:100_000]
                     if isinstance(d, dict) and isinstance(d.get("instance"), int) and isinstance(d.get("name"), str)}
            self._names[metric] = known
        return known

    def _per_instance(self, values: dict, metric: str, cleaner: Cleaner) -> dict[str, float]:
        rows = values.get(metric) or []
        names = self._instance_names(metric, [r.get("instance") for r in rows if isinstance(r, dict)])
        out = {}
        for r in rows:
            if not isinstance(r, dict):
                continue
            name = names.get(r.get("instance"))
            v = cleaner.value(r.get("value"))
            if name is not None and v is not None:
                out[name] = v
        return out

    def facts(self) -> HostFacts:
        if self._facts is not None:
            return self._facts
        cl = Cleaner(self.hostspec)
        _ts, values = self._fetch(FACTS)

        def one(metric):
            rows = values.get(metric) or []
            v = rows[0].get("value") if rows and isinstance(rows[0], dict) else None
            return str(v)[:120] if isinstance(v, (str, int)) and str(v) else None
        nodes = {}
        for name, v in self._per_instance(values, "hinv.map.cpu_node", cl).items():
            m = _CPU.match(name)
            cpu = cl.cpu(m.group(1)) if m else None
            if cpu is not None and v < MAX_CPUS:
                nodes[cpu] = int(v)
        models = values.get("hinv.cpu.model_name") or []
        model = next((str(r["value"])[:120] for r in models if isinstance(r, dict) and isinstance(r.get("value"), str)), None)
        self._facts = HostFacts(self.hostspec, one("kernel.uname.nodename"), model, one("kernel.uname.release"),
                                one("kernel.uname.machine"), tuple(CpuFacts(c, node=n) for c, n in sorted(nodes.items())))
        return self._facts

    def counters(self) -> tuple[HostCounters, Cleaner]:
        cl = Cleaner(self.hostspec)
        ts, values = self._fetch(COUNTERS)
        irqs: dict = {}
        for name, v in self._per_instance(values, "kernel.percpu.interrupts", cl).items():
            m = _PAIR.match(name)
            cpu = cl.cpu(m.group(2)) if m else None
            if cpu is not None:
                irqs.setdefault(m.group(1), ("", {}))[1][cpu] = v
        soft: dict = {}
        for name, v in self._per_instance(values, "kernel.percpu.softirqs", cl).items():
            m = _PAIR.match(name)
            cpu = cl.cpu(m.group(2)) if m else None
            if cpu is not None:
                soft.setdefault(m.group(1), {})[cpu] = v
        secs: dict = {}
        for mode, metric in CPU_MODES.items():
            for name, v in self._per_instance(values, metric, cl).items():
                m = _CPU.match(name)
                cpu = cl.cpu(m.group(1)) if m else None
                if cpu is not None:
                    secs.setdefault(cpu, {})[mode] = v / 1000.0     # milliseconds
        cpus = tuple(sorted(secs))
        if not cpus:
            raise SourceError(f"{self.hostspec}: pmcd answered no kernel.percpu.cpu values; is pmdalinux installed "
                              "there?")
        return HostCounters(ts, cpus, irqs, soft, secs), cl

    def state(self, generation: int) -> MachineState:
        """The next state; the first call reads twice, RATE_WAIT apart, so it has rates. Every request
        for it shares one deadline (the client's): a slow pmproxy costs a host --timeout, not that for
        each of its requests."""
        with self._lock, host_budget(self.proxy.http.deadline):
            facts = self.facts()
            if self._last is None:
                first, _ = self.counters()
                self._last = sample_of(first)
                time.sleep(RATE_WAIT)
            counters, cl = self.counters()
            sample = sample_of(counters)
            if self._topology is None or set(self._topology.online) != set(counters.cpus):
                known = {c.cpu: c for c in facts.cpus}
                self._topology = topology_of(HostFacts(
                    facts.host, facts.hostname, facts.model, facts.kernel, facts.arch,
                    tuple(known.get(c, CpuFacts(c)) for c in counters.cpus)))
            why = ""
            try:
                r = rates(self._last, sample) if sample.time > self._last.time else None
            except CoremapError as e:
                r, why = None, str(e)
            if r is None and not why:
                why = f"{self.hostspec}: pmcd's clock did not move between two reads; totals shown"
            self._last = sample
            notes = tuple(n for n in (cl.note(), why) if n) + tuple(r.resets[:3] if r is not None else ())
            return MachineState(generation, self._topology, sample, r, source=f"pcp {self.proxy.url}",
                                notes=notes, host=self.hostspec)
