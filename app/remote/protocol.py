"""The wire between coremap and its agent: one JSON object per line, UTF-8, in both directions.

    agent  -> client   {"type": "hello", "coremap": "0.1.0", "protocol": 1, "host": ..., ...}   first
    client -> agent    {"id": 7, "op": "tick", ...params}                                       requests
    agent  -> client   {"id": 7, "type": "event", "event": {...}}    zero or more (streams: probes, runs)
                       {"id": 7, "type": "result", "result": ...}    the last one of a request, or
                       {"id": 7, "type": "error", "message": "..."}  (a sentence for the user)

Requests carry ids chosen by the client, so several can be under way on one connection (a tick while
a probe streams); the agent answers each exactly once with a result or an error. `PROTOCOL` rises
whenever a message changes meaning; the hello carries it and coremap's version, and a client refuses
an agent whose version is not its own, with one line naming both (client.py).

Everything read from the other side is bounded before it is parsed: a line longer than its limit
ends the connection (read_line), JSON's NaN and Infinity are refused (loads), and a message must be
an object whose `type` and `id` have the right types. Compact binary framing was not needed: the
states are sent as deltas (codec.py), and a tick of a 112-CPU machine is a few kB of JSON
(tests/benchmarks/bench_remote.py).
"""
from __future__ import annotations

import json

from app.errors import CoremapError
from app.parse.json_text import JsonInputError, load_json

PROTOCOL = 1
MiB = 1 << 20
# What the client accepts in one line: the first state of a 1,152-CPU machine (its interrupts table,
# every thread) is ~10 MB of JSON; a snapshot tarball travels in chunks (agent.py SNAPSHOT_CHUNK).
MAX_LINE = 64 * MiB
# What one decoded message may take: that first state is ~100 MB of Python objects. 64 MiB of
# `[{},{},...]` would be 1.6 GB, 18 GB for a fleet's eight connections at once.
MAX_MESSAGE_MEMORY = 256 * MiB
# What the agent accepts in one request: parameters only (CPU lists, argv, tids to follow).
MAX_REQUEST = 4 * MiB
MESSAGE_TYPES = ("hello", "boot", "event", "result", "error")
MAX_ID = 1 << 53


class ProtocolError(CoremapError):
    """A line from the other side that is not a message of this protocol."""


class LineTooLong(ProtocolError):
    """A line past its limit: the sender is broken or hostile; the connection is given up."""


def dumps(obj) -> bytes:
    """One message as a line. NaN and Infinity have no JSON spelling: refused (ValueError)."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False).encode() + b"\n"


def loads(raw: bytes, what: str) -> dict:
    """A message from one line: a JSON object; ProtocolError naming `what` (the sender) otherwise.
    Through the one decoder (app/inputs.py load_json): NaN and Infinity refused, nesting bounded, and
    the memory the message would take bounded by MAX_MESSAGE_MEMORY before it is decoded."""
    try:
        obj = load_json(raw, what=what, limit=MAX_LINE, memory=MAX_MESSAGE_MEMORY,
                        constants=False)
    except JsonInputError as e:
        raise ProtocolError(f"{what} sent a line that is not a message ({_short(str(e).partition(': ')[2])})") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} sent a line that is not a JSON object")
    return obj


def read_line(stream, limit: int, what: str) -> bytes | None:
    """The next line of a binary stream without its newline; None at the end of the stream.
    LineTooLong when it passes `limit` bytes (nothing past the limit is kept in memory)."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if len(line) > limit and not line.endswith(b"\n"):
        raise LineTooLong(f"{what} sent a line longer than {limit // MiB} MiB; the connection was closed")
    return line.rstrip(b"\n")


def check_message(msg: dict, what: str) -> dict:
    """`msg` when it is a message of this protocol (a known type; an integer id where one belongs)."""
    kind = msg.get("type")
    if kind not in MESSAGE_TYPES:
        raise ProtocolError(f"{what} sent a message of unknown type {_short(kind)}")
    if kind in ("event", "result", "error"):
        rid = msg.get("id")
        if type(rid) is not int or not 0 < rid < MAX_ID:
            raise ProtocolError(f"{what} sent a {kind} without a valid request id")
        if kind == "error" and not isinstance(msg.get("message"), str):
            raise ProtocolError(f"{what} sent an error without a message")
        if kind == "event" and not isinstance(msg.get("event"), dict):
            raise ProtocolError(f"{what} sent an event that is not an object")
    return msg


def request(rid: int, op: str, **params) -> bytes:
    return dumps({"id": rid, "op": op, **params})


def result(rid: int, value) -> bytes:
    return dumps({"id": rid, "type": "result", "result": value})


def error(rid: int, message: str) -> bytes:
    return dumps({"id": rid, "type": "error", "message": message})


def event(rid: int, value: dict) -> bytes:
    return dumps({"id": rid, "type": "event", "event": value})


def _short(v) -> str:
    return repr(str(v)[:60])
