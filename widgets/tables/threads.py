"""Processes and their threads: a two-level tree, updated in place every tick.

`ThreadTreeModel.set_state(state)` applies one MachineState. Processes are top-level rows (sorted by
pid), threads their children (sorted by tid). Threads and processes that appear or exit are inserted
or removed with begin/endInsertRows and begin/endRemoveRows; every other change is a dataChanged for
the cells whose text changed. The model is never reset on a tick, so the views' selection, expansion
and scroll position survive.

Index scheme: a process index carries internalId 0, a thread index carries its process's pid + 1, so
`parent()` is one dict lookup and no Python object has to outlive a call through Qt.
"""
from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QAbstractItemModel, QEvent, QItemSelection, QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLineEdit, QToolTip, QVBoxLayout, QWidget

from app.format import plural
from app.machine.thread_names import NO_THREAD_NAMES, comm_of, shown_thread_name
from app.machine.threads import name_matcher, search_text
from app.machine.usage import process_facts
from app.parse.task_stat import THREAD_KINDS
from app.sampling.machine_state import MachineState
from widgets.pinning.drag import PinDragTreeView
from widgets.pinning.mime import PIN_MIME, payload_from_rows, pin_mime_data
from widgets.tables.rows import changed_columns, emit_changed, fill_span, sync_rows
from widgets.tables.thread_cells import (
    COL_CPU,
    COL_ID,
    COL_MIGR,
    COL_NAME,
    COL_PCT,
    process_cells,
    shown_name,
    steady,
    thread_rows,
    threads_by_pid,
)
from widgets.text_line import TextLine

SORT_ROLE = Qt.ItemDataRole.UserRole + 1
FILTER_ROLE = Qt.ItemDataRole.UserRole + 2    # case-folded text the filter looks in (threads.py search_text)
ID_ROLE = Qt.ItemDataRole.UserRole + 3        # ("process", pid) or ("thread", tid)
KIND_ROLE = Qt.ItemDataRole.UserRole + 4      # a thread's kind (app/parse/task_stat.py THREAD_KINDS); None for a process

# In the order of the COL_* numbers (widgets/tables/thread_cells.py), which the cells follow too.
_HEADERS = ("Name", "PID / TID", "Last CPU", "CPU %", "Migrations/s", "Allowed CPUs", "State", "Policy")
_NUMERIC = (COL_ID, COL_CPU, COL_PCT, COL_MIGR)

