"""The receiving half of the wire (app/remote/codec.py spells its forms): the compact spellings unpacked
and the patches applied to the value held before; every object is then checked against its typed
definition (its dataclass's own annotations, with their bounds: CPU ids below 65,536, counts and
rates not negative, no more IRQ rows than IRQ numbers go; app/parse/json_text.py) by msgspec, strict,
in C. A value that fails raises the one JsonInputError naming the class and the field, "InterruptRow:
counts[0]: expected int >= 0", and the client gives up the connection.

What is checked here is the wire's own spelling only: a class the wire does not carry, an object with
the wrong number of fields, a reference to an object the message does not hold, a compact list that
is not one, a change of a value that is not there. What a value must be is said once, by its type.

The agent on a server runs on the standard library alone (app/remote/ship.py) and decodes one thing:
the pin request of the coremap that started it over ssh (its own user, not the machine it looks at);
`build` makes it with the classes' constructors, whose own checks run, and the pin flow checks the
rest (targets that exist, CPUs that can take them) as it does for a local pin.
"""
from __future__ import annotations

import dataclasses

from app.parse.json_text import JsonInputError, convert

# The one error of what comes in (app/parse/json_text.py), under the name the wire's callers catch.
DecodeError = JsonInputError
MAX_ITEMS = 1 << 22            # elements a compact list unpacks to (a 4M-thread machine does not exist)
MAX_INT = 1 << 63
_SCALARS = (int, float, str, bool, type(None))
_CONTAINERS = (tuple, list, dict)


class Schema:
    """The classes of a wire by name, each with the fields the encoder sends (its init fields, in
    declaration order): `classes` as listed, and every class reachable from `roots` (msgspec's
    reading of their annotations)."""

    def __init__(self, roots=(), classes=()):
        self.classes: dict[str, type] = {}
        self.fields: dict[type, tuple[str, ...]] = {}
        for cls in classes:
            self._add(cls)
        if roots:
            import msgspec.inspect      # here: the agent (standard library only) lists its classes
            seen: set[int] = set()
            for info in msgspec.inspect.multi_type_info(tuple(roots)):
                self._walk(info, seen, msgspec.inspect.DataclassType)

    def _add(self, cls: type) -> None:
        if self.classes.setdefault(cls.__name__, cls) is not cls:
            raise TypeError(f"two classes named {cls.__name__} cannot share the wire")
        self.fields[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)

    def _walk(self, info, seen: set[int], dataclass_type) -> None:
        if id(info) in seen:
            return
        seen.add(id(info))
        if isinstance(info, dataclass_type):
            self._add(info.cls)
            inner = [f.type for f in info.fields]
        else:
            inner = [getattr(info, a) for a in ("type", "item_type", "key_type", "value_type") if hasattr(info, a)]
            inner += list(getattr(info, "types", ())) + list(getattr(info, "item_types", ()))
        for i in inner:
            self._walk(i, seen, dataclass_type)


class Decoder:
    """Full forms and patches of one root type (a MachineState, a list of pin results...)."""

    def __init__(self, schema: Schema, tp):
        self.schema, self.type = schema, tp
        self.what = getattr(tp, "__name__", None) or str(tp)

    def decode(self, form):
        return self.apply(None, form)

    def apply(self, old, form):
        """The new value: `form` (one message) applied to `old` (a patch), or decoded (a full form)."""
        message = _Message(self.schema, _checked)
        value = message.patch(old, form) if old is not None else message.plain(form)
        return convert(value, self.type, what=self.what)


def build(form, schema: Schema):
    """The value of a full form made by its classes' constructors, without msgspec (the agent's
    side; see the module docstring); DecodeError naming the class when a constructor refuses."""
    return _tuples(_Message(schema, _constructed).plain(form))


def _checked(cls: type, kw: dict, name: str):
    return convert(kw, cls, what=name)


def _constructed(cls: type, kw: dict, name: str):
    try:
        return cls(**{k: _tuples(v) for k, v in kw.items()})
    except (TypeError, ValueError) as e:
        raise DecodeError(f"{name}: {str(e)[:120]}") from None


def _tuples(v):
    return tuple(map(_tuples, v)) if type(v) is list else v


