"""JavaNameReader: the full names of Java threads for the sampler, read seldom and off its thread.

Reading a JVM's names (app/machine/java.py) asks it for a thread dump, which stops every Java thread
at a safepoint for the dump's length, measured with -Xlog:safepoint on this 2-CPU VM (JDK 17): 0.35 ms
("PrintThreads" 0.33-0.40 ms, plus 0.01-0.03 ms for the "PrintJNI" and "FindDeadlocks" safepoints that
come with it) for the 20 threads of tests/unit/java/MarketData.java, 9-20 ms for a JVM of 1,000
sleeping threads; jcmd's own Thread.print stops it for the same time. So a JVM is read:
- only when it has threads whose comm fills all 15 bytes (names the kernel may have cut; a stock JVM
  has a few: "C2 CompilerThre", "VM Periodic Tas");
- again only when that set of threads changed (a thread came, went or renamed itself), never on a
  timer: a JVM whose threads stay as they are is asked once in its life;
- at most every READ_GAP_S seconds however often they change: a pool that starts and ends threads
  all the time (a cached thread pool under load) costs the JVM one pause per 30 s (0.001% of its time
  at 0.35 ms, 0.05% at 15 ms), and its new threads show their full names within 30 s. Shorter would
  add pauses to exactly the JVMs whose latency users watch; longer would leave new threads unnamed
  for longer than a user looking for one waits.
- by one worker thread, started when there is something to read and ended when there is not, so the
  sampler's tick never waits on a JVM (a listener that starts slowly, or a dump of 10,000 threads);
  a finished read shows at the sampler's next tick.

With no JVM on the machine a thread read costs one identity check per process: TaskReader hands out
the same ProcessInfo for a process that did not run, and a process is looked at (readlink of its exe)
once per (pid, start time, comm).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from app.machine.java import JvmNames, claims_java, read_java_names
from app.machine.thread_names import NO_THREAD_NAMES, ThreadNames, is_cut
from app.machine.threads import ProcessInfo, ThreadsSample
from app.sysroot import SysRoot

READ_GAP_S = 30.0


@dataclass
class _Process:
    """What the reader knows of one process."""
    key: tuple                       # (start time, comm): a new key is another program in this pid
    info: ProcessInfo                # the ProcessInfo looked at last
    java: bool                       # its executable is called java (claims_java)
    asked: frozenset = frozenset()   # the (tid, comm) of its cut threads when a read was last asked for
    asked_at: float | None = None
    pending: bool = False
    result: JvmNames | None = None


class JavaNameReader:
    """Keeps a ThreadNames for a live machine's threads; see the module docstring. `update()` after
    each thread read, `collect()` on the ticks between."""

    def __init__(self, root: SysRoot, *, gap: float = READ_GAP_S, clock=time.monotonic,
                 read=read_java_names, claims=claims_java):
        self.root = root
        self.gap = gap
        self._clock, self._read, self._claims = clock, read, claims
        self._seen: dict[int, _Process] = {}
        self._due: set[int] = set()          # JVMs whose threads changed within `gap` of their last read
        self._value = NO_THREAD_NAMES
        self._lock = threading.Lock()
        self._todo: deque[tuple[int, tuple[int, ...], tuple]] = deque()
        self._done: list[tuple[int, tuple, JvmNames]] = []
        self._worker: threading.Thread | None = None

    @property
    def value(self) -> ThreadNames:
        return self._value

    @property
    def busy(self) -> bool:
        """Whether a read is asked for or running (tests wait for it)."""
        with self._lock:
            return bool(self._todo) or self._worker is not None

    def collect(self) -> ThreadNames:
        """The names, with the reads that finished since the last call: the same object when none did."""
        if self._done:
            with self._lock:
                done, self._done = self._done, []
            for pid, key, names in done:
                p = self._seen.get(pid)
                if p is not None and p.key == key:
                    p.result, p.pending = names, False
            self._value = self._build()
        return self._value

    def update(self, threads: ThreadsSample) -> ThreadNames:
        """Look at a new thread read: ask for the JVMs whose cut threads changed; forget the processes
        that are gone. Returns collect()."""
        now = self._clock()
        seen, tasks = self._seen, threads.tasks
        changed = False
        for pid, info in threads.processes.items():
            p = seen.get(pid)
            if p is not None and p.info is info and pid not in self._due:
                continue
            leader = tasks.get(pid) or (tasks.get(info.tids[0]) if info.tids else None)
            key = (leader.starttime if leader is not None else None, info.comm)
            if p is None or p.key != key:
                changed |= p is not None and p.result is not None
                p = seen[pid] = _Process(key, info, self._claims(pid, self.root, info.comm))
            p.info = info
            if p.java:
                self._consider(pid, p, info, tasks, now)
        if len(seen) > len(threads.processes):
            for pid in [pid for pid in seen if pid not in threads.processes]:
                changed |= seen.pop(pid).result is not None
                self._due.discard(pid)
        if changed:
            self._value = self._build()
        return self.collect()

    def _consider(self, pid: int, p: _Process, info: ProcessInfo, tasks: dict, now: float) -> None:
        """Ask for a read of JVM `pid` when its cut threads changed and its last read is `gap` old."""
        cut = frozenset((t, tasks[t].comm) for t in info.tids if t in tasks and is_cut(tasks[t].comm))
        if not cut or cut == p.asked or p.pending:
            self._due.discard(pid)
            return
        if p.asked_at is not None and now - p.asked_at < self.gap:
            self._due.add(pid)              # looked at again on every update until it is due
            return
        self._due.discard(pid)
        p.asked, p.asked_at, p.pending = cut, now, True
        with self._lock:
            self._todo.append((pid, tuple(sorted(t for t, _ in cut)), p.key))
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="coremap-java-names", daemon=True)
                self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._todo:
                    self._worker = None
                    return
                pid, tids, key = self._todo.popleft()
            names = self._read(pid, self.root, tids)
            with self._lock:
                self._done.append((pid, key, names))

    def _build(self) -> ThreadNames:
        names, unavailable, read_at = {}, {}, {}
        for pid, p in self._seen.items():
            r = p.result
            if r is None:
                continue
            if r.reason:
                unavailable[pid] = r.reason
            else:
                names[pid], read_at[pid] = r.names, r.read_at
        return ThreadNames(names, unavailable, read_at)
