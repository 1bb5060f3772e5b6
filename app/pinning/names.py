"""The name a pin gives a thread: the one ThreadNames.name (app/machine/thread_names.py) gives it
everywhere, its full Java name where the kernel cut its comm to 15 bytes, else its comm.

A pin's label is what the journal keeps, so it is what the result line, the Pins dock, `coremap
journal`, the guard's reports and the reports name the thread by, long after it has exited. The
window's drag payload carries the names its sampler read (widgets/pinning/mime.py); `coremap pin
--java` names the thread as the user did; `coremap pin --tid` asks here.
"""
from __future__ import annotations

from app.machine.java import full_thread_names
from app.machine.threads import read_tgid
from app.pinning.targets import PinTarget
from app.sysroot import SysRoot


def named_thread(root: SysRoot, tid: int) -> PinTarget:
    """Thread `tid` as a pin target, labelled with its name as read now: its JVM is asked for its full
    name (a thread dump, app/machine/java.py) only when its comm is cut and its process presents
    itself as a JVM. An exited thread is a bare target: the pin then says it is gone."""
    pid = read_tgid(root, tid)
    comm = root.read_first_line(root.task_dir(pid, tid, "comm")) if pid is not None else None
    if pid is None or comm is None:
        return PinTarget("thread", tid)
    return PinTarget("thread", tid, pid, full_thread_names([(pid, tid, comm)], root).name(pid, tid, comm))
