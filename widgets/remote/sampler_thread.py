"""RemoteSamplerThread: widgets/sampler_thread.SamplerThread driving an app.remote.sampler.RemoteSampler.

The same signals, the same worker and the same clock as a local machine's (state_ready, tick_failed,
paused_changed, interval_changed, tick_seconds): the RemoteSampler is a MachineSource as Sampler is, so
MainWindow and the widgets cannot tell the difference except by `state.host` and `state.stale`.
`tick_seconds` is the round trip plus the server's own read. Stopping first closes the connection,
so a tick waiting on the network, or a reconnect waiting on ssh's connect timeout, ends at once
instead of holding the window's close for up to ten seconds.

The ssh of a reconnect is started from the worker thread and dies with it (PR_SET_PDEATHSIG follows
the thread that started the child): the connection lives exactly as long as this sampler thread.
"""
from __future__ import annotations

from app.remote.sampler import RemoteSampler
from widgets.sampler_thread import SamplerThread


class RemoteSamplerThread(SamplerThread):
    def __init__(self, sampler: RemoteSampler, parent=None):
        super().__init__(sampler, parent)

    @property
    def host(self):
        return self.sampler.host

    def stop(self, timeout_ms: int = 10000) -> None:
        self.sampler.close()
        super().stop(timeout_ms)
