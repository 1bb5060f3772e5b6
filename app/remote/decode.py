"""The receiving half of the wire forms (app/remote/codec.py describes them): full forms decoded and
patches applied, each value checked as it comes.

Everything decoded is checked against the type its dataclass declares (typing.get_type_hints): an
int is an int (not a bool, within 64 bits), a float is finite, a string is UTF-8 and bounded, a list
and a dict are bounded, a class name is one of the classes reachable from the roots (never anything
else), and the constructor runs (its __post_init__ checks too). Fields annotated with a bare `dict`
or `tuple` take plain values only (numbers, strings, lists, dicts of them), never a class. A value
that fails any of this raises DecodeError, and the client gives up the connection.
"""
from __future__ import annotations

import dataclasses
import math
import sys
import threading
import types
import typing

from app.errors import CoremapError
from app.parse.cpulist import MAX_CPU
from app.parse.interrupts import MAX_ROWS

_MISSING = object()
MAX_ITEMS = 1 << 22            # elements of one list, entries of one dict (a 4M-thread machine does not exist)
MAX_TEXT = 1 << 20             # characters of one string (a command line is at most ARG_MAX, 2 MB, usually far less)
MAX_INT = 1 << 63
GENERIC_DEPTH = 8              # nesting of a plain value in a bare `dict` / `tuple` field


class DecodeError(CoremapError):
    """A value from the other side that is not what its field declares."""


_message = threading.local()       # .kept: the objects kept for references in the message being decoded


# -- decoding (the client's side) -------------------------------------------------------------------------
class _Type:
    """A compiled annotation: decode a full form, apply a patch to the value held before."""
    name = "value"

    def decode(self, v):
        raise NotImplementedError

    def apply(self, old, form):
        if type(form) is dict and len(form) <= 2:
            if "$p" in form or "$l" in form or "$dp" in form:
                return self.patch(old, form)
        return self.decode(form)

    def patch(self, old, form):
        raise DecodeError(f"a change where a whole {self.name} belongs")

    def accepts(self, value) -> bool:
        """Whether a value already decoded is one of this type (to pick the arm of a union to patch)."""
        return True


class _Exact(_Type):
    """A value of exactly one JSON type: `kind` (a bool is not an integer), `expected` as an error
    names it; `fits` bounds it further."""
    kind: type
    expected: str

    def decode(self, v):
        if type(v) is not self.kind or not self.fits(v):
            raise DecodeError(f"expected {self.expected}, found {_what(v)}")
        return v

    def fits(self, v) -> bool:
        return True

    def accepts(self, value):
        return type(value) is self.kind


class _Int(_Exact):
    name, kind, expected = "integer", int, "an integer"

    def fits(self, v) -> bool:
        return -MAX_INT < v < MAX_INT


class _Float(_Type):
    name = "number"

    def decode(self, v):
        t = type(v)
        if t is float:
            if not math.isfinite(v):
                raise DecodeError("a number that is not finite")
            return v
        if t is int and -MAX_INT < v < MAX_INT:
            return float(v)
        raise DecodeError(f"expected a number, found {_what(v)}")

    def accepts(self, value):
        return type(value) is float


class _Str(_Type):
    name = "string"

    def decode(self, v):
        return _text(v)

    def accepts(self, value):
        return type(value) is str


class _Bool(_Exact):
    name, kind, expected = "true/false", bool, "true or false"


class _None(_Exact):
    name, kind, expected = "null", type(None), "null"


class _Union(_Type):
    def __init__(self, arms: list[_Type]):
        self.arms = arms
        self.name = " or ".join(a.name for a in arms)

    def decode(self, v):
        errors = []
        for arm in self.arms:
            try:
                return arm.decode(v)
            except DecodeError as e:
                errors.append(str(e))
        raise DecodeError(f"expected {self.name}: {errors[-1]}")

    def patch(self, old, form):
        for arm in self.arms:
            if arm.accepts(old):
                return arm.patch(old, form)
        raise DecodeError(f"a change of a value that is not a {self.name}")

    def accepts(self, value):
        return any(a.accepts(value) for a in self.arms)


