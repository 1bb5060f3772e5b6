"""Prometheus (with node_exporter) as a source: the fleet from its HTTP API, and one host live or at a past time.

Series read (node_exporter; https://github.com/prometheus/node_exporter collector/):
- `node_interrupts_total{cpu,type,info,devices}` (--collector.interrupts). Its `cpu` label is the COLUMN
  INDEX in /proc/interrupts (interrupts_linux.go numbers the columns), and that file lists online CPUs
  only (kernel/irq/proc.c, for_each_online_cpu): with CPUs offline, column i is the i-th online CPU, not
  CPU i. `remap_columns` maps it back with the online CPUs of node_cpu_seconds_total, whose `cpu` label is
  the id /proc/stat prints ("cpu7").
- `node_softirqs_functions_total{cpu,type}` (--collector.softirqs, node_exporter >= 1.6): /proc/softirqs
  lists every POSSIBLE CPU (fs/proc/softirqs.c), so there the column index is the CPU id. Older exporters
  have only machine totals: per-CPU softirq counts are then absent (a note says so).
- `node_cpu_seconds_total{cpu,mode}`: the online CPUs, and irq/softirq/busy time.
- `node_cpu_info{cpu,package,core,model_name}` (--collector.cpu.info): the topology; without it every CPU
  is drawn alone (app/sources/host.py topology_of). `node_cpu_isolated{cpu}` where the exporter has it;
  `node_uname_info{nodename,release,machine}`.
- What coremap itself exported (export.py): `coremap_cpu_quiet{cpu}`, `coremap_jitter_gaps_per_second{cpu}`.

Rates are Prometheus' own `irate` over the last two scrapes (counter resets handled there). A fleet is read
in batches of hosts (`instance=~"a|b|..."`), the first ones small, so the first tiles show while later
batches are still being answered. Every answer is bounded (http.py) and at most MAX_SERIES series.
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from dataclasses import replace
from collections.abc import Iterator

from app.errors import excerpt
from app.format import format_rate
from app.sampling.machine_state import MachineState
from app.sources.host import (Cleaner, CpuFacts, HostCounters, HostFacts, RateFigures, rates_of, sample_of,
                              topology_of)
from app.sources.http import DEADLINE, TIMEOUT, Budget, JsonClient, SourceAuth, SourceError, host_budget
from app.sources.rows import failed_row, source_row

MAX_SERIES = 200_000        # one answer of a batch of up to 200 hosts
MAX_HOST_SERIES = 65_535    # one host's IRQ rows by CPU: the bound a capture's CPUs have
WINDOW = "1m"               # irate's look-back: two scrapes of any interval up to 30 s
FACT_NAMES = "node_cpu_info|node_uname_info|node_cpu_isolated|coremap_cpu_quiet|coremap_jitter_gaps_per_second"
_MATCH = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*'
                    r'(,\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*)*$')


def remap_columns(per_column: dict[int, float], online: tuple[int, ...], cleaner: Cleaner | None = None) -> dict[int, float]:
    """node_interrupts_total's column index -> CPU id (module docstring); a column past the online CPUs
    (the host's CPUs changed between the two reads) is dropped and counted by `cleaner`."""
    out = {}
    for col, v in per_column.items():
        if 0 <= col < len(online):
            out[online[col]] = out.get(online[col], 0.0) + v
        elif cleaner is not None:
            cleaner.bad += 1
    return out


def _re_quote(text: str) -> str:
    """`text` as an RE2 literal inside a PromQL double-quoted string."""
    lit = re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)
    return lit.replace("\\", "\\\\").replace('"', '\\"')


def _str_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


