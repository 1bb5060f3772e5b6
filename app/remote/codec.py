"""The values that cross the wire — MachineState and everything in it, pin requests and results, journal
entries — as JSON and back, sent as the difference from the value sent before.

Full forms (JSON):
    null, true/false, numbers, strings          themselves (a non-finite float becomes null)
    [v, ...]                                     a tuple or list
    {"$z": n, "i": [i, ...], "v": [v, ...]}      a list of n numbers, zero but at indices i
    {"$a": [start, step, count, ...]}            a list of integers as arithmetic runs (CPU lists)
    {"$d": [[key, v], ...]}                      a dict (keys stay ints or strings)
    {"$c": "Name", "f": [v, ...]}                a dataclass: its init fields in declaration order;
                                                 with "k": 1 it is kept for references, numbered in
                                                 the order such objects end within the message
    {"$r": k}                                    the k-th kept object of this message again (the IRQ
                                                 table's rows are the sample's rows, read apart)
Patches of the value sent before at the same place (only what changed):
    {"$p": [[i, patch], ...]}                    a dataclass of the same class: field i changed
    {"$l": [[i, patch], ...]}                    a list of the same length: element i changed
    {"$dp": [[key, patch], ...], "del": [...]}   a dict: keys changed or added, keys removed

The encoder (`Encoder.diff`) walks the new value against the old one and skips what is the same
object: the Sampler hands out the same Topology, IrqTable, TaskSample and TaskRate objects while
they do not change (app/sampling/sampler.py, app/machine/threads.py), so a tick costs the counters that moved
and the threads that ran. The decoder (`Decoder.apply`) builds new objects only on the paths a patch
names and keeps every other object as it was, so the window's identity checks (a topology that did
not change is not laid out again; an unchanged thread list is not re-applied) hold for a remote
machine as they do locally.

Decoding, and what it checks, is app/remote/decode.py (each object against its typed definition).
"""
from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable
from operator import attrgetter

from app.pinning.service import PinRequest, PinResult
from app.pinning.journal import JournalEntry, QuietEvent
from app.quiet.isolate import QuietPreview
from app.remote.decode import DecodeError, Decoder, Schema
from app.sampling.machine_state import MachineState

UNCHANGED = object()           # what diff() returns for "the same": never sent
_MISSING = object()
_SCALARS = (type(None), bool, int, str)
SPARSE_FROM = 16               # numbers in a list before zeros are left out


