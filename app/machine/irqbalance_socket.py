"""Talking to a running irqbalance through its socket: what it leaves alone now, and telling it to leave
more (or less) alone, at run time, without a restart (issue 20).

irqbalance (1.7 and later, built with its UI) listens on /run/irqbalance/irqbalance<pid>.sock
(irqbalance.c init_socket, sock_handle). Each connection carries one command and is closed:

  setup                      -> "SLEEP <s> [IRQ <n> LOAD .. DIFF .. CLASS .. ]... BANNED <hex mask>": its
                                pass interval, the IRQs it leaves alone (--banirq and those set here) and
                                the CPUs it never places an IRQ on
  settings cpus <list>|NULL  the CPUs to leave alone, replacing what it worked out from
                             IRQBALANCE_BANNED_CPULIST, isolcpus and nohz_full (NULL: back to that);
                             it takes them at the start of its next pass
  settings ban irqs <n> ...|NONE   the IRQs to leave alone (replacing the list, --banirq's included);
                             read back by `setup` at once

It answers only a peer whose SCM_CREDENTIALS say uid 0, and silently closes on anyone else; so only
root (coremap as root, or coremap-helper) can use it. Before anything is sent the socket must be a
socket owned by root in root's folder, and the process serving it (SO_PEERCRED) must be the irqbalance
of the socket's name, running as root: a socket planted by someone else is never written to. Replies
are bounded in size and time.
"""
from __future__ import annotations

import os
import socket
import stat
import struct
import time
from dataclasses import dataclass

from app.errors import CoremapError, CpuListError
from app.parse.cpulist import format_cpulist, parse_cpumask
from app.sysroot import SysRoot

_REPLY_LIMIT = 1 << 16           # setup lists the banned IRQs: ~40 bytes each
TIMEOUT_S = 2.0                 # irqbalance answers from its main loop, between passes
_MAX_SLEEP_S = 60                # a pass interval beyond this is not waited for
_UCRED = struct.Struct("3i")


class IrqbalanceSocketError(CoremapError):
    """irqbalance's socket cannot be used (not root, a socket that is not irqbalance's, no answer)."""


@dataclass(frozen=True)
class IrqbalanceSetup:
    """What a running irqbalance says it leaves alone (its `setup` answer)."""
    pid: int
    sleep_s: int
    banned_cpus: tuple[int, ...]
    banned_irqs: tuple[int, ...]


def socket_path(root: SysRoot, pid: int):
    return root.path("run", "irqbalance", f"irqbalance{int(pid)}.sock")


def parse_setup(pid: int, text: str) -> IrqbalanceSetup:
    """`setup`'s answer, e.g. "SLEEP 10 IRQ 25 LOAD 0 DIFF 0 CLASS 0 BANNED 00000000,00000002"."""
    words = text.split()
    if len(words) < 4 or words[0] != "SLEEP" or "BANNED" not in words:
        raise IrqbalanceSocketError(f"irqbalance (pid {pid}) answered {text[:60]!r}, not its setup")
    try:
        sleep_s = int(words[1])
        at = words.index("BANNED")
        cpus = parse_cpumask(words[at + 1], what="irqbalance's banned CPUs") if at + 1 < len(words) else ()
        irqs = [int(words[i + 1]) for i in range(2, at) if words[i] == "IRQ" and words[i + 1].isdigit()]
    except (ValueError, IndexError, CpuListError) as e:
        raise IrqbalanceSocketError(f"irqbalance (pid {pid}) answered a setup coremap cannot read: {e}") from None
    if not 0 <= sleep_s <= 1 << 20:
        raise IrqbalanceSocketError(f"irqbalance (pid {pid}) says it sleeps {sleep_s} s")
    return IrqbalanceSetup(pid, sleep_s, tuple(cpus), tuple(sorted(set(irqs))))


def read_setup(root: SysRoot, pid: int) -> IrqbalanceSetup:
    return parse_setup(pid, _ask(root, pid, "setup", reply=True))