class Prometheus:
    """One Prometheus server. `match`: label matchers every series must have (`job="node"`)."""

    def __init__(self, url: str, *, match: str = "", auth: SourceAuth | None = None, timeout: float = TIMEOUT,
                 deadline: float = DEADLINE, window: str = WINDOW, max_series: int = MAX_SERIES):
        if match and not _MATCH.match(match):
            raise SourceError(f"--match {excerpt(match, 60)}: give label matchers such as job=\"node\" or "
                              "job=\"node\",env=~\"prod.*\"")
        if not re.fullmatch(r"[0-9]+[smh]", window):
            raise SourceError(f"window {excerpt(window)}: give a Prometheus duration such as 30s or 1m")
        self.http = JsonClient(url, what="Prometheus server", auth=auth, timeout=timeout, deadline=deadline)
        self._opening: Budget | None = None      # check()'s, spent on by the first rows() (see check)
        self.url = self.http.base
        self.match, self.window, self.max_series = match.strip(), window, max_series
        self._facts: dict[str, tuple[HostFacts, bool, dict]] = {}

    # -- the HTTP API ------------------------------------------------------------------------------------
    def _data(self, doc, expect: str, most: int | None = None):
        most = self.max_series if most is None else most
        if not isinstance(doc, dict) or doc.get("status") not in ("success", "error"):
            raise SourceError(f"{self.url} answered JSON that is not Prometheus' HTTP API; give the address of a "
                              "Prometheus server (http://server:9090)")
        if doc["status"] == "error":
            raise SourceError(f"Prometheus at {self.url} refused the query: {excerpt(str(doc.get('error')), 160)}")
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != expect or not isinstance(data.get("result"), list):
            raise SourceError(f"Prometheus at {self.url} answered a {excerpt(str(data)[:40])} where a {expect} was asked")
        if len(data["result"]) > most:
            raise SourceError(f"Prometheus at {self.url} answered {len(data['result']):,} series, more than coremap "
                              f"reads at once ({most:,}); narrow it with --match")
        return data["result"]

    def check(self) -> str:
        """The server's version; SourceError when the URL is not a Prometheus server."""
        with host_budget(self.http.deadline) as opening:
            doc = self.http.get("/api/v1/status/buildinfo")
        # The check, the list of hosts and the first batch share one --timeout: each had its own, so a slow
        # server's first rows came after three times the time the user gave (issue 32).
        self._opening = opening
        if not isinstance(doc, dict) or doc.get("status") != "success" or not isinstance(doc.get("data"), dict):
            raise SourceError(f"{self.url} is not a Prometheus server (no /api/v1/status/buildinfo); give the "
                              "address of Prometheus' HTTP API, e.g. http://server:9090")
        return str(doc["data"].get("version", "?"))[:40]

    def query(self, expr: str, at: float | None = None, most: int | None = None) -> list[tuple[dict, object]]:
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        out = []
        for s in self._data(self.http.post("/api/v1/query", params), "vector", most):
            if isinstance(s, dict) and isinstance(s.get("metric"), dict) and isinstance(s.get("value"), list) \
                    and len(s["value"]) == 2:
                out.append((s["metric"], s["value"][1]))
        return out

    def _sel(self, instances: list[str] | None = None, extra: str = "") -> str:
        parts = [p for p in (self.match, extra) if p]
        if instances is not None:
            parts.append('instance=~"' + "|".join(_re_quote(i) for i in instances) + '"')
        return "{" + ",".join(parts) + "}"

    # -- hosts -------------------------------------------------------------------------------------------
    def instances(self, at: float | None = None) -> dict[str, float]:
        """instance -> the time of its last scrape, for every host with node_cpu_seconds_total or
        node_cpu_info (an exporter without the stat collector still names its CPUs by the latter)."""
        idle, info = self._sel(extra='mode="idle"'), self._sel()
        rows = self.query(f"max by (instance) (timestamp(node_cpu_seconds_total{idle}) or "
                          f"timestamp(node_cpu_info{info}))", at)
        out = {}
        for labels, v in rows:
            inst = labels.get("instance")
            try:
                out[str(inst)[:200]] = float(v)
            except (TypeError, ValueError):
                continue
        return out

    def read_batch(self, instances: list[str], at: float | None = None, *, going_on: Budget | None = None) -> list:
        """FleetRows of these hosts, one round of queries for them all; a host none of whose series came
        back is a row that says so. `going_on`: the opening's Budget (check), when this is the first batch."""
        with host_budget(self.http.deadline, going_on=going_on):
            return self._read_batch(instances, at)

    def _read_batch(self, instances: list[str], at: float | None) -> list:
        t0 = time.monotonic()
        sel = self._sel(instances)
        w = self.window
        got = _Batch(self, instances, at)
        got.facts(self.query(self._sel(instances, extra=f'__name__=~"{FACT_NAMES}"'), at))
        got.modes(self.query(f"sum by (instance, cpu, mode) (irate(node_cpu_seconds_total{sel}[{w}]))", at))
        got.irqs(self.query(f"sum by (instance, cpu) (irate(node_interrupts_total{sel}[{w}]))", at))
        got.softirqs(self.query(f"sum by (instance, cpu, type) (irate(node_softirqs_functions_total{sel}[{w}]))", at))
        got.top(self.query(f"topk by (instance) (1, sum by (instance, type, info, devices) "
                           f"(irate(node_interrupts_total{sel}[{w}])))", at))
        return got.rows(time.monotonic() - t0)

    def rows(self, at: float | None = None, *, only: list[str] | None = None, first: int = 25,
             most: int = 200) -> Iterator[list]:
        """Every host's row (or those `only` names), batch by batch (growing from `first` to `most` hosts),
        as each batch is answered. A host named in `only` that Prometheus does not know is a row saying so."""
        opening, self._opening = self._opening, None
        if opening is not None and opening.left() <= 0:
            opening = None      # rows asked for long after the check (a window opened later): a time of their own
        with host_budget(self.http.deadline, going_on=opening):
            known = self.instances(at)
        hosts = sorted(known) if only is None else [h for h in only if h in known]
        if only is not None:
            missing = [h for h in only if h not in known]
            if missing:
                yield [failed_row(h, f"{h}: Prometheus at {self.url} has no node_cpu_seconds_total with "
                                     f"instance=\"{h}\"" + (f" and {self.match}" if self.match else ""))
                       for h in missing]
            if not hosts:
                return
        if not hosts:
            raise SourceError(f"Prometheus at {self.url} has no host with node_cpu_seconds_total"
                              + (f" matching {self.match}" if self.match else "")
                              + "; check that it scrapes node_exporter")
        i, size = 0, first
        while i < len(hosts):
            yield self.read_batch(hosts[i:i + size], at, going_on=opening if i == 0 else None)
            i += size
            size = min(most, size * 2)

    def host_state(self, instance: str, generation: int, at: float | None = None) -> MachineState:
        """One host in full (every IRQ row), as the window draws it: its requests share one deadline, and
        at most MAX_HOST_SERIES series (a capture's CPU bound; 200,000 took the window 100 s and 2.2 GB)."""
        with host_budget(self.http.deadline):
            return self._host_state(instance, generation, at)

    def _host_state(self, instance: str, generation: int, at: float | None) -> MachineState:
        row = self.read_batch([instance], at)[0]
        if not row.ok:
            raise SourceError(row.error)
        sel = self._sel(extra=f'instance="{_str_quote(instance)}"')
        cleaner = Cleaner(instance)
        online = row.state.rates.cpus
        per_irq: dict = defaultdict(dict)
        desc: dict = {}
        for labels, v in self.query(f"irate(node_interrupts_total{sel}[{self.window}])", at, MAX_HOST_SERIES):
            col, val = cleaner.cpu(labels.get("cpu")), cleaner.value(v)
            if col is None or val is None:
                continue
            irq = str(labels.get("type", "?"))[:40]
            desc[irq] = " ".join(str(labels.get(k, "")) for k in ("info", "devices")).strip()[:200]
            per_irq[irq][col] = val
        counts: dict = defaultdict(dict)
        for labels, v in self.query(f"node_interrupts_total{sel}", at, MAX_HOST_SERIES):
            col, val = cleaner.cpu(labels.get("cpu")), cleaner.value(v)
            if col is not None and val is not None:
                counts[str(labels.get("type", "?"))[:40]][col] = val
        irqs = {irq: (desc.get(irq, ""), remap_columns(per, online, cleaner)) for irq, per in per_irq.items()}
        rates = row.state.rates
        fig = RateFigures(rates.seconds, online, {c: r.irq_per_s for c, r in rates.per_cpu.items()}, irqs)
        full = rates_of(fig)
        rates = replace(rates, irqs=full.irqs)
        sample = sample_of(HostCounters(at or time.time(), online,
                                        {irq: (desc.get(irq, ""), remap_columns(per, online)) for irq, per in counts.items()}))
        notes = row.state.notes + ((cleaner.note(),) if cleaner.bad else ())
        return MachineState(generation, row.state.topology, sample, rates, live=at is None,
                            source=f"prometheus {self.url}", notes=notes, host=instance)