class _Message:
    """One message being read: the objects it keeps for references ("k": 1), in the order they end;
    `make(cls, fields, name)` makes each object."""

    def __init__(self, schema: Schema, make):
        self.schema, self.make = schema, make
        self.kept: list = []

    def plain(self, v):
        """A full form as the values msgspec checks: objects made (and checked) as they end, lists and
        dicts unpacked. A list of scalars is left to its type to check, item by item in C."""
        t = type(v)
        if t is list:
            return v if not v or type(v[0]) in _SCALARS else [self.plain(x) for x in v]
        if t is not dict:
            return v
        if "$c" in v:
            return self._object(v)
        if len(v) == 1 and "$d" in v:
            return self._dict(v["$d"])
        if len(v) == 1 and "$a" in v:
            return _unruns(v["$a"])
        if len(v) == 1 and "$r" in v:
            k = v["$r"]
            if type(k) is not int or not 0 <= k < len(self.kept):
                raise DecodeError("a reference to an object the message does not hold")
            return self.kept[k]
        if "$z" in v:
            return _sparse(v)
        raise DecodeError(f"an object the wire does not spell (keys {', '.join(map(str, v))[:60]})")

    def _object(self, v):
        name, values = v["$c"], v.get("f")
        cls = self.schema.classes.get(name) if type(name) is str else None
        if cls is None:
            raise DecodeError(f"a {str(name)[:40]!r}: no class the wire carries")
        keep = v.get("k") == 1
        names = self.schema.fields[cls]
        if type(values) is not list or len(v) != 2 + keep:
            raise DecodeError(f"a {name} not spelled as one")
        if len(values) != len(names):
            raise DecodeError(f"a {name} with {len(values)} fields; it has {len(names)}")
        obj = self.make(cls, dict(zip(names, map(self.plain, values))), name)
        if keep:
            self.kept.append(obj)
        return obj

    def _dict(self, pairs) -> dict:
        if type(pairs) is not list or len(pairs) > MAX_ITEMS:
            raise DecodeError("a dict that is not a list of [key, value] pairs")
        out = {}
        for pair in pairs:
            if type(pair) is not list or len(pair) != 2:
                raise DecodeError("a dict entry that is not a [key, value] pair")
            out[_key(pair[0])] = self.plain(pair[1])
        return out

    def patch(self, old, form):
        """`form` applied to `old`: a change of the same shape ($p, $l, $dp), or a whole new value."""
        if type(form) is not dict or len(form) > 2:
            return self.plain(form)
        if "$p" in form:
            return self._patch_object(old, form.get("$p"), len(form))
        if "$l" in form:
            return self._patch_list(old, form.get("$l"), len(form))
        if "$dp" in form:
            return self._patch_dict(old, form)
        return self.plain(form)

    def _patch_object(self, old, changes, size: int):
        cls = type(old)
        names = self.schema.fields.get(cls)
        if names is None or type(changes) is not list or size != 1:
            raise DecodeError("a change of an object where there is none")
        changed = {}
        for pair in changes:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int \
                    or not 0 <= pair[0] < len(names):
                raise DecodeError(f"a change of a {cls.__name__} field it does not have")
            n = names[pair[0]]
            changed[n] = self.patch(getattr(old, n), pair[1])
        if not changed:
            return old
        kw = {n: getattr(old, n) for n in names}
        kept = {n: v for n, v in kw.items() if n not in changed and type(v) in _CONTAINERS}
        kw.update(changed)
        new = convert(kw, cls, what=cls.__name__)
        # Every field the patch left alone stays the same object, as it is in a local state (the window
        # skips a thread list or a note list that is the one it drew); msgspec made an equal copy of
        # each container. Set as the frozen dataclass's own __init__ sets its fields.
        for n, v in kept.items():
            object.__setattr__(new, n, v)
        return new

    def _patch_list(self, old, changes, size: int) -> list:
        if not isinstance(old, (tuple, list)) or type(changes) is not list or size != 1:
            raise DecodeError("a change of a list where there is none")
        out = list(old)
        for pair in changes:
            if type(pair) is not list or len(pair) != 2 or type(pair[0]) is not int \
                    or not 0 <= pair[0] < len(out):
                raise DecodeError("a list change at an index the list does not have")
            out[pair[0]] = self.patch(out[pair[0]], pair[1])
        return out

    def _patch_dict(self, old, form) -> dict:
        changes, gone = form.get("$dp"), form.get("del", [])
        if (not isinstance(old, dict) or type(changes) is not list or type(gone) is not list
                or set(form) - {"$dp", "del"}):
            raise DecodeError("a change of a dict where there is none")
        out = dict(old)
        for k in gone:
            out.pop(_key(k), None)
        for pair in changes:
            if type(pair) is not list or len(pair) != 2:
                raise DecodeError("a dict change that is not a [key, change] pair")
            k = _key(pair[0])
            out[k] = self.patch(out[k], pair[1]) if k in out else self.plain(pair[1])
        if len(out) > MAX_ITEMS:
            raise DecodeError(f"a dict of more than {MAX_ITEMS:,} entries")
        return out


def _key(k):
    if type(k) is not int and type(k) is not str:
        raise DecodeError("a dict key that is neither a number nor a string")
    return k


def _sparse(v) -> list:
    """{"$z": n, "i": [...], "v": [...]}: n zeros but at the indices i (the values are their type's to check)."""
    n, idx, vals = v.get("$z"), v.get("i"), v.get("v")
    if (type(n) is not int or not 0 <= n <= MAX_ITEMS or type(idx) is not list or type(vals) is not list
            or len(idx) != len(vals) or len(v) != 3):
        raise DecodeError("a sparse list that is not one")
    if idx and not (all(type(i) is int for i in idx) and 0 <= min(idx) and max(idx) < n):
        raise DecodeError("a sparse list with an index out of its range")
    out = [0] * n
    for i, x in zip(idx, vals):
        out[i] = x
    return out


def _unruns(runs) -> list:
    """{"$a": [start, step, count, ...]}: integers as arithmetic runs, bounded before they are made."""
    if type(runs) is not list or len(runs) % 3 or not _is_ints(runs):
        raise DecodeError("a list of runs that is not one")
    counts = runs[2::3]
    if min(counts, default=1) < 1 or sum(counts) > MAX_ITEMS:
        raise DecodeError("a list of runs with a bad count")
    out: list[int] = []
    for start, step, count in zip(runs[::3], runs[1::3], counts):
        out.extend(range(start, start + step * count, step) if step else [start] * count)
    if out and not (-MAX_INT < min(out) and max(out) < MAX_INT):
        raise DecodeError("a list of runs past 64 bits")
    return out


def _is_ints(v: list) -> bool:
    return all(type(x) is int for x in v)
