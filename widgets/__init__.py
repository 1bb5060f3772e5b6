"""All of coremap's Qt: the main window, topology view, tables, plots and the sampling thread."""

import sys as _sys


def _refuse_leaky_pyside() -> None:
    """PySide6 6.12.0 on Python < 3.12 returns None from void methods and True from
    SignalInstance.emit() without a new reference; the window emits thousands of signals an hour and
    the interpreter aborts with "Fatal Python error: bool_dealloc". pyproject.toml keeps pip from
    installing it there; this catches a PySide6 that came from elsewhere, with a message instead of a
    crash an hour later. Measured (8 emits), not guessed from the version string.
    """
    if _sys.version_info >= (3, 12):
        return
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    before = _sys.getrefcount(True)
    for _ in range(8):
        probe.ping.emit()
    if _sys.getrefcount(True) < before:
        import PySide6
        raise ImportError(
            f"PySide6 {PySide6.__version__} leaks references on Python "
            f"{_sys.version_info.major}.{_sys.version_info.minor} and would crash the window; "
            "install an earlier one: pip install 'PySide6>=6.6,<6.12'")


_refuse_leaky_pyside()