def ban_cpus(root: SysRoot, pid: int, cpus: tuple[int, ...] | None) -> None:
    """Tell irqbalance to leave `cpus` alone from its next pass; None: back to its own choice."""
    _ask(root, pid, "settings cpus " + (format_cpulist(cpus) if cpus else "NULL"), reply=False)


def ban_irqs(root: SysRoot, pid: int, irqs) -> None:
    """Tell irqbalance the whole list of IRQs to leave alone (replacing its list)."""
    irqs = sorted(set(int(i) for i in irqs))
    # irqbalance reads the list with strtoul until it reads a 0, so IRQ 0 (when banned) goes first.
    _ask(root, pid, "settings ban irqs " + (" ".join(map(str, irqs)) if irqs else "NONE"), reply=False)


def wait_for_cpus(root: SysRoot, pid: int, cpus: tuple[int, ...], sleep_s: int) -> IrqbalanceSetup:
    """Read setup until irqbalance bans exactly `cpus` or one pass (its interval and 2 s) has gone by."""
    deadline = time.monotonic() + min(sleep_s, _MAX_SLEEP_S) + 2.0
    while True:
        setup = read_setup(root, pid)
        if setup.banned_cpus == tuple(cpus) or time.monotonic() >= deadline:
            return setup
        time.sleep(0.05)


def _ask(root: SysRoot, pid: int, command: str, *, reply: bool) -> str:
    who = f"irqbalance (pid {pid})"
    if not root.is_live:
        raise IrqbalanceSocketError(f"{who} is spoken to only on the live machine, not on {root.root}")
    path = socket_path(root, pid)
    try:
        st = os.lstat(path)
        folder = os.lstat(path.parent)
    except OSError as e:
        raise IrqbalanceSocketError(f"{who} has no socket at {path} ({e.strerror}): it was built without its "
                                    "UI, or has exited") from None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != 0 or folder.st_uid != 0 or folder.st_mode & 0o022:
        raise IrqbalanceSocketError(f"{path} is not a socket of root's in a folder only root writes: not used")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        s.settimeout(TIMEOUT_S)
        try:
            s.connect(str(path))
            peer_pid, peer_uid, _ = _UCRED.unpack(s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        except OSError as e:
            raise IrqbalanceSocketError(f"{who} cannot be reached at {path}: {e.strerror or e}") from None
        if peer_pid != pid or peer_uid != 0 or _comm(root, pid) != "irqbalance":
            raise IrqbalanceSocketError(f"{path} is served by process {peer_pid} (uid {peer_uid}), not by irqbalance "
                                        f"(pid {pid}) as root: not used")
        creds = _UCRED.pack(os.getpid(), os.geteuid(), os.getegid())
        try:
            s.sendmsg([command.encode("ascii")], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
        except OSError as e:
            raise IrqbalanceSocketError(f"{who} could not be told {command!r}: {e.strerror or e}") from None
        if not reply:
            return ""
        return _read_reply(s, who)
    finally:
        s.close()


def _read_reply(s: socket.socket, who: str) -> str:
    chunks, size = [], 0
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(8192)
        except TimeoutError:
            raise IrqbalanceSocketError(f"{who} did not answer within {TIMEOUT_S:g} s") from None
        except OSError as e:
            raise IrqbalanceSocketError(f"{who} did not answer: {e.strerror or e}") from None
        if not chunk:
            break
        size += len(chunk)
        if size > _REPLY_LIMIT:
            raise IrqbalanceSocketError(f"{who} answered more than {_REPLY_LIMIT} bytes: not read")
        chunks.append(chunk)
    text = b"".join(chunks).decode("ascii", "replace")
    if not text:
        raise IrqbalanceSocketError(f"{who} answered nothing: it answers only root (run coremap as root, or let "
                                    "coremap-helper speak to it)")
    return text


def _comm(root: SysRoot, pid: int) -> str:
    try:
        return (root.read_optional(root.proc(pid, "comm")) or "").strip()
    except CoremapError:
        return ""
