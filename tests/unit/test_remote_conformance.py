"""The services the window and the CLI use in two flavours, here and over ssh, are named by Protocols;
both flavours must have every member of theirs, with a signature a caller of the Protocol can use and
values of the declared types:

- MachineSource (app/sampling/sources.py): Sampler and RemoteSampler;
- RunningProbe (probes/runner.py): ProbeRun and RemoteProbeRun;
- ProbeStarter (probes/runner.py): ProbeRun.start and RemoteProbeRun.starter(...).

`problems()` is the check, on real instances (a fixture machine's Sampler, a real probe child, a
RemoteProbeRun over a scripted agent); the last tests give it classes that break each rule, so the
check is seen to fail.
"""
from __future__ import annotations

import inspect
import sys
import types
import typing

import pytest

from app.remote.hosts import HostSpec
from app.remote.probe_runs import RemoteProbeRun
from app.remote.sampler import RemoteSampler
from app.sampling.sampler import Sampler
from app.sampling.sources import MachineSource
from app.sysroot import SysRoot
from probes.runner import ProbeRun, ProbeStarter, RunningProbe
from tests.hostile.test_remote_agents import agent_script, connect
from tests.machines import extract

P = inspect.Parameter
POSITIONAL = (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)


# -- the check -------------------------------------------------------------------------------------------
def members(proto: type) -> dict[str, object]:
    """The Protocol's own members: its methods and properties (dunders only when it defines them
    itself, not those typing adds) and its annotated attributes (as None)."""
    out: dict[str, object] = {}
    for cls in reversed(proto.__mro__):
        if cls.__module__ in ("typing", "builtins"):
            continue
        for name, value in vars(cls).items():
            fn = value.fget if isinstance(value, property) else value
            if inspect.isfunction(fn) and fn.__module__ == proto.__module__:
                out[name] = value
        for name in getattr(cls, "__annotations__", {}):
            out.setdefault(name, None)
    return out


def fits(value, hint) -> bool:
    """`value` is of the annotated type (generics by their origin: list[dict] by list)."""
    if hint is typing.Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(fits(value, arm) for arm in typing.get_args(hint))
    if origin is not None:
        return isinstance(value, origin)
    if hint is None or hint is type(None):
        return value is None
    return isinstance(value, hint)


def signature_problems(where: str, wanted: inspect.Signature, given: inspect.Signature) -> list[str]:
    """What a caller of `wanted` could pass that `given` would refuse (self and cls already dropped)."""
    out = []
    params = list(given.parameters.values())
    positional = [p for p in params if p.kind in POSITIONAL]
    by_name = {p.name: p for p in params if p.kind in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY)}
    var_pos = any(p.kind is P.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind is P.VAR_KEYWORD for p in params)
    used: set[str] = set()
    at = 0
    for w in wanted.parameters.values():
        if w.kind in POSITIONAL:
            if at < len(positional):
                g = positional[at]
                used.add(g.name)
                if w.kind is P.POSITIONAL_OR_KEYWORD and g.name != w.name:
                    out.append(f"{where}: parameter {at + 1} is {g.name!r}, not {w.name!r}")
                if w.default is not P.empty and g.default is P.empty:
                    out.append(f"{where}: {g.name!r} has no default, and callers may leave it out")
            elif not var_pos:
                out.append(f"{where}: takes no {w.name!r}")
            at += 1
        elif w.kind is P.KEYWORD_ONLY:
            g = by_name.get(w.name)
            if g is None:
                if not var_kw:
                    out.append(f"{where}: takes no keyword {w.name!r}")
                continue
            used.add(g.name)
            if w.default is not P.empty and g.default is P.empty:
                out.append(f"{where}: {w.name!r} has no default, and callers may leave it out")
        elif w.kind is P.VAR_POSITIONAL and not var_pos:
            out.append(f"{where}: takes no *{w.name}")
        elif w.kind is P.VAR_KEYWORD and not var_kw:
            out.append(f"{where}: takes no **{w.name}")
    for g in params:
        if g.name not in used and g.kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD) and g.default is P.empty:
            out.append(f"{where}: requires {g.name!r}, which callers of the Protocol do not give")
    return out


