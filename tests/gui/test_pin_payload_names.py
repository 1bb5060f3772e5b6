"""The pin drag's full thread names (widgets/pinning/mime.py): carried for the threads that have one,
turned into the pins' labels, one Java thread pinned by its Java name; and a payload whose names are
not what the window writes is refused as a whole, with one line, before anything is pinned."""
from __future__ import annotations

import json

import pytest

from app.pinning.service import PinTarget
from widgets.pinning.mime import PIN_MIME, PinPayload, PinPayloadError, parse_pin_payload, payload_from_rows, pin_mime_data

FULL = "market-data-feed-handler-0"


def _parse(obj) -> PinPayload:
    return parse_pin_payload(json.dumps(obj).encode())


def test_names_ride_the_drag_and_become_labels():
    names = {(7, 8): FULL, (7, 9): "short"}           # a name of up to 15 bytes is its comm: not carried
    p = payload_from_rows([("thread", 8, 7), ("thread", 9, 7)], name_of=lambda pid, tid: names.get((pid, tid)))
    assert p == PinPayload("thread", (8, 9), 7, ((8, FULL),))
    back = parse_pin_payload(bytes(pin_mime_data(p).data(PIN_MIME).data()))
    assert back == p
    assert back.targets() == (PinTarget("thread", 8, 7, FULL), PinTarget("thread", 9, 7, ""))
    assert back.request((1,), "drop").java_name == ""            # two threads: no one name to follow
    one = PinPayload("thread", (8,), 7, ((8, FULL),))
    req = one.request((1,), "drop")
    assert (req.targets, req.cpus, req.origin, req.java_name) == ((PinTarget("thread", 8, 7, FULL),), (1,), "drop", FULL)
    # a process expanded to its threads names them too
    p = payload_from_rows([("process", 7, 7), ("thread", 10, 11)], tids_of=lambda pid: [8, 9],
                          name_of=lambda pid, tid: names.get((pid, tid)))
    assert p == PinPayload("thread", (8, 9, 10), None, ((8, FULL),))


@pytest.mark.parametrize("names", [
    [FULL],                                  # not an object
    {"9": FULL},                             # a thread the drag does not name
    {"8": 42},                               # not text
    {"8": "short"},                          # fits in comm: a drag never carries it
    {"8": "x" * 257},                        # longer than the journal keeps
    {"+8": FULL},                            # not a plain number
])
def test_a_payload_with_names_the_window_does_not_write_is_refused(names):
    with pytest.raises(PinPayloadError, match="^pin drag: "):
        _parse({"kind": "thread", "ids": [8], "pid": 7, "names": names})


def test_names_of_a_process_or_irq_drag_are_left_out():
    assert _parse({"kind": "irq", "ids": [24], "pid": None, "names": {"24": FULL}}) == PinPayload("irq", (24,))
