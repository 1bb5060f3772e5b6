"""A fleet that streams: rows as hosts answer, round after round, and a host that stops answering kept
with when it was last seen.

`FleetStream(rounds, interval)` runs `rounds()` — an iterator of batches of FleetRows, one pass over every
host (prometheus.py reads batches of hosts; pcp.py, and ssh through each host's agent, one host per batch
as each answers) — again and again,
`interval` seconds apart, until stopped. Each batch goes to `on_rows` at once, so a window shows the first
hosts while the rest are still being read. A host that answered before and now fails, or is missing from
a whole round, keeps its last state, marked `stale` ("no answer since 12:04:05 (40 s ago): why"). A round
that fails as a whole (the server went away) marks every host so and the stream goes on trying.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace

from app.errors import CoremapError
from app.remote.fleet import FleetRow, capture_host
from app.sources.rows import failed_row

Rounds = Callable[[], Iterator[list[FleetRow]]]


def stale_text(seen: float, why: str, now: float | None = None) -> str:
    now = time.time() if now is None else now
    ago = max(0, int(now - seen))
    return f"no answer since {time.strftime('%H:%M:%S', time.localtime(seen))} ({ago} s ago): {why}"


class FleetStream:
    """Keeps the newest row of every host; `rows()` is the fleet as it stands."""

    def __init__(self, rounds: Rounds, *, interval: float = 5.0, on_rows: Callable[[list[FleetRow]], None] | None = None,
                 clock: Callable[[], float] = time.time):
        self._rounds, self.interval, self.on_rows, self._clock = rounds, interval, on_rows, clock
        self._rows: dict[str, FleetRow] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.round = 0
        self.error = ""             # why the last round failed as a whole, "" when it did not

    def rows(self) -> list[FleetRow]:
        with self._lock:
            return list(self._rows.values())

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def merge(self, batch: Iterable[FleetRow]) -> list[FleetRow]:
        """The rows to show for `batch`: a failed host that answered before keeps its last state, stale."""
        out = []
        with self._lock:
            for row in batch:
                old = self._rows.get(row.host)
                if not row.ok and old is not None and old.state is not None:
                    row = replace(old, stale=stale_text(old.seen, row.error, self._clock()))
                self._rows[row.host] = row
                out.append(row)
        return out

    def run_round(self) -> None:
        seen: set[str] = set()
        self.round += 1
        try:
            for batch in self._rounds():
                rows = self.merge(batch)
                seen.update(r.host for r in rows)
                if self.on_rows is not None and rows:
                    self.on_rows(rows)
                if self._stop.is_set():
                    return
            self.error = ""
        except CoremapError as e:
            self.error = str(e)
        missing = [failed_row(h, self.error or f"{h}: missing from the source's last answer")
                   for h in self.hosts() if h not in seen]
        rows = self.merge(missing)
        if self.on_rows is not None and rows:
            self.on_rows(rows)

    def hosts(self) -> list[str]:
        with self._lock:
            return list(self._rows)

    def run(self) -> None:
        """Rounds until stop(); each starts `interval` seconds after the last one started."""
        while not self._stop.is_set():
            t0 = time.monotonic()
            self.run_round()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))


def prometheus_rounds(prom, at: float | None = None, only: list[str] | None = None) -> Rounds:
    return lambda: prom.rows(at, only=only)


def pcp_rounds(hosts: list, *, parallel: int = 8) -> Rounds:
    """One pass over PcpHost objects (kept between rounds, so each round's rates are since the last):
    `parallel` at once, each host's row handed over as soon as it has answered."""
    def one(h) -> FleetRow:
        from app.sources.rows import source_row
        t0 = time.monotonic()
        try:
            state = h.state(1)
            return source_row(h.facts(), state, isolated_known=False, seconds=time.monotonic() - t0)
        except CoremapError as e:
            return failed_row(h.hostspec, f"{h.hostspec}: {e}" if h.hostspec not in str(e) else str(e),
                              seconds=time.monotonic() - t0)

    return lambda: as_answered(hosts, one, parallel=parallel, name="coremap-pcp")


def ssh_rounds(hosts: list, *, parallel: int, timeout: float, probe=None, connect=None) -> Rounds:
    """One pass over ssh hosts (app/remote/hosts.py HostSpec), each captured through its agent as `coremap
    fleet` captures it (app/remote/fleet.py capture_host): `parallel` at once, each row handed over as soon
    as its host has answered. `probe` (the jitter probe on a chosen CPU) runs in a host's first answered
    round only, and its later rows keep that result: measuring every --every seconds would disturb, round
    after round, the CPU it measures."""
    probed: dict[str, dict | None] = {}

    def one(host) -> FleetRow:
        first = str(host) not in probed
        row = capture_host(host, timeout, probe if first else None, connect)
        if not row.ok:
            return row
        if first:
            probed[str(host)] = row.probe
        return replace(row, probe=probed[str(host)])

    return lambda: as_answered(hosts, one, parallel=parallel, name="coremap-fleet")


def as_answered(items: list, one: Callable[[object], FleetRow], *, parallel: int, name: str) -> Iterator[list[FleetRow]]:
    """`one(item)` for every item, `parallel` at once, each row yielded (as a batch of one) as soon as it is
    there. When the consumer stops early (the window closed), the items not yet started are dropped and
    the running ones finish on their own, each within its own timeout, unwaited: the fleet window's close
    waits for its stream thread, and that waited up to a host's timeout (15 s) with the UI thread."""
    pool = ThreadPoolExecutor(max_workers=max(1, parallel), thread_name_prefix=name)
    try:
        for f in as_completed([pool.submit(one, i) for i in items]):
            yield [f.result()]
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