class _Seq(_Type):
    """tuple[X, ...] or list[X] (homogeneous), or a fixed tuple[X, Y] (`fixed`)."""

    def __init__(self, item: _Type | None, fixed: list[_Type] | None = None, make=tuple):
        self.item, self.fixed, self.make = item, fixed, make
        self.name = "list"

    def decode(self, v):
        if type(v) is dict and self.fixed is None:
            if "$z" in v:
                return self.make(self._sparse(v))
            if "$a" in v and len(v) == 1 and type(self.item) is _Int:
                return self.make(_unruns(v["$a"]))
        if type(v) is not list:
            raise DecodeError(f"expected a list, found {_what(v)}")
        if self.fixed is not None:
            if len(v) != len(self.fixed):
                raise DecodeError(f"expected a list of {len(self.fixed)}, found {len(v)} items")
            return self.make(t.decode(x) for t, x in zip(self.fixed, v))
        if len(v) > MAX_ITEMS:
            raise DecodeError(f"a list of more than {MAX_ITEMS:,} items")
        item = self.item
        fast = _fast_scalars(item, v)
        if fast is not None:
            return self.make(fast)
        return self.make(item.decode(x) for x in v)

    def _sparse(self, v) -> list:
        n, idx, vals = v.get("$z"), v.get("i"), v.get("v")
        if (type(n) is not int or not 0 <= n <= MAX_ITEMS or type(idx) is not list or type(vals) is not list
                or len(idx) != len(vals) or len(v) != 3 or type(self.item) not in (_Int, _Float)):
            raise DecodeError("a sparse list that is not one")
        zero = 0 if type(self.item) is _Int else 0.0
        out = [zero] * n
        vals = _fast_scalars(self.item, vals)
        if not all(type(i) is int for i in idx) or (idx and not (0 <= min(idx) and max(idx) < n)):
            raise DecodeError("a sparse list with an index out of its range")
        for i, x in zip(idx, vals):
            out[i] = x
        return out

    def patch(self, old, form):
        changes = form.get("$l")
        if not isinstance(old, (tuple, list)) or type(changes) is not list or len(form) != 1:
            raise DecodeError("a change of a list that is not one")
        out = list(old)
        n = len(out)
        for pair in changes:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int or not 0 <= pair[0] < n:
                raise DecodeError("a list change at an index the list does not have")
            i = pair[0]
            t = self.fixed[i] if self.fixed is not None else self.item
            out[i] = t.apply(out[i], pair[1])
        return self.make(out)

    def accepts(self, value):
        return isinstance(value, (tuple, list))


class _Dict(_Type):
    name = "dict"

    def __init__(self, key: _Type, value: _Type):
        self.key, self.value = key, value

    def _key(self, k):
        if type(k) not in (int, str):
            raise DecodeError(f"a dict key that is {_what(k)}")
        return self.key.decode(k)

    def decode(self, v):
        pairs = v.get("$d") if type(v) is dict and len(v) == 1 else None
        if type(pairs) is not list:
            raise DecodeError(f"expected a dict, found {_what(v)}")
        if len(pairs) > MAX_ITEMS:
            raise DecodeError(f"a dict of more than {MAX_ITEMS:,} entries")
        out = {}
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2:
                raise DecodeError("a dict entry that is not a [key, value] pair")
            out[self._key(pair[0])] = self.value.decode(pair[1])
        return out

    def patch(self, old, form):
        changes, gone = form.get("$dp"), form.get("del", [])
        if (not isinstance(old, dict) or type(changes) is not list or type(gone) is not list
                or set(form) - {"$dp", "del"}):
            raise DecodeError("a change of a dict that is not one")
        out = dict(old)
        for k in gone:
            out.pop(self._key(k), None)
        for pair in changes:
            if type(pair) is not list or len(pair) != 2:
                raise DecodeError("a dict change that is not a [key, change] pair")
            k = self._key(pair[0])
            a = out.get(k, _MISSING)
            out[k] = self.value.decode(pair[1]) if a is _MISSING else self.value.apply(a, pair[1])
        if len(out) > MAX_ITEMS:
            raise DecodeError(f"a dict of more than {MAX_ITEMS:,} entries")
        return out

    def accepts(self, value):
        return isinstance(value, dict)