def _without_self(fn) -> inspect.Signature:
    sig = inspect.signature(fn)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def problems(proto: type, impl) -> list[str]:
    """Every way `impl` (an instance, or a function for a Protocol of __call__) falls short of `proto`."""
    if set(members(proto)) == {"__call__"}:
        return signature_problems(f"{getattr(impl, '__name__', impl)}()", _without_self(proto.__call__),
                                  inspect.signature(impl))
    out = []
    kind = type(impl).__name__
    hints = typing.get_type_hints(proto)
    for name, wanted in members(proto).items():
        if not hasattr(impl, name):
            out.append(f"{kind} has no {name}")
            continue
        given = getattr(impl, name)
        if inspect.isfunction(wanted):
            if not inspect.ismethod(given):
                out.append(f"{kind}.{name} is not a method")
            else:
                out += signature_problems(f"{kind}.{name}", _without_self(wanted), inspect.signature(given))
            continue
        if inspect.ismethod(given):
            out.append(f"{kind}.{name} is a method, not a value")
            continue
        hint = typing.get_type_hints(wanted.fget).get("return") if isinstance(wanted, property) else hints[name]
        if hint is not None and not fits(given, hint):
            out.append(f"{kind}.{name} is {given!r}, not {hint}")
    return out


# -- the implementations ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def agent():
    """A scripted agent (tests/hostile) that answers a probe with exit status 0."""
    script = agent_script([], {"probe": [{"type": "event", "event": {"pid": 4242}},
                                         {"type": "event", "event": {"line": {"type": "done"}}},
                                         {"type": "result", "result": {"rc": 0, "stderr": []}}]})
    client = connect(script)
    yield client
    client.close()


def test_sampler_and_remote_sampler_are_machine_sources():
    assert problems(MachineSource, Sampler(SysRoot(extract("sno")))) == []
    assert problems(MachineSource, RemoteSampler(HostSpec("s1"))) == []


def test_a_probe_run_here_and_one_over_ssh_are_running_probes(agent):
    with ProbeRun([sys.executable, "-c", "print('{\"type\": \"done\"}')"]) as here:
        here.wait(30)
        assert problems(RunningProbe, here) == []
        assert here.lines == [{"type": "done"}]
    there = RemoteProbeRun(agent, "jitter", ["--cpu", "0"])
    assert there.wait(30) == 0
    assert problems(RunningProbe, there) == []
    assert there.lines == [{"type": "done"}] and there.pid == 4242


def test_both_starters_are_probe_starters(agent):
    assert problems(ProbeStarter, ProbeRun.start) == []
    assert problems(ProbeStarter, RemoteProbeRun.starter(lambda: agent)) == []


# -- the check fails where it should ----------------------------------------------------------------------
def _broken(members: dict, values: dict):
    """A Sampler with methods replaced by `members` (a subclass) and attributes set to `values`."""
    sampler = type("Broken", (Sampler,), members)(SysRoot(extract("sno")))
    for name, value in values.items():
        setattr(sampler, name, value(sampler) if callable(value) else value)
    return sampler


@pytest.mark.parametrize("members, values, said", [
    ({"tick": property(lambda self: None)}, {}, "Broken.tick is not a method"),
    ({"set_interval": lambda self, secs: secs}, {}, "Broken.set_interval: parameter 1 is 'secs', not 'seconds'"),
    ({"track": lambda self, tids, pids: None}, {}, "Broken.track: 'pids' has no default"),
    ({"forget_threads": lambda self, pids=None, *, now: None}, {}, "Broken.forget_threads: requires 'now'"),
    ({"refresh_topology": lambda self, cpus: None}, {}, "Broken.refresh_topology: requires 'cpus'"),
    ({}, {"live": lambda sampler: sampler.tick}, "Broken.live is a method, not a value"),
    ({}, {"generation": "7"}, "Broken.generation is '7', not <class 'int'>"),
    ({}, {"root": "/"}, "Broken.root is '/', not "),
])
def test_the_check_finds_a_source_that_does_not_conform(members, values, said):
    found = problems(MachineSource, _broken(members, values))
    assert any(p.startswith(said) for p in found), found


def test_the_check_finds_a_missing_member_and_a_starter_that_does_not_fit():
    class NoPoll(ProbeRun):
        poll = None
    run = NoPoll([sys.executable, "-c", "pass"])
    run.wait(30)
    assert "NoPoll.poll is not a method" in problems(RunningProbe, run)
    del run.argv
    assert "NoPoll has no argv" in problems(RunningProbe, run)

    def start(name: str, arguments=(), *, line=None):
        raise AssertionError("not called")
    assert problems(ProbeStarter, start) == ["start(): parameter 2 is 'arguments', not 'args'",
                                             "start(): takes no keyword 'on_line'"]
    assert problems(ProbeStarter, lambda name, args=(), *, on_line=None, env: None) == [
        "<lambda>(): requires 'env', which callers of the Protocol do not give"]
    assert problems(ProbeStarter, lambda *args, **kw: None) == []
