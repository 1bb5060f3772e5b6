"""The wire form of MachineState and the pin values (app/remote/codec.py): every real machine goes over and
comes back equal; ticks cost what changed and keep the objects that did not change; anything that is
not what its field declares is refused with DecodeError, never a crash."""
from __future__ import annotations

import dataclasses
import json
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.pinning.service import PinRequest, PinResult, PinTarget
from app.pinning.journal import JournalEntry
from app.remote.codec import Encoder, StateReceiver, StateSender, wire_schema
from app.remote.decode import DecodeError, Decoder
from app.remote.protocol import ProtocolError, dumps, loads
from app.sampling.sampler import Sampler
from app.sampling.machine_state import MachineState
from app.sysroot import SysRoot
from tests.machines import all_machines, extract
from tests.states import first_state

MACHINES = [m.name for m in all_machines()]


def _wire(form):
    """As the other side reads it: through the protocol's JSON."""
    return loads(dumps({"v": form}), "test")["v"]


@pytest.mark.parametrize("name", MACHINES)
def test_every_fixture_machine_goes_over_and_back(name):
    state = first_state(name)
    got = StateReceiver().apply(_wire(StateSender().form(state)))
    assert got == state
    assert type(got.topology.cpus) is tuple and got.topology.cpu(got.topology.online[0])


def test_a_capture_costs_nothing_per_tick_and_keeps_its_objects():
    s = Sampler(SysRoot(extract("master.internal")))
    snd, rcv = StateSender(), StateReceiver()
    first = rcv.apply(_wire(snd.form(s.tick())))
    line = dumps(snd.form(s.tick()))
    second = rcv.apply(loads(line, "test"))
    assert len(line) < 40           # only the generation moved
    assert second.generation == first.generation + 1
    assert second.topology is first.topology and second.sample is first.sample and second.irqs is first.irqs


def test_live_ticks_are_deltas_that_rebuild_the_same_states():
    s = Sampler(SysRoot("/"), interval=0.25)
    snd, rcv = StateSender(), StateReceiver()
    sizes, prev = [], None
    for i in range(4):
        if i:
            time.sleep(0.25)        # the sampler's interval (its least): each tick reads the threads again
        state = s.tick()
        line = dumps(snd.form(state))
        got = rcv.apply(loads(line, "test"))
        assert got == state
        if prev is not None:
            assert got.topology is prev.topology
            # A sleeping thread's sample is the same object tick after tick, here as there.
            same = [tid for tid, t in state.sample.tasks.tasks.items()
                    if prev.sample.tasks.tasks.get(tid) is not None and t is s_prev.sample.tasks.tasks.get(tid)]
            assert same and all(got.sample.tasks.tasks[t] is prev.sample.tasks.tasks[t] for t in same)
        sizes.append(len(line))
        prev, s_prev = got, state
    # The middle delta, not the largest: a process that starts many threads between two ticks (a JVM in
    # a test running beside this one) makes that one delta large; a sender of whole frames would send
    # every tick as large as the first.
    assert sorted(sizes[1:])[1] < sizes[0] / 2, sizes


def test_pin_values_and_journal_entries_go_over_and_back():
    schema = wire_schema()
    t = PinTarget("thread", 12, 10, "java")
    req = PinRequest((t, PinTarget("irq", 24)), (2, 3), "drop")
    res = [PinResult(t, True, "ok", "", (0, 1), (2, 3), (2, 3), None, 7, ""),
           PinResult(t, False, "denied", "thread 12 (java): needs the helper", None, (2,), None, None, 8)]
    entry = JournalEntry(1, "0123456789ab", 1, "pin", "/", "thread", 12, 10, "java", 555, (0, 1), (2,), 1.5e9,
                         "done", (2,), None, "ok", "")
    for tp, v in ((PinRequest, req), (list[PinResult], res), (list[JournalEntry], [entry, entry])):
        assert Decoder(schema, tp).decode(_wire(Encoder().encode(v))) == v


def test_equal_objects_in_one_message_are_sent_once():
    state = first_state("master.internal")
    form = Encoder().encode(state)
    text = json.dumps(form)
    assert text.count('"$r"') > 1000        # the IRQ table's rows are the sample's rows
    got = StateReceiver().apply(_wire(form))
    assert got.irqs.rows[5] is got.sample.interrupts.rows[5]


# -- refused -----------------------------------------------------------------------------------------------
def _target_form(**over):
    f = Encoder().encode(PinTarget("thread", 12, 10, "java"))
    f.update(over)
    return f