# Qt calls data(), index(), parent() and flags() thousands of times a tick (the sorting proxy and the
# painted rows); PySide6's enums are Python enums, and every attribute lookup or `|` on them costs a
# Python call. The roles and flags are therefore plain ints and one precomputed value here.
_DISPLAY = int(Qt.ItemDataRole.DisplayRole)
_TOOLTIP = int(Qt.ItemDataRole.ToolTipRole)
_FOREGROUND = int(Qt.ItemDataRole.ForegroundRole)
_ALIGN = int(Qt.ItemDataRole.TextAlignmentRole)
_SORT, _FILTER, _ID, _KIND = int(SORT_ROLE), int(FILTER_ROLE), int(ID_ROLE), int(KIND_ROLE)
_SERVED = frozenset((_DISPLAY, _TOOLTIP, _FOREGROUND, _ALIGN, _SORT, _FILTER, _ID, _KIND))
_SLOT = {_DISPLAY: 0, _SORT: 1, _TOOLTIP: 2, _FOREGROUND: 3}     # role -> its place in a cell
_RIGHT = int((Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value)
_ITEM_FLAGS = Qt.ItemFlag.ItemIsSelectable | Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsDragEnabled
_NO_FLAGS = Qt.ItemFlag.NoItemFlags
_INVALID = QModelIndex()
_NCOLS = len(_HEADERS)
_NAME_WIDTH_MAX = 480        # pixels the name column grows to for long Java names


@dataclass(slots=True)
class _Contents:
    """What the tree shows for one MachineState, by pid (ThreadTreeModel._contents builds it)."""
    pcells: dict[int, tuple]                # pid -> cells of its row
    pfilter: dict[int, str]                 # pid -> the filter text of its row
    tcells: dict[int, dict[int, tuple]]     # pid -> {tid: cells}, in row order
    tfilter: dict[int, dict[int, str]]      # pid -> {tid: filter text}
    tids: dict[int, list[int]]              # pid -> its tids, in row order
    keys: dict[int, tuple]                  # pid -> (threads, rates, comm, cmdline, names) its cells come from
    built: dict[int, dict[int, tuple]]      # pid -> {tid: ((task, rate, comm), cells, filter)}
    changed: list[int]                      # pids whose cells were rebuilt, ascending


def _flags(index) -> Qt.ItemFlag:
    """A row's flags, process or thread: what QAbstractItemModel::flags gives a valid index
    (selectable, enabled), plus drag."""
    return _ITEM_FLAGS if index.isValid() else _NO_FLAGS


class ThreadTreeModel(QAbstractItemModel):
    """Processes (top level) and their threads (children). Roles: DisplayRole, SORT_ROLE, FILTER_ROLE,
    ID_ROLE, ToolTipRole, ForegroundRole (kernel threads greyed), TextAlignmentRole."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._pids: list[int] = []
        self._pid_row: dict[int, int] = {}
        self._tids: dict[int, list[int]] = {}          # pid -> its tids, in row order
        self._tid_row: dict[int, dict[int, int]] = {}   # pid -> {tid: row}
        self._pcells: dict[int, tuple] = {}             # pid -> cells of its row
        self._tcells: dict[int, dict[int, tuple]] = {}  # pid -> {tid: cells}
        self._pfilter: dict[int, str] = {}
        self._tfilter: dict[int, dict[int, str]] = {}   # pid -> {tid: filter text}
        self._pkey: dict[int, tuple] = {}      # pid -> (threads, rates, comm, cmdline) its cells come from
        self._built: dict[int, dict[int, tuple]] = {}  # pid -> {tid: ((task, rate, comm), cells, filter)}
        self.live = False                  # the state applied last is of the live machine
        self.generation = -1
        self.thread_names = NO_THREAD_NAMES  # the state's full Java names (app/machine/thread_names.py)

    # -- the one way in ---------------------------------------------------------------------
    def set_state(self, state: MachineState) -> None:
        """Apply one MachineState without resetting: rows in/out for threads that came or went,
        dataChanged for the cells whose text changed.

        Most processes did not run since the last state; the sampler then hands out the very same
        TaskSample and TaskRate objects (app/machine/threads.py, app/sampling/sampler.py), so a process whose
        threads, rates, name and command line compare equal (by identity first, which is what tuple
        comparison tries) keeps its cells without a look at each thread."""
        self.generation = state.generation
        self.live = bool(state.live)
        self.thread_names = state.thread_names
        old_pcells, old_tcells = self._pcells, self._tcells
        new = self._contents(state)
        self._pkey, self._built = new.keys, new.built
        self._move_rows(new)
        self._pcells, self._tcells = new.pcells, new.tcells
        self._pfilter, self._tfilter = new.pfilter, new.tfilter
        self._announce_cells(old_pcells, old_tcells, new)

    def _contents(self, state: MachineState) -> _Contents:
        """Every row's cells for `state`: a process whose inputs (see set_state) did not change keeps
        its cells and its thread rows; a changed one is rebuilt, reusing its unchanged threads' cells."""
        sample = state.sample.tasks
        rtasks = state.rates.tasks if state.rates is not None else {}
        tasks = sample.tasks if sample is not None else {}
        processes = sample.processes if sample is not None else {}
        old_pcells, old_tcells = self._pcells, self._tcells
        old_pfilter, old_tfilter = self._pfilter, self._tfilter
        old_key, old_built, old_tids = self._pkey, self._built, self._tids
        # Plain local dicts, not attributes of the result: this loop runs once per process per tick.
        pcells: dict[int, tuple] = {}
        tcells: dict[int, dict[int, tuple]] = {}
        pfilter: dict[int, str] = {}
        tfilter: dict[int, dict[int, str]] = {}
        tids: dict[int, list[int]] = {}
        keys: dict[int, tuple] = {}
        built: dict[int, dict[int, tuple]] = {}
        changed: list[int] = []
        get_rate = rtasks.get
        names = state.thread_names
        jnames, junread = names.names, names.unavailable
        for pid, threads in threads_by_pid(tasks, processes).items():
            info = processes.get(pid)
            if info is not None:
                comm, cmdline = info.comm, info.cmdline
            else:
                comm = next((t for t in threads if t.tid == pid), threads[0]).comm
                cmdline = ""
            rlist = [get_rate(t.tid) for t in threads]
            # The per-pid names dict is the same object while its JVM was not read again.
            key = (tuple(threads), tuple(rlist), comm, cmdline, jnames.get(pid), junread.get(pid))
            keys[pid] = key
            if pid in old_pcells and pid in old_tcells and old_key.get(pid) == key:
                pcells[pid] = old_pcells[pid]
                pfilter[pid] = old_pfilter[pid]
                tcells[pid] = old_tcells[pid]
                tfilter[pid] = old_tfilter[pid]
                tids[pid] = old_tids[pid]
                built[pid] = old_built.get(pid, {})
                continue
            changed.append(pid)
            shown = shown_name(comm, cmdline, threads)
            pcells[pid] = steady(old_pcells.get(pid), process_cells(pid, comm, cmdline, threads, rlist, shown,
                                                                   names.read_line(pid)))
            pfilter[pid] = search_text(comm, cmdline, str(pid))
            built[pid], tcells[pid], tfilter[pid] = thread_rows(threads, rlist, comm, old_built.get(pid, {}), shown,
                                                                names)
            tids[pid] = list(tcells[pid])
        changed.sort()
        return _Contents(pcells, pfilter, tcells, tfilter, tids, keys, built, changed)

    def _move_rows(self, new: _Contents) -> None:
        """Processes that came or went, then threads that came or went in the rebuilt processes, as
        row moves. During them views may ask for any row, old or new: both are served."""
        old_tcells, old_tfilter = self._tcells, self._tfilter
        self._pcells = {**self._pcells, **new.pcells}
        self._pfilter = {**self._pfilter, **new.pfilter}
        self._tcells = {**old_tcells, **new.tcells}
        self._tfilter = {**old_tfilter, **new.tfilter}
        for pid in new.changed:
            if pid in old_tcells:
                self._tcells[pid] = {**old_tcells[pid], **new.tcells[pid]}
                self._tfilter[pid] = {**old_tfilter[pid], **new.tfilter[pid]}
        new_pids = sorted(new.pcells)
        for pid in new_pids:
            if pid not in self._tids:          # a new process arrives with its threads
                self._tids[pid] = list(new.tids[pid])
                self._tid_row[pid] = {tid: r for r, tid in enumerate(new.tids[pid])}
        if not sync_rows(self, _INVALID, self._pids, new_pids, self._reindex_pids):
            raise AssertionError("pid lists are both sorted; sync_rows cannot refuse them")
        for pid in list(self._tids):
            if pid not in self._pid_row:       # its process row is gone, and its threads with it
                del self._tids[pid]
                del self._tid_row[pid]
        for pid in new.changed:
            have, want = self._tids[pid], new.tids[pid]
            if have != want:
                parent = self.createIndex(self._pid_row[pid], 0, 0)
                sync_rows(self, parent, have, want, lambda p=pid: self._reindex_tids(p))

    def _announce_cells(self, old_pcells: dict, old_tcells: dict, new: _Contents) -> None:
        """dataChanged for the cells of rebuilt processes and threads whose text changed (rows that
        just arrived came with their cells)."""
        changes = []
        for pid in new.changed:
            old = old_pcells.get(pid)
            cells = new.pcells[pid]
            if old is not None and old is not cells and old != cells:
                changes.append((self._pid_row[pid], changed_columns(old, cells)))
            olds = old_tcells.get(pid)
            if not olds:
                continue                       # a new process: its rows arrived with their cells
            tchanges = []
            rows = self._tid_row[pid]
            for tid, cells in new.tcells[pid].items():
                old = olds.get(tid)
                if old is not None and old is not cells and old != cells:
                    tchanges.append((rows[tid], changed_columns(old, cells)))
            if tchanges:
                tchanges.sort()
                emit_changed(self, tchanges, self.createIndex(self._pid_row[pid], 0, 0))
        if changes:
            changes.sort()
            emit_changed(self, changes)

    def _reindex_pids(self) -> None:
        self._pid_row = {pid: r for r, pid in enumerate(self._pids)}

    def _reindex_tids(self, pid: int) -> None:
        self._tid_row[pid] = {tid: r for r, tid in enumerate(self._tids[pid])}

    # -- lookups for the widget and tests ---------------------------------------------------
    def process_index(self, pid: int, column: int = 0) -> QModelIndex:
        r = self._pid_row.get(pid)
        return QModelIndex() if r is None else self.createIndex(r, column, 0)

    def thread_index(self, pid: int, tid: int, column: int = 0) -> QModelIndex:
        rows = self._tid_row.get(pid)
        r = rows.get(tid) if rows else None
        return QModelIndex() if r is None else self.createIndex(r, column, pid + 1)

    def pids(self) -> list[int]:
        return list(self._pids)

    def tids_of(self, pid: int) -> list[int]:
        return list(self._tids.get(pid, ()))

    def full_name(self, pid: int, tid: int) -> str | None:
        """The full Java name the tree shows for thread `tid` of `pid` (ThreadNames.full_name of the
        task its row was built from), or None."""
        built = self._built.get(pid, {}).get(tid)
        return self.thread_names.full_name(pid, tid, built[0][0].comm) if built is not None else None

    # -- Qt model interface -----------------------------------------------------------------
    def index(self, row, column, parent=_INVALID):
        if not parent.isValid():
            if 0 <= row < len(self._pids) and 0 <= column < _NCOLS:
                return self.createIndex(row, column, 0)
            return _INVALID
        if column < 0 or column >= _NCOLS or row < 0:
            return _INVALID
        if parent.internalId() != 0 or parent.column() != 0:
            return _INVALID               # threads have no children; only column 0 has any
        if row >= len(self._tids.get(self._pids[parent.row()], ())):
            return _INVALID
        return self.createIndex(row, column, self._pids[parent.row()] + 1)

    def parent(self, index=_INVALID):
        if not index.isValid():
            return _INVALID
        ident = index.internalId()
        if ident == 0:
            return _INVALID
        return self.createIndex(self._pid_row[ident - 1], 0, 0)

    def rowCount(self, parent=_INVALID) -> int:
        if not parent.isValid():
            return len(self._pids)
        if parent.internalId() != 0 or parent.column() != 0:
            return 0
        return len(self._tids.get(self._pids[parent.row()], ()))

    def columnCount(self, parent=QModelIndex()) -> int:
        return len(_HEADERS)

    def hasChildren(self, parent=QModelIndex()) -> bool:
        return self.rowCount(parent) > 0

    # -- drag source: threads and processes drag onto the grid as the pin MIME type (widgets/pinning.py)
    def flags(self, index):
        return _flags(index)

    def mimeTypes(self) -> list[str]:
        return [PIN_MIME]

    def mimeData(self, indexes):
        rows = []
        for i in indexes:
            if i.isValid():
                ident = i.internalId()
                if ident == 0:
                    rows.append(("process", self._pids[i.row()], self._pids[i.row()]))
                else:
                    rows.append(("thread", self._tids[ident - 1][i.row()], ident - 1))
        return pin_mime_data(payload_from_rows(rows, self.tids_of, self.full_name))

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(_HEADERS):
            if role == Qt.ItemDataRole.DisplayRole:
                return _HEADERS[section]
            if role == Qt.ItemDataRole.ToolTipRole and section == COL_PCT:
                return "CPU time over the last interval, in % of one CPU"
            if role == Qt.ItemDataRole.ToolTipRole and section == _HEADERS.index("Migrations/s"):
                return ("CPU migrations per second (se.nr_migrations), read for the selected threads and "
                        "the busiest ones; blank for the rest or where the kernel has no sched file")
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        # The delegate asks each painted cell for decoration, font, background, check state and
        # size hint too: answer those before any lookup.
        if role not in _SERVED or not index.isValid():
            return None
        return self._answer(index, self._row_cells(index), role)

    def fill_roles(self, index, span) -> None:
        """Every role of one painted cell in one call (ThreadFilterProxyModel.multiData)."""
        if index.isValid():
            cells = self._row_cells(index)
            fill_span(span, lambda role: self._answer(index, cells, role))

    def _row_cells(self, index) -> tuple:
        ident = index.internalId()
        if ident == 0:
            return self._pcells[self._pids[index.row()]]
        return self._tcells[ident - 1][self._tids[ident - 1][index.row()]]

    def _answer(self, index, cells: tuple, role: int):
        """What a cell of the row `cells` shows for `role`."""
        slot = _SLOT.get(role)
        if slot is not None:
            return cells[index.column()][slot]
        if role == _ALIGN:
            return _RIGHT if index.column() in _NUMERIC else None
        if role == _FILTER or role == _ID:
            ident = index.internalId()
            if ident == 0:
                key = self._pids[index.row()]
                return self._pfilter[key] if role == _FILTER else ("process", key)
            key = self._tids[ident - 1][index.row()]
            if role == _FILTER:
                return self._tfilter[ident - 1][key] + " " + self._pfilter[ident - 1]
            return "thread", key
        if role == _KIND and index.internalId() != 0:
            pid = index.internalId() - 1
            built = self._built.get(pid, {}).get(self._tids[pid][index.row()])
            return built[0][0].kind if built is not None else None
        return None


class ThreadFilterProxyModel(QSortFilterProxyModel):
    """Sorts by SORT_ROLE. A row is kept when app/machine/threads.py name_matcher (the one matcher,
    which `coremap threads --name` uses too) finds the filter in its names: a thread's full Java name
    and comm, its process's comm and cmdline, and the ids; a process is kept when it or any of its
    threads matches (recursive filtering). With a kind (`set_kind`) only threads of that kind are kept,
    and a process only for them."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._active = False
        self._kind: str | None = None
        self._matches = name_matcher("")
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(True)
        self.setRecursiveFilteringEnabled(True)

    @property
    def active(self) -> bool:
        return self._active or self._kind is not None

    def set_kind(self, kind: str | None) -> None:
        self.beginFilterChange()
        self._kind = kind
        self.endFilterChange()

    def set_filter_text(self, text: str) -> None:
        self.beginFilterChange()
        self._active = bool(text.split())
        self._matches = name_matcher(text)
        self.endFilterChange()

    def multiData(self, index, span) -> None:
        # A painted cell: one mapping, then one call of the model (widgets/tables/rows.py says why).
        if index.isValid():
            self.sourceModel().fill_roles(self.mapToSource(index), span)

    def flags(self, index):
        # Every row has the same flags: answered without mapping the index to the source (which
        # calls the model's index() in Python), once per painted cell.
        return _flags(index)

    def filterAcceptsRow(self, source_row, source_parent):
        if not self.active:
            return True
        src = self.sourceModel()
        index = src.index(source_row, 0, source_parent)
        if self._kind is not None and index.data(KIND_ROLE) != self._kind:
            return False                # a process row too: kept for its threads of the kind alone
        return not self._active or self._matches(src.data(index, FILTER_ROLE))


class ThreadTableWidget(QWidget):
    """A filter box over the process/thread tree. Emits selection_changed(tids, pids): the threads and
    the processes whose rows are selected."""

    selection_changed = Signal(list, list)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.model = ThreadTreeModel(self)
        self.proxy = ThreadFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.filter_edit = QLineEdit(self)
        self.filter_edit.setPlaceholderText("Find a thread: name, process name or command line")
        self.filter_edit.setClearButtonEnabled(True)
        # The usual targets of a priority change (tuna's, rtla's): threaded IRQ handlers, ksoftirqd, rcuc.
        self.kind_combo = QComboBox(self)
        self.kind_combo.addItem("All threads", None)
        for kind, label in THREAD_KINDS.items():
            self.kind_combo.addItem(label[0].upper() + label[1:], kind)
        self.kind_combo.setToolTip("Show only threads of one kind")
        self.count_label = TextLine(self)
        self.view = PinDragTreeView(self, name_column=COL_NAME)
        self.view.setModel(self.proxy)
        self.view.setUniformRowHeights(True)          # needed for 2,000+ rows to lay out quickly
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(COL_PCT, Qt.SortOrder.DescendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.view.setAllColumnsShowFocus(True)
        self.view.header().setSectionResizeMode(COL_NAME, QHeaderView.ResizeMode.Interactive)
        self.view.header().resizeSection(COL_NAME, 220)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(self.filter_edit, 1)
        row.addWidget(self.kind_combo)
        layout.addLayout(row)
        layout.addWidget(self.view)
        layout.addWidget(self.count_label)
        self._last_selection: tuple[list, list] = ([], [])
        self.filter_edit.textChanged.connect(self._on_filter_text_changed)
        self.kind_combo.currentIndexChanged.connect(self._on_kind_combo_current_index_changed)
        self.view.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.view.viewport().installEventFilter(self)
        self.proxy.rowsInserted.connect(self._on_proxy_rows_inserted)

    def set_state(self, state: MachineState) -> None:
        names_before = self.model.thread_names
        self.model.set_state(state)
        if self.model.thread_names is not names_before:
            self._fit_java_names()
        self._show_count()
        # Rows removed under a selection change it without a selectionChanged carrying them.
        self._emit_selection()

    def _fit_java_names(self) -> None:
        """Widen the name column (never narrow it, at most _NAME_WIDTH_MAX) so the longest full Java
        name shows whole: what tells "market-data-feed-handler-0" from "-1" is its end, which eliding
        would hide. Only when a JVM was read again, not per tick."""
        texts = [shown_thread_name(n, comm_of(n)) for of in self.model.thread_names.names.values()
                 for n in of.values()]
        if not texts:
            return
        header = self.view.header()
        # Two levels of indentation (the process row's arrow, the thread's offset) and the cell margins.
        want = max(map(self.view.fontMetrics().horizontalAdvance, texts)) + 2 * self.view.indentation() + 16
        if want > header.sectionSize(COL_NAME):
            header.resizeSection(COL_NAME, min(want, _NAME_WIDTH_MAX))

    def _show_count(self) -> None:
        """The line under the tree: how many processes and threads; under a filter that hides every
        row, that nothing matches and, where a JVM's full names could not be read, why (issue 20)."""
        if self.proxy.active and self.proxy.rowCount() == 0 and self.model.pids():
            text, kind = self.filter_edit.text().strip(), self.kind_combo.currentData()
            line = (f"No thread or process matches \u201c{text}\u201d" if text else "No thread") + \
                (f" among the {THREAD_KINDS[kind]}" if kind is not None else "")
            unread = self.model.thread_names.unavailable
            if unread:
                pid, why = min(unread.items())
                line += f"; the full Java thread names of JVM {pid} cannot be read: {why}"
            self.count_label.setText(line)
            return
        n_threads = sum(len(self.model.tids_of(p)) for p in self.model.pids())
        if self.proxy.active:
            # What the filter keeps, as Find counts it (widgets/search_bar.py): one count for both.
            self.count_label.setText(f"{len(self.shown_threads()):,} of {plural(n_threads, 'thread')} shown")
            return
        self.count_label.setText(f"{plural(len(self.model.pids()), 'process', 'processes')}, {plural(n_threads, 'thread')}")

    def shown_threads(self) -> list[int]:
        """The threads whose rows the filter keeps; a process kept without thread rows stands for its
        main thread. The tree's count line and Find (widgets/search_bar.py) both count these."""
        proxy, tids = self.proxy, []
        for r in range(proxy.rowCount()):
            process = proxy.index(r, 0)
            children = proxy.rowCount(process)
            if not children:
                tids.append(process.data(ID_ROLE)[1])
            for c in range(children):
                kind, key = proxy.index(c, 0, process).data(ID_ROLE)
                if kind == "thread":
                    tids.append(key)
        return tids

    def set_filter(self, text: str) -> None:
        self.filter_edit.setText(text)

    def selected(self) -> tuple[list[int], list[int]]:
        """(tids, pids) of the selected rows."""
        tids, pids = [], []
        for idx in self.view.selectionModel().selectedRows(0):
            kind, key = idx.data(ID_ROLE)
            (tids if kind == "thread" else pids).append(key)
        return sorted(tids), sorted(pids)

    def select_thread(self, pid: int, tid: int) -> bool:
        """Select one thread's row (expanding its process). Returns whether it is shown."""
        idx = self.proxy.mapFromSource(self.model.thread_index(pid, tid))
        if not idx.isValid():
            return False
        self.view.expand(idx.parent())
        self.view.selectionModel().select(
            idx, self.view.selectionModel().SelectionFlag.ClearAndSelect
            | self.view.selectionModel().SelectionFlag.Rows)
        self.view.scrollTo(idx)
        return True

    def eventFilter(self, obj, event) -> bool:
        # A process row's tooltip adds its user and memory, read now through psutil (app/machine/usage.py):
        # on hover only, never per tick, so sleeping processes cost nothing; and not in the model,
        # whose cells change only with a state.
        if obj is self.view.viewport() and event.type() == QEvent.Type.ToolTip and self.model.live:
            idx = self.view.indexAt(event.pos())
            ident = idx.data(ID_ROLE) if idx.isValid() else None
            if ident is not None and ident[0] == "process" and idx.column() == COL_NAME:
                QToolTip.showText(event.globalPos(), self.process_tooltip(ident[1]), self.view)
                return True
        return super().eventFilter(obj, event)

    def process_tooltip(self, pid: int) -> str:
        """What hovering a process's name shows: its cell's tooltip and, live, its user and memory."""
        tip = self.model.process_index(pid).data(Qt.ItemDataRole.ToolTipRole) or ""
        facts = process_facts(pid) if self.model.live else None
        return f"{tip}\n{facts}" if facts else tip

    def _on_filter_text_changed(self, text: str) -> None:
        self.proxy.set_filter_text(text)
        self._after_filter()

    def _after_filter(self) -> None:
        if self.proxy.active:
            self.view.expandAll()                      # show the matching threads under each process
        else:
            self.view.collapseAll()
        self._show_count()

    def set_kind(self, kind: str | None) -> None:
        """Show only threads of `kind` (THREAD_KINDS), or every thread for None."""
        self.kind_combo.setCurrentIndex(self.kind_combo.findData(kind) if kind is not None else 0)

    def _on_kind_combo_current_index_changed(self, _i: int) -> None:
        self.proxy.set_kind(self.kind_combo.currentData())
        self._after_filter()

    def _on_proxy_rows_inserted(self, parent: QModelIndex, first: int, last: int) -> None:
        # A process that starts matching the filter mid-session opens like the others did.
        if self.proxy.active and not parent.isValid():
            for r in range(first, last + 1):
                self.view.expand(self.proxy.index(r, 0))

    def _on_selection_changed(self, _selected: QItemSelection, _deselected: QItemSelection) -> None:
        self._emit_selection()

    def _emit_selection(self) -> None:
        sel = self.selected()
        if sel != self._last_selection:
            self._last_selection = sel
            self.selection_changed.emit(*sel)