class _Batch:
    """The answers of one batch's queries, gathered per host, then made into rows."""

    def __init__(self, prom: Prometheus, instances: list[str], at: float | None):
        self.prom, self.at = prom, at
        self.hosts = {i: {"cpu_info": {}, "uname": {}, "isolated": set(), "quiet": set(), "gaps": {},
                          "modes": defaultdict(dict), "irq": {}, "soft": defaultdict(dict), "top": None,
                          "iso_known": False}
                      for i in instances}
        self.cleaners = {i: Cleaner(i) for i in instances}

    def _each(self, rows):
        for labels, v in rows:
            inst = labels.get("instance")
            if inst in self.hosts:
                yield self.hosts[inst], self.cleaners[inst], labels, v

    def facts(self, rows) -> None:
        for h, cl, labels, v in self._each(rows):
            name = labels.get("__name__")
            if name == "node_uname_info":
                h["uname"] = labels
                continue
            cpu = cl.cpu(labels.get("cpu"))
            if cpu is None:
                continue
            if name == "node_cpu_info":
                h["cpu_info"][cpu] = labels
            elif name == "node_cpu_isolated":
                h["iso_known"] = True
                if cl.value(v):
                    h["isolated"].add(cpu)
            elif name == "coremap_cpu_quiet":
                if cl.value(v):
                    h["quiet"].add(cpu)
            elif name == "coremap_jitter_gaps_per_second":
                val = cl.value(v)
                if val is not None:
                    h["gaps"][cpu] = val

    def modes(self, rows) -> None:
        for h, cl, labels, v in self._each(rows):
            cpu, val = cl.cpu(labels.get("cpu")), cl.value(v)
            if cpu is not None and val is not None:
                h["modes"][cpu][str(labels.get("mode"))] = val

    def irqs(self, rows) -> None:
        for h, cl, labels, v in self._each(rows):
            col, val = cl.cpu(labels.get("cpu")), cl.value(v)
            if col is not None and val is not None:
                h["irq"][col] = val

    def softirqs(self, rows) -> None:
        for h, cl, labels, v in self._each(rows):
            cpu, val = cl.cpu(labels.get("cpu")), cl.value(v)
            if cpu is not None and val is not None:
                h["soft"][str(labels.get("type", "?")).upper()[:20]][cpu] = val

    def top(self, rows) -> None:
        for h, cl, labels, v in self._each(rows):
            val = cl.value(v)
            if val:
                name = " ".join(str(labels.get(k, "")) for k in ("info", "devices")).strip()
                h["top"] = f"{labels.get('type', '?')}" + (f" ({name[:80]})" if name else "") + f" {format_rate(val)}"

    def rows(self, seconds: float) -> list:
        out = []
        for inst, h in self.hosts.items():
            cl = self.cleaners[inst]
            notes: list[str] = []
            # The online CPUs: /proc/stat's (node_cpu_seconds_total), else /proc/cpuinfo's (node_cpu_info).
            online = tuple(sorted(h["modes"] or h["cpu_info"]))
            if not online:
                out.append(failed_row(inst, f"{inst}: Prometheus has no recent node_cpu_seconds_total or node_cpu_info "
                                            "for it (the target is down, or scraped too rarely for a rate)",
                                      seconds=seconds))
                continue
            facts = self._facts(inst, h, online)
            notes.extend(facts.notes)
            if not h["modes"]:
                notes.append("no node_cpu_seconds_total (the cpu collector): IRQ time and busy absent")
            if not h["irq"]:
                notes.append("no node_interrupts_total: start node_exporter with --collector.interrupts")
            if not h["soft"]:
                notes.append("no per-CPU softirqs (node_softirqs_functions_total, node_exporter >= 1.6 with "
                             "--collector.softirqs): softirq time only")
            irq = remap_columns(h["irq"], online, cl)
            fig = RateFigures(_seconds(self.prom.window), online, irq, {}, dict(h["soft"]), dict(h["modes"]))
            if cl.bad:
                notes.append(cl.note())
            topo = topology_of(facts)
            state = MachineState(1, topo, sample_of(HostCounters(self.at or time.time(), online)), rates_of(fig),
                                 live=self.at is None, source=f"prometheus {self.prom.url}", notes=tuple(notes), host=inst)
            out.append(source_row(facts, state, isolated_known=h["iso_known"], top=h["top"] or "",
                                  gaps=h["gaps"], seconds=seconds))
        return out

    def _facts(self, inst: str, h: dict, online: tuple[int, ...]) -> HostFacts:
        info, uname = h["cpu_info"], h["uname"]

        def num(labels, key):
            v = labels.get(key)
            return int(v) if isinstance(v, str) and v.isdigit() and len(v) < 8 else None
        cpus = tuple(CpuFacts(c, num(info.get(c, {}), "package"), num(info.get(c, {}), "core")) for c in online)
        notes = () if info else ("no node_cpu_info: start node_exporter with --collector.cpu.info for cores and "
                                 "packages",)
        model = next((str(v.get("model_name"))[:120] for v in info.values() if v.get("model_name")), None)
        return HostFacts(inst, (uname.get("nodename") or None) and str(uname["nodename"])[:120], model,
                         (uname.get("release") or None) and str(uname["release"])[:120],
                         (uname.get("machine") or None) and str(uname["machine"])[:40], cpus,
                         tuple(sorted(h["isolated"])), tuple(sorted(h["quiet"])), notes)


def _seconds(duration: str) -> float:
    return float(duration[:-1]) * {"s": 1, "m": 60, "h": 3600}[duration[-1]]