# -- encoding (the agent's side) ------------------------------------------------------------------------
class Encoder:
    """Full forms and patches of values; keeps no state (the caller keeps the value sent before)."""

    def __init__(self):
        self._fields: dict[type, tuple[str, ...]] = {}
        self._getters: dict[type, Callable[[object], tuple]] = {}
        self._kept: dict = {}           # value -> reference number, within one message

    def message(self, old, new):
        """The form that turns `old` into `new` (`old` None: the whole of `new`), as one message:
        equal objects met again within it are sent as references."""
        self._kept = {}
        try:
            if old is None:
                return self._encode(new)
            d = self.diff(old, new)
            return {"$p": []} if d is UNCHANGED else d
        finally:
            self._kept = {}

    def _names(self, cls: type) -> tuple[str, ...]:
        names = self._fields.get(cls)
        if names is None:
            names = tuple(f.name for f in dataclasses.fields(cls) if f.init)
            self._fields[cls] = names
        return names

    def _getter(self, cls: type) -> Callable[[object], tuple]:
        """A dataclass's init fields as a tuple, read in one call (diff reads both sides of every
        object it compares, each tick)."""
        get = self._getters.get(cls)
        if get is None:
            names = self._names(cls)
            get = attrgetter(*names) if len(names) > 1 else (lambda v: tuple(getattr(v, n) for n in names))
            self._getters[cls] = get
        return get

    def encode(self, v):
        """The full form of `v`, as one message."""
        return self.message(None, v)

    def _encode(self, v):
        t = type(v)
        if t in _SCALARS:
            return v
        if t is float:
            return v if math.isfinite(v) else None
        if t is tuple or t is list:
            return self._encode_list(v)
        if t is dict:
            return {"$d": [[self._encode(k), self._encode(x)] for k, x in v.items()]}
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            return self._encode_object(v, t)
        raise TypeError(f"cannot send a {t.__name__}")

    def _encode_object(self, v, t):
        try:
            ref = self._kept.get(v)
        except TypeError:           # holds a dict or list: no hash, never kept
            return {"$c": t.__name__, "f": [self._encode(getattr(v, n)) for n in self._names(t)]}
        if ref is not None:
            return {"$r": ref}
        form = {"$c": t.__name__, "f": [self._encode(getattr(v, n)) for n in self._names(t)], "k": 1}
        self._kept[v] = len(self._kept)
        return form

    def _encode_list(self, v):
        t0 = type(v[0]) if v else None
        if t0 is int or t0 is float:
            if all(type(x) is t0 for x in v):
                nonzero = [i for i, x in enumerate(v) if x]
                if len(v) >= SPARSE_FROM and 2 * len(nonzero) < len(v):
                    # Counts of an IRQ per CPU are mostly zero (99.5% on a 112-CPU server).
                    return {"$z": len(v), "i": nonzero,
                            "v": [v[i] if t0 is int or math.isfinite(v[i]) else None for i in nonzero]}
                if t0 is float:
                    return [x if math.isfinite(x) else None for x in v]
                runs = _runs(v) if len(v) >= SPARSE_FROM else None
                return {"$a": runs} if runs is not None else list(v)
        elif t0 is str and all(type(x) is str for x in v):
            return list(v)
        return [self._encode(x) for x in v]

    def diff(self, old, new):
        """UNCHANGED, or what turns `old` into `new` on the other side (a patch or a full form)."""
        if old is new:
            return UNCHANGED
        t = type(new)
        if t is not type(old):
            return self._encode(new)
        if t in _SCALARS:
            return UNCHANGED if old == new else new
        if t is float:
            if old == new or (old != old and new != new):
                return UNCHANGED
            return self._encode(new)
        if t is tuple or t is list:
            return self._diff_list(old, new)
        if t is dict:
            return self._diff_dict(old, new)
        if dataclasses.is_dataclass(new):
            fields = self._getter(t)
            changed = self._changed(fields(old), fields(new))
            return {"$p": changed} if changed else UNCHANGED
        raise TypeError(f"cannot send a {t.__name__}")

    def _diff_list(self, old, new):
        if len(old) != len(new):
            return self._encode(new)
        if new and type(new[0]) in _SCALARS or (new and type(new[0]) is float):
            if old == new:
                return UNCHANGED
            changed = [[i, self._encode(b)] for i, (a, b) in enumerate(zip(old, new)) if a != b]
            # A sparse patch costs about twice a full element: send the list whole past a third.
            return {"$l": changed} if 3 * len(changed) < len(new) else self._encode(new)
        changed = self._changed(old, new)
        return {"$l": changed} if changed else UNCHANGED

    def _changed(self, old, new) -> list[list]:
        """[[position, what turns it into the new one], ...] of the items of two equally long
        sequences (a dataclass's fields, a list's elements) that differ."""
        changed = []
        for i, (a, b) in enumerate(zip(old, new)):
            if a is b:
                continue
            d = self.diff(a, b)
            if d is not UNCHANGED:
                changed.append([i, d])
        return changed

    def _diff_dict(self, old, new):
        changed = []
        for k, b in new.items():
            a = old.get(k, _MISSING)
            if a is b:
                continue
            d = self._encode(b) if a is _MISSING else self.diff(a, b)
            if d is not UNCHANGED:
                changed.append([self._encode(k), d])
        gone = [self._encode(k) for k in old if k not in new]
        if not changed and not gone:
            return UNCHANGED
        out = {"$dp": changed}
        if gone:
            out["del"] = gone
        return out


def _runs(v: list) -> list | None:
    """[start, step, count, ...] for a list of integers, when that is less than half its length."""
    runs, i, n = [], 0, len(v)
    while i < n:
        j = i + 1
        if j < n:
            step = v[j] - v[i]
            while j + 1 < n and v[j + 1] - v[j] == step:
                j += 1
            if j - i >= 2:
                runs += (v[i], step, j - i + 1)
                i = j + 1
                continue
        runs += (v[i], 0, 1)
        i += 1
        if len(runs) * 2 >= n:
            return None
    return runs if len(runs) * 2 < n else None


# -- what coremap sends ---------------------------------------------------------------------------------
_SCHEMA: Schema | None = None
# A fleet's hosts each make their receiver on a thread of their own, at once: msgspec.inspect, reading the
# classes' annotations on eight threads together, crashed the interpreter (SIGSEGV in typing._eval_type,
# seen in tests/unit/test_remote_fleet.py under xdist). The schema is found by one thread.
_SCHEMA_LOCK = threading.Lock()


def wire_schema() -> Schema:
    """The classes of coremap's wire: MachineState and what it holds, pin requests and results, journal
    entries and quiet events, an isolate's preview (found once)."""
    global _SCHEMA
    with _SCHEMA_LOCK:
        if _SCHEMA is None:
            _SCHEMA = Schema((MachineState, PinRequest, PinResult, JournalEntry, QuietEvent, QuietPreview))
    return _SCHEMA


class StateSender:
    """The agent's side of a stream of MachineStates: the first one whole, then what changed."""

    def __init__(self):
        self._encoder = Encoder()
        self._last = None

    def form(self, state):
        last, self._last = self._last, state
        return self._encoder.message(last, state)


class StateReceiver:
    """The client's side: each form applied to the state before it. A new receiver per connection
    (the agent's sender starts again with a whole state)."""

    def __init__(self):
        self._decoder = Decoder(wire_schema(), MachineState)
        self._last = None

    @property
    def last(self):
        return self._last

    def apply(self, form):
        if self._last is None and not (type(form) is dict and "$c" in form):
            raise DecodeError("a change before any whole state")
        self._last = self._decoder.apply(self._last, form)
        return self._last
