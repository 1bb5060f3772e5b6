"""How coremap spells every number, time, size, CPU list and recurring sentence: one rule each,
used by the CLI, the window, reports and probes alike, and tested once (tests/unit/test_format.py).

Pure functions, no Qt: a figure reads the same in a table cell, a tooltip, a report and a terminal.
KDAB hotspot keeps its one `formatTimeString(ns)` the same way (src/util.h).
"""
from __future__ import annotations

import html as _html
import math
from collections.abc import Iterable, Mapping, Sequence

from app.parse.cpulist import format_cpulist
from app.parse.task_stat import sched_label

UNKNOWN = "–"                  # a figure that is not known (never "0", which is a figure)
ARROW = "->"                   # before -> after: pin lines, the journal, reports (ASCII: greppable)
_DECIMAL_BELOW = 10.0          # below this a rate or percentage keeps one decimal: 0.4/s, 3.5%


# -- plain numbers ---------------------------------------------------------------------------------
def format_count(n: int | None) -> str:
    """'1,234,567'; '' when unknown."""
    if n is None:
        return ""
    return f"{n:,}"


def format_rate(per_s: float | None) -> str:
    """'12,345/s', '3.5/s', '0/s'; '' when unknown."""
    if per_s is None:
        return ""
    if per_s == 0:
        return "0/s"
    if abs(per_s) < _DECIMAL_BELOW:
        return f"{per_s:.1f}/s"
    return f"{per_s:,.0f}/s"


def format_percent(p: float | None) -> str:
    """'37%', '3.5%', '0%' (CPU % of one CPU: a thread busy on two CPUs' worth shows 200%); '' when
    unknown. 9.96 rounds to '10%', never '10.0%'."""
    if p is None:
        return ""
    if p == 0:
        return "0%"
    if abs(p) < _DECIMAL_BELOW - 0.05:
        return f"{p:.1f}%"
    return f"{p:.0f}%"


def format_share(share: float | None) -> str:
    """A share of a whole (0.00685 of the time) as format_percent spells it ('0.7%'); '' when unknown."""
    return format_percent(None if share is None else share * 100)


def format_ratio(r: float | None) -> str:
    """'0.42×', '1.00×', '12.3×' (after / before, this / peer); UNKNOWN when unknown."""
    if r is None or (isinstance(r, float) and not math.isfinite(r)):
        return UNKNOWN
    return f"{r:.3g}×" if r >= 10 else f"{r:.2f}×"