class _Plain(_Type):
    """A field annotated with a bare `dict`, `tuple` or `object`: plain values only (no class),
    lists become tuples, at most GENERIC_DEPTH deep."""
    name = "plain value"

    def decode(self, v, depth: int = 0):
        if depth > GENERIC_DEPTH:
            raise DecodeError(f"a value nested deeper than {GENERIC_DEPTH}")
        t = type(v)
        if t is str:
            return _text(v)
        if t is int:
            return _Int().decode(v)
        if t is float:
            return _Float().decode(v)
        if v is None or t is bool:
            return v
        if t is list:
            if len(v) > MAX_ITEMS:
                raise DecodeError(f"a list of more than {MAX_ITEMS:,} items")
            return tuple(self.decode(x, depth + 1) for x in v)
        if t is dict and set(v) == {"$d"} and type(v["$d"]) is list:
            out = {}
            for pair in v["$d"][:MAX_ITEMS + 1]:
                if type(pair) is not list or len(pair) != 2 or type(pair[0]) not in (int, str):
                    raise DecodeError("a dict entry that is not a [key, value] pair")
                out[self.decode(pair[0], depth + 1)] = self.decode(pair[1], depth + 1)
            if len(out) > MAX_ITEMS:
                raise DecodeError(f"a dict of more than {MAX_ITEMS:,} entries")
            return out
        raise DecodeError(f"a {_what(v)} where a plain value belongs")

    def patch(self, old, form):
        if "$dp" in form and isinstance(old, dict):
            return _Dict(_Plain(), _Plain()).patch(old, form)
        if "$l" in form and isinstance(old, tuple):
            return _Seq(_Plain()).patch(old, form)
        raise DecodeError("a change of a plain value that does not fit it")


class _Class(_Type):
    def __init__(self, cls: type):
        self.cls = cls
        self.name = cls.__name__
        self.fields: list[tuple[str, _Type]] = []      # filled once every class is known (Schema)

    def decode(self, v):
        if type(v) is dict and len(v) == 1 and "$r" in v:
            return self._reference(v["$r"])
        keep = type(v) is dict and v.get("k") == 1
        if type(v) is not dict or v.get("$c") != self.name or type(v.get("f")) is not list or len(v) != 2 + keep:
            raise DecodeError(f"expected a {self.name}, found {_what(v)}")
        values = v["f"]
        if len(values) != len(self.fields):
            raise DecodeError(f"a {self.name} with {len(values)} fields; it has {len(self.fields)}")
        obj = self._make({n: self._field(n, t, t.decode, x) for (n, t), x in zip(self.fields, values)})
        if keep:
            kept = getattr(_message, "kept", None)
            if kept is None:
                raise DecodeError("an object kept for references outside a message")
            kept.append(obj)
        return obj

    def _reference(self, k):
        kept = getattr(_message, "kept", None) or []
        if type(k) is not int or not 0 <= k < len(kept) or type(kept[k]) is not self.cls:
            raise DecodeError(f"a reference to a {self.name} the message does not hold")
        return kept[k]

    def patch(self, old, form):
        changes = form.get("$p")
        if type(old) is not self.cls or type(changes) is not list or len(form) != 1:
            raise DecodeError(f"a change of a {self.name} where there is none")
        kw = {n: getattr(old, n) for n, _ in self.fields}
        for pair in changes:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int \
                    or not 0 <= pair[0] < len(self.fields):
                raise DecodeError(f"a change of a {self.name} field it does not have")
            n, t = self.fields[pair[0]]
            kw[n] = self._field(n, t, lambda x, t=t, n=n: t.apply(kw[n], x), pair[1])
        return self._make(kw)

    def _field(self, name, t, fn, x):
        try:
            v = fn(x)
        except DecodeError as e:
            raise DecodeError(f"{self.name}.{name}: {e}") from None
        rule = _RANGES.get((self.name, name))
        if rule is not None and v is not None:
            why = rule(v)
            if why:
                raise DecodeError(f"{self.name}.{name}: {why}")
        return v

    def _make(self, kw):
        try:
            return self.cls(**kw)
        except (TypeError, ValueError, KeyError, IndexError, CoremapError) as e:
            # The class's own checks (__post_init__) refused the values.
            raise DecodeError(f"a {self.name} its own checks refuse ({str(e)[:80]})") from None

    def accepts(self, value):
        return type(value) is self.cls