@pytest.mark.parametrize("form, words", [
    ({"$c": "PinTarget", "f": [True, 12, 10, "x", None]}, "PinTarget: kind: expected str, got bool"),
    ({"$c": "PinTarget", "f": ["thread", True, 10, "x", None]}, "PinTarget: id: expected int, got bool"),
    ({"$c": "PinTarget", "f": ["thread", 12.0, 10, "x", None]}, "PinTarget: id: expected int, got float"),
    ({"$c": "PinTarget", "f": ["thread", 12, 10]}, "with 3 fields"),
    ({"$c": "PinTarget", "f": ["bomb", 12, 10, "x", None]}, "pin target kind 'bomb'"),
    ({"$c": "PinTarget", "f": ["thread", 12, 10, "x", None], "k": 2}, "not spelled as one"),
    ({"$c": "Topology", "f": []}, "a Topology with 0 fields"),
    ({"$c": "Popen", "f": [["rm", "-rf"]]}, "'Popen': no class the wire carries"),
    ({"$r": 0}, "does not hold"),
    ({"$p": [[0, "irq"]]}, "does not spell"),
    ([1, 2], "PinTarget: expected object, got array"),
    ("thread", "PinTarget: expected object, got str"),
])
def test_a_value_that_is_not_what_its_field_declares_is_refused(form, words):
    with pytest.raises(DecodeError, match=words):
        Decoder(wire_schema(), PinTarget).decode(form)


@pytest.mark.parametrize("cpus, words", [
    ({"$z": 1 << 30, "i": [], "v": []}, "sparse"),
    ({"$z": 4, "i": [9], "v": [1]}, "out of its range"),
    ({"$a": [0, 1, 1 << 30]}, "bad count"),
    ({"$a": [0, 1 << 62, 4]}, "past 64 bits"),
    ({"$a": [0, 1]}, "not one"),
    ([0, "1"], r"cpus\[1\]: expected int, got str"),
    ([0, 1.5], r"cpus\[1\]: expected int, got float"),
    ([0, 1 << 16], r"cpus\[1\]: expected int <= 65535"),
    ({"$c": "PinTarget", "f": ["irq", 3, None, "", None]}, "expected array, got PinTarget"),
])
def test_lists_in_their_compact_forms_are_checked(cpus, words):
    form = Encoder().encode(PinRequest((PinTarget("irq", 3),), (1, 2)))
    form["f"][1] = cpus
    with pytest.raises(DecodeError, match=words):
        Decoder(wire_schema(), PinRequest).decode(form)


def test_infinity_cannot_come_in_a_number():
    """JSON has no infinity, but 1e999 parses to one: a rate field holding it is refused."""
    state = first_state("sno")
    text = json.dumps(Encoder().encode(state))
    bad = re.sub(r"(?<=[\[,])(\d+\.\d+)(?=[,\]])", "1e999", text, count=1)
    assert bad != text
    with pytest.raises(ProtocolError, match="1e999 is not a finite number"):
        loads(dumps({"state": "x"}).replace(b'"x"', bad.encode()), "test")


def test_a_change_before_a_whole_state_is_refused():
    with pytest.raises(DecodeError, match="before any whole state"):
        StateReceiver().apply({"$p": []})


def test_a_residency_holds_only_shares_of_cpus():
    dec = Decoder(wire_schema(), MachineState)
    state = first_state("sno")
    form = Encoder().encode(state)
    i = [f.name for f in dataclasses.fields(MachineState)].index("residency")
    for bad, words in (({"$d": [[1, {"$c": "PinTarget", "f": ["irq", 1, None, "", None]}]]},
                        r"residency\[...\]: expected object, got PinTarget"),
                       ({"$d": [[1, [[[[[[[[[[1]]]]]]]]]]]]}, r"residency\[...\]: expected object, got array"),
                       ({"$d": [[1, {"$d": [[70000, 0.5]]}]]}, r"residency\[...\] key: expected int <= 65535"),
                       ({"$d": [[1, {"$d": [[3, -0.5]]}]]}, r"residency\[...\]\[...\]: expected float >= 0")):
        f = json.loads(json.dumps(form))
        f["f"][i] = bad
        with pytest.raises(DecodeError, match="MachineState: " + words):
            dec.decode(f)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mangled_states_are_refused_or_decoded_never_a_crash(data):
    form = _SNO_FORM
    text = json.dumps(form)
    # Cut or replace one token of the real form with something else JSON can spell.
    pos = data.draw(st.integers(0, len(text) - 1))
    junk = data.draw(st.sampled_from(['null', 'true', '0', '-1', '1e308', '"x"', '[]', '{}', '{"$r":3}',
                                      '{"$p":[[99,1]]}', '{"$l":[[0,1]]}', '{"$z":3,"i":[0],"v":[1]}']))
    mangled = text[:pos] + junk + text[pos:]
    try:
        obj = json.loads(mangled)
    except ValueError:
        return
    try:
        got = StateReceiver().apply(obj)
    except DecodeError:
        return
    assert isinstance(got, MachineState)


_SNO_FORM = Encoder().encode(first_state("sno"))