def format_compact(v: float | None) -> str:
    """A short figure for a grid cell, a legend or an axis: 0, 7, 3.5, 12, 1.2k, 35k, 1M, 2.5G;
    UNKNOWN when unknown. Two significant digits below 10 of a unit, whole numbers above."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return UNKNOWN
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div * 0.9995:
            return _trim(v / div) + suffix
    return _trim(v)


def format_factor(x: float | None) -> str:
    """How many times one figure is another: '1.3x', '3.1x', '12x', '0.5x'; UNKNOWN when unknown.
    One decimal below 10 (a probe's 1.1x is not its 1.4x), whole numbers above."""
    if x is None or not math.isfinite(x):
        return UNKNOWN
    return f"{x:.1f}x" if abs(x) < 9.95 else f"{x:.0f}x"


def plural(n: int, word: str, many: str | None = None) -> str:
    """A count and its noun, agreeing: '1 thread', '0 threads', '1,234 threads', '1 process',
    '2 processes' (`many` for a plural that is not `word` + 's'). The one rule, so no line of the
    window, a report or the CLI says '1 threads'."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def _trim(x: float) -> str:
    if abs(x) < 9.95 and x != int(x):
        return f"{x:.1f}".rstrip("0").rstrip(".")
    return f"{x:.0f}"


# -- time and size -----------------------------------------------------------------------------------
def format_ns(ns: float | None) -> str:
    """A duration given in nanoseconds, three significant digits: '29.2 ns', '1.5 µs', '12.3 ms',
    '2 s'; UNKNOWN when unknown."""
    if ns is None:
        return UNKNOWN
    ns = float(ns)
    if not math.isfinite(ns):
        return UNKNOWN
    for div, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if abs(ns) >= div * 0.9995:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def format_size(nbytes: int | None) -> str:
    """Binary size: '48 KiB', '1.25 MiB', '24 MiB', '512 B'; '?' when unknown."""
    if nbytes is None:
        return "?"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            v = nbytes / (1 << shift)
            return f"{v:.2f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{nbytes} B"


# -- CPU lists ---------------------------------------------------------------------------------------
def format_cpus(cpus: Iterable[int] | None) -> str:
    """The kernel's list spelling ('0-3,8'); '' for unknown; 'none' for an empty set."""
    if cpus is None:
        return ""
    s = format_cpulist(cpus)
    return s if s else "none"


def format_change(before: Iterable[int] | None, after: Iterable[int] | None, kind: str = "thread") -> str:
    """'0-3 -> 2': a value before and after a change (a CPU set unless `kind` says otherwise:
    format_value); '?' for a side that is not known."""
    return f"{format_value(kind, before)} {ARROW} {format_value(kind, after)}"


def cpus_word(cpus: Iterable[int]) -> str:
    """'CPU 3' or 'CPUs 2-5,8' (never 'CPUs 1')."""
    cpus = sorted(set(cpus))
    return f"CPU{'s' if len(cpus) != 1 else ''} {format_cpus(cpus)}"


# -- what a pin names -------------------------------------------------------------------------------
_MASK_NAMES = {"irqdefault": "default IRQ affinity", "workqueue": "workqueue cpumask",
               "watchdog": "watchdog cpumask", "subtree": "cgroup v2 cpuset controller"}
# The cpuset cgroups coremap puts tasks in, by the index a journal records (app/pinning/kinds.py
# "member"): the hierarchy's root, the shield holding everything else, and the one of the threads
# pinned onto quiet CPUs.
CPUSET_NAMES = ("/", "/coremap-system", "/coremap-pinned")
# The systemd units whose AllowedCPUs= keeps quiet CPUs free under systemd, by index.
SLICE_NAMES = ("system.slice", "user.slice", "init.scope")
# Transparent huge pages' modes (sys/kernel/mm/transparent_hugepage/enabled) and the cpufreq governors
# coremap can give back, by the index a journal records (kinds thp and governor, app/pinning/settings.py).
THP_MODES = ("always", "madvise", "never")
GOVERNORS = ("performance", "powersave", "schedutil", "ondemand", "conservative", "userspace")
# A journal value holds integers 0-65535; a number outside that (sched_rt_runtime_us: 950000, or -1) is
# kept as (sign, high 16 bits, low 16 bits), so every knob's value from before goes back exactly.
_DIGIT = 1 << 16
WIDE_LIMIT = 1 << 32


def number_value(n: int) -> tuple[int, ...]:
    """A setting's number as a journal value: (n,) for 0-65535, else (sign, high, low); ValueError
    beyond 32 bits (no knob coremap sets holds more)."""
    if 0 <= n < _DIGIT:
        return (n,)
    if abs(n) >= WIDE_LIMIT:
        raise ValueError(f"{n} is beyond the 32-bit numbers coremap journals")
    return (1 if n < 0 else 0, abs(n) // _DIGIT, abs(n) % _DIGIT)


def value_number(value) -> int | None:
    """number_value's inverse: the number a journal value holds; None for () ("n/a") or a value of
    another shape."""
    value = tuple(value)
    if len(value) == 1:
        return value[0]
    if len(value) == 3 and value[0] in (0, 1) and all(0 <= v < _DIGIT for v in value[1:]):
        n = value[1] * _DIGIT + value[2]
        return -n if value[0] else n
    return None


def target_name(kind: str, ident: int, label: str = "", netdev: str | None = None) -> str:
    """The one spelling of a pin target, wherever it is named (result lines, the journal, the guard,
    previews, reports): "thread 1234 (java)", "process 77", "IRQ 24 (ttyS0)", "default IRQ affinity",
    "workqueue cpumask", "RPS eth0 rx-0", "XPS eth0 tx-3", "workqueue writeback cpumask",
    "kernel.timer_migration", "CPU 1 PM QoS resume latency", "cpuset /coremap-system", "process 77
    (java) cpuset". `label` and `netdev` come from the machine: they are made printable here, so no
    caller can forget."""
    if kind in _MASK_NAMES:
        return _MASK_NAMES[kind]
    if kind in ("rps", "xps"):
        return f"{kind.upper()} {printable(netdev or '?')} {'rx' if kind == 'rps' else 'tx'}-{ident}"
    if kind == "wq":
        return f"workqueue {printable(netdev or '?')} cpumask"
    if kind == "sysctl":
        return printable(label) if label else f"sysctl #{ident}"
    if kind == "pmqos":
        return f"CPU {ident} PM QoS resume latency"
    if kind == "governor":
        return f"CPU {ident} cpufreq governor"
    if kind == "epb":
        return f"CPU {ident} energy_perf_bias"
    if kind == "thp":
        return "transparent huge pages"
    if kind == "dmalatency":
        return "/dev/cpu_dma_latency"
    if kind == "cpuset":
        return f"cpuset {CPUSET_NAMES[ident] if 0 <= ident < len(CPUSET_NAMES) else ident}"
    if kind == "slice":
        return f"{SLICE_NAMES[ident] if 0 <= ident < len(SLICE_NAMES) else ident} AllowedCPUs"
    if kind in ("irqbalancecpu", "irqbalanceirq"):
        return f"irqbalance for {'CPU' if kind == 'irqbalancecpu' else 'IRQ'} {ident}"
    if kind == "sched":
        return f"thread {ident}" + (f" ({printable(label)})" if label else "") + " scheduling"
    if kind in ("cgroup", "cgroupthread"):
        word = "process" if kind == "cgroup" else "thread"
        return f"{word} {ident}" + (f" ({printable(label)})" if label else "") + " cpuset"
    word = "IRQ" if kind == "irq" else kind
    return f"{word} {ident}" + (f" ({printable(label)})" if label else "")


def format_value(kind: str, value) -> str:
    """A target's value as the kind means it (app/pinning/kinds.py): a CPU list, a number ("n/a" when
    unset), a cpuset's name, on/off; "?" when not known."""
    if value is None:
        return "?"
    value = tuple(value)
    if kind in ("sysctl", "pmqos", "epb"):
        n = value_number(value)
        return "n/a" if not value else str(n) if n is not None else "?"
    if kind in ("thp", "governor"):
        words = THP_MODES if kind == "thp" else GOVERNORS
        return words[value[0]] if len(value) == 1 and 0 <= value[0] < len(words) else "?"
    if kind == "dmalatency":
        return f"held at {value[0]} µs" if len(value) == 1 else "not held" if not value else "?"
    if kind == "sched":
        return sched_label(*value) if len(value) == 2 else "?"
    if kind in ("cgroup", "cgroupthread"):
        return CPUSET_NAMES[value[0]] if len(value) == 1 and 0 <= value[0] < len(CPUSET_NAMES) else "?"
    if kind == "subtree":
        return "on" if value == (1,) else "off"
    if kind in ("irqbalancecpu", "irqbalanceirq"):
        return "leaves it alone" if value == (1,) else "balances it" if value == (0,) else "?"
    if kind == "cpuset" and not value:
        return "absent"
    if kind == "slice" and not value:
        return "all"
    return format_cpus(value)


# -- per-CPU spreads --------------------------------------------------------------------------------
def per_cpu_pairs(per_cpu, cpus: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """(cpu, value) pairs from a {cpu: value} mapping or a sequence aligned with `cpus`.

    Rates and counts arrive both ways: rates keyed by CPU id, /proc/interrupts counts as columns in
    header order (which skip offline CPUs, so column i is not CPU i: kernel/irq/proc.c
    show_interrupts prints only online CPUs).
    """
    if per_cpu is None:
        return []
    if isinstance(per_cpu, Mapping):
        return [(int(c), v) for c, v in per_cpu.items()]
    if cpus is None:
        cpus = range(len(per_cpu))
    return list(zip(cpus, per_cpu))


def nonzero_pairs(per_cpu, cpus: Sequence[int] | None = None) -> list[tuple[int, float]]:
    """Like per_cpu_pairs, keeping only CPUs with a non-zero value."""
    return [(c, v) for c, v in per_cpu_pairs(per_cpu, cpus) if v]


def shares_of(pairs: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """(cpu, fraction of the total) for non-zero (cpu, value) pairs, largest first."""
    total = float(sum(v for _, v in pairs))
    if total <= 0:
        return []
    return sorted(((c, v / total) for c, v in pairs), key=lambda cf: (-cf[1], cf[0]))


def spread(per_cpu, cpus: Sequence[int] | None = None, *, top: int = 3) -> list[tuple[int, float]]:
    """The CPUs carrying a load, largest share first, as (cpu, fraction of the total) pairs; only CPUs
    with a non-zero value appear; `top` limits the list (0 = all)."""
    shares = shares_of(nonzero_pairs(per_cpu, cpus))
    return shares[:top] if top else shares


def format_shares(shares: list[tuple[int, float]], *, top: int = 3) -> str:
    """'3: 61% · 7: 39%' from shares_of(); '+5 CPUs' appended when more CPUs share the load."""
    if not shares:
        return ""
    shown = shares[:top] if top else shares
    text = " · ".join(f"{c}: {_share_text(frac)}" for c, frac in shown)
    rest = len(shares) - len(shown)
    if rest > 0:
        text += f" · +{rest} CPU{'s' if rest > 1 else ''}"
    return text


def _share_text(frac: float) -> str:
    pct = frac * 100
    return "<1%" if 0 < pct < 0.5 else f"{pct:.0f}%"


# -- sentences ---------------------------------------------------------------------------------------
def offline_sentence(offline: Sequence[int], online: Iterable[int]) -> str:
    """'CPU 3 is offline; choose among the online CPUs 0-2' (the same words wherever a CPU list
    is checked: pins, the Pin to… dialog, the probe panel, the helper)."""
    s = len(offline) != 1
    return (f"{cpus_word(offline)} {'are' if s else 'is'} offline; choose among the online "
            f"CPUs {format_cpus(sorted(online)) or 'none'}")


def unknown_cpus_sentence(missing: Sequence[int], known: Iterable[int]) -> str:
    """'CPU 999 does not exist on this machine; it has CPUs 0-1'."""
    s = len(missing) != 1
    return (f"{cpus_word(missing)} {'do' if s else 'does'} not exist on this machine; it has CPUs "
            f"{format_cpus(sorted(known)) or 'none'}")


def needs_helper_sentence(what: str, *, whose: str = "") -> str:
    """The one sentence for a write the user may not make: "thread 12 (x) belongs to another user;
    needs the helper: …" / "workqueue cpumask: needs the helper: …". `whose` says why, when it is known."""
    return (f"{what}{' ' + whose + ';' if whose else ':'} needs the helper: choose Retry with privileges in "
            "the window, run coremap with sudo, or install the org.coremap.helper polkit action (`coremap desktop` "
            "says where)")


# Bidirectional overrides and isolates (U+202A-U+202E, U+2066-U+2069) reorder the text that follows
# them on a terminal and in a browser ("Trojan Source", CVE-2021-42574): "evil\u202egnp.exe" shows as
# "evilexe.png". Like every control character they are Unicode category C (Cf), which str.isprintable()
# counts as not printable; tests/unit/test_format.py names them so that a change would show.
BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def printable(text, *, html: bool = False) -> str:
    """The one way a string from outside (a thread, process, device or host name, a file name of a
    capture, a line from another machine) is shown: control characters (ANSI escapes, newlines that
    would forge a line, carriage returns, BEL) and bidi overrides become \\x.. / \\u.... escapes;
    everything else is kept as it is. With `html`, for reports: newlines and tabs are kept (a page
    cannot forge a terminal line; a probe's text keeps its lines) and the result is HTML-escaped,
    quotes included. Anything not a str is shown as str() of it."""
    s = text if type(text) is str else str(text)
    if html:
        return _html.escape(printable_lines(s), quote=True)
    if not s.isprintable():
        s = "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in s)
    return s


def printable_lines(text: str) -> str:
    """Text of many lines from another machine (a command's output over ssh) safe for a terminal:
    like printable(), but newlines and tabs are kept."""
    if text.replace("\n", "").replace("\t", "").isprintable():
        return text
    return "".join(ch if ch in "\n\t" or ch.isprintable() else ascii(ch)[1:-1] for ch in text)


MAX_COMMAND_NAME = 48


def command_name(comm: str, cmdline: str) -> str:
    """What a process is running, short, for a process whose threads all carry its own name (Python,
    Node and other runtimes name threads only inside the process, so /proc/TID/comm is "python3" for
    every thread of every script): comm and the script or module, "python3 serve.py",
    "python3 -m http.server", "python3 -c"; comm alone when the command line names nothing more
    (kernel threads have none)."""
    words = cmdline.split()
    rest = iter(words[1:])
    for w in rest:
        if w in ("-m", "-c"):
            module = next(rest, "") if w == "-m" else ""
            return f"{comm} {w} {module}".rstrip()[:MAX_COMMAND_NAME]
        if not w.startswith("-"):
            script = w.rstrip('/').rsplit('/', 1)[-1]
            if script[:15] == comm[:15]:
                # A script run by its shebang has its own name as comm (at most 15 bytes): "coremap",
                # not "coremap coremap"; the whole name where the kernel cut it.
                return script[:MAX_COMMAND_NAME]
            return f"{comm} {script}"[:MAX_COMMAND_NAME]
    return comm


def probe_exit_sentence(what: str, returncode: int | None, stderr_lines) -> str | None:
    """Why a probe child that sent no `error` line failed: `what`, its exit status and its last
    stderr lines; None while it runs (None) or when it exited 0. Local and remote runs say it alike."""
    if returncode in (0, None):
        return None
    tail = "; ".join(list(stderr_lines)[-3:])
    return f"{what}: the probe exited with status {returncode}" + (f": {tail}" if tail else "")
