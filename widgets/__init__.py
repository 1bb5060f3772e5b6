"""All of coremap's Qt: the main window, topology view, tables, plots and the sampling thread."""

import sys as _sys

if _sys.version_info < (3, 12):
    def _guard_none_refcount() -> None:
        """Work around PySide6 builds that return None from void methods without a new reference.

        Harmless on Python >= 3.12, where None is immortal (PEP 683); on 3.11 every such call
        (QObject.setObjectName, QTimer.start, processEvents, QGraphicsItem.update...) drops None's
        refcount by one, and after a few thousand calls the interpreter aborts with "Fatal Python
        error: none_dealloc". Measured, not assumed: the guard is applied only when a void call is
        seen to take a reference it never gave, and then gives None references it cannot spend.
        """
        import ctypes

        from PySide6.QtCore import QObject
        probe = QObject()
        before = _sys.getrefcount(None)
        for _ in range(8):
            probe.setObjectName("probe")
        if _sys.getrefcount(None) < before:
            ctypes.c_ssize_t.from_address(id(None)).value += 1 << 40

    _guard_none_refcount()

    def _guard_bool_refcount() -> None:
        """The same for True: PySide6 6.12's SignalInstance.emit() returns True without a new
        reference, so every emit from Python (dataChanged per changed run, state_ready per tick...)
        drops True's refcount by one and the interpreter aborts with "bool_dealloc" after a few
        thousand emits. Measured on a probe signal; applied only when the loss is seen.
        """
        import ctypes

        from PySide6.QtCore import QObject, Signal

        class _Probe(QObject):
            ping = Signal()

        probe = _Probe()
        before = _sys.getrefcount(True), _sys.getrefcount(False)
        for _ in range(8):
            probe.ping.emit()
        for value, was in zip((True, False), before):
            lost = was - _sys.getrefcount(value)
            if lost > 0:
                ctypes.c_ssize_t.from_address(id(value)).value += (1 << 40) + lost

    _guard_bool_refcount()