class Schema:
    """The classes reachable from `roots` through their annotations, each compiled once.

    `namespace` resolves names that annotations spell as strings but whose modules import them only
    for type checking (app/sampling/machine_state.py imports IrqTable, MachineSample, ... under TYPE_CHECKING)."""

    def __init__(self, roots, namespace: dict[str, type]):
        self.namespace = dict(namespace)
        self.classes: dict[str, _Class] = {}
        for r in roots:
            self._compile(r)

    def __getitem__(self, cls: type) -> _Class:
        return self.classes[cls.__name__]

    def _compile(self, tp) -> _Type:
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if tp is int:
            return _Int()
        if tp is float:
            return _Float()
        if tp is str:
            return _Str()
        if tp is bool:
            return _Bool()
        if tp is type(None) or tp is None:
            return _None()
        if origin in (typing.Union, types.UnionType):
            arms = [self._compile(a) for a in args]
            # null first: `int | None` decodes null without trying the int
            arms.sort(key=lambda a: not isinstance(a, _None))
            return _Union(arms)
        if tp in (dict, tuple, list, object, typing.Any) or (origin in (dict, tuple, list) and not args):
            return _Plain()
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return _Seq(self._compile(args[0]))
            return _Seq(None, [self._compile(a) for a in args])
        if origin is list:
            return _Seq(self._compile(args[0]), make=list)
        if origin in (dict, typing.Mapping) or getattr(origin, "__name__", "") == "Mapping":
            return _Dict(self._compile(args[0]), self._compile(args[1]))
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self._class(tp)
        raise TypeError(f"no wire form for the annotation {tp!r}")

    def _class(self, cls: type) -> _Class:
        known = self.classes.get(cls.__name__)
        if known is not None:
            if known.cls is not cls:
                raise TypeError(f"two classes named {cls.__name__} cannot share the wire")
            return known
        c = _Class(cls)
        self.classes[cls.__name__] = c          # before the fields: a class may refer to itself
        module = sys.modules[cls.__module__]
        hints = typing.get_type_hints(cls, globalns=vars(module), localns=self.namespace)
        for f in dataclasses.fields(cls):
            if not f.init:
                raise TypeError(f"{cls.__name__}.{f.name} is not set by the constructor; it cannot be sent")
            c.fields.append((f.name, self._compile(hints[f.name])))
        return c


# -- what the values mean ---------------------------------------------------------------------------------
# Types say a field holds integers; these say which: a CPU id is below MAX_CPU (the CPU lists' own bound,
# app/parse/cpulist.py), a count or a rate is not negative, a table has no more rows than IRQ numbers
# go. A server that lies (CPU 4,000,000,000, an IRQ counted -5 times, a billion rows) is then refused
# at the door like one that sends a wrong type, in one line, instead of reaching the grid's layout or
# a table. Checked where a field is decoded or changed, so an unchanged field costs nothing a tick.
def _numbers(v):
    """The numbers in a field: itself, a sequence's items, or a dict's values (each a number or a
    sequence of them)."""
    if type(v) in (int, float):
        return (v,)
    if isinstance(v, dict):
        out = []
        for x in v.values():
            out.extend(_numbers(x) if x is not None else ())
        return out
    return [x for x in v if x is not None] if isinstance(v, (tuple, list)) else ()


def _cpu_ids(v) -> str:
    ids = list(v) if isinstance(v, dict) else _numbers(v)
    if ids and not (0 <= min(ids) and max(ids) < MAX_CPU):
        bad = next(i for i in ids if not 0 <= i < MAX_CPU)
        return f"CPU {bad} is past any machine (CPU ids are 0 to {MAX_CPU - 1})"
    return ""


def _not_negative(v) -> str:
    nums = _numbers(v)
    if nums and min(nums) < 0:
        return f"{min(nums)} where a count or a rate (never negative) belongs"
    return ""


def _rows(v) -> str:
    return f"{len(v):,} rows, more than the {MAX_ROWS:,} IRQs any machine has" if len(v) > MAX_ROWS else ""


def _cpus(v) -> str:
    return f"{len(v):,} CPUs, more than any machine has" if len(v) > MAX_CPU else ""


_RANGES = {
    **{(c, f): _cpu_ids for c, fs in {
        "Cpu": ("id", "siblings"), "Core": ("cpus",), "Cache": ("cpus",), "NumaNode": ("cpus",),
        "Package": ("cpus",), "Topology": ("online", "offline", "possible", "present", "isolated", "nohz_full", "isolcpus"),
        "InterruptTable": ("cpus",), "IrqTable": ("cpus",), "SoftirqTable": ("cpus",), "Rates": ("cpus", "per_cpu"),
        "CpuRates": ("cpu",), "TaskRate": ("last_cpu",), "TaskSample": ("last_cpu", "allowed"),
        "IrqInfo": ("requested", "effective", "hint"), "StatSample": ("cpus",), "CpuPower": ("idle", "mhz"),
    }.items() for f in fs},
    **{(c, f): _not_negative for c, fs in {
        "InterruptRow": ("counts", "total"), "SoftirqTable": ("counts",), "IrqRate": ("per_cpu", "total"),
        "CpuTimes": ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest", "guest_nice"),
        "CpuRates": ("irq_per_s", "softirq_per_s", "softirq_total_per_s", "busy_pct", "user_pct", "system_pct",
                     "irq_pct", "softirq_pct", "irq_softirq_pct", "idle_pct", "iowait_pct", "steal_pct"),
        "TaskRate": ("cpu_pct", "migrations_per_s", "switches_per_s"),
        "TaskSample": ("utime", "stime", "starttime", "voluntary_switches", "involuntary_switches", "migrations"),
        "StatSample": ("ctxt", "btime", "processes", "procs_running", "procs_blocked", "intr_total",
                       "softirq_total"),
        "Rates": ("seconds",),
    }.items() for f in fs},
    ("InterruptTable", "rows"): _rows, ("IrqTable", "rows"): _rows, ("Topology", "cpus"): _cpus,
}


def _unruns(runs) -> list:
    if type(runs) is not list or len(runs) % 3 or not all(type(x) is int for x in runs):
        raise DecodeError("a list of runs that is not one")
    counts = runs[2::3]
    if any(c < 1 for c in counts) or sum(counts) > MAX_ITEMS:
        raise DecodeError("a list of runs with a bad count")
    out: list[int] = []
    for start, step, count in zip(runs[::3], runs[1::3], counts):
        last = start + step * (count - 1)
        if not (-MAX_INT < start < MAX_INT and -MAX_INT < last < MAX_INT):
            raise DecodeError("a list of runs past 64 bits")
        out.extend(range(start, last + 1, step) if step > 0 else
                   range(start, last - 1, step) if step < 0 else [start] * count)
    return out


def _fast_scalars(item: _Type, v: list):
    """The items of `v` checked in bulk when `item` is int or float (a row of counts, a row of rates):
    the same checks as _Int/_Float.decode without a Python call per element; None for other types."""
    if type(item) is _Int:
        if all(type(x) is int for x in v) and (not v or (-MAX_INT < min(v) and max(v) < MAX_INT)):
            return v
        raise DecodeError("expected integers of at most 64 bits")
    if type(item) is _Float:
        if all(type(x) is float or type(x) is int for x in v):
            out = [float(x) for x in v]
            if all(map(math.isfinite, out)):
                return out
        raise DecodeError("expected finite numbers")
    return None


def _text(v) -> str:
    if type(v) is not str:
        raise DecodeError(f"expected a string, found {_what(v)}")
    if len(v) > MAX_TEXT:
        raise DecodeError(f"a string of more than {MAX_TEXT:,} characters")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate (JSON's "\\ud800"): not text any terminal or Qt label can show.
            raise DecodeError("a string that is not valid Unicode") from None
    return v


def _what(v) -> str:
    if isinstance(v, dict):
        return "an object" + (f" {v.get('$c')!r}"[:40] if "$c" in v else "")
    return {bool: "true/false", int: "an integer", float: "a number", str: "a string",
            list: "a list", type(None): "null"}.get(type(v), type(v).__name__)


class Decoder:
    """Full forms and patches of one root class (a MachineState, a list of pin results...)."""

    def __init__(self, schema: Schema, tp):
        self.type = schema._compile(tp)

    def decode(self, form):
        return self.apply(None, form)

    def apply(self, old, form):
        """The new value: `form` (one message) applied to `old` (a patch), or decoded (a full form)."""
        _message.kept = []
        try:
            return self.type.apply(old, form) if old is not None else self.type.decode(form)
        finally:
            _message.kept = None
