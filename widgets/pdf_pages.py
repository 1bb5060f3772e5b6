"""How a report's QTextDocument is cut into PDF pages (widgets/export.py pdf_bytes): what a page break
must not spoil, moved to the next page before the document is printed.

QTextDocument ignores the CSS that asks browsers for this (page-break-inside, page-break-after), so:
- a table row a page break would cut in two moves to the next page (an IRQ's device name ended on one
  page and its figures began on the next, issue 23);
- a heading never stays alone at the bottom of a page: it goes to the next page with the start of
  what it heads (issue 28: "Pins made" and "1. jitter on CPU 1" were left at the foot of pages); so
  does a short paragraph ending in a colon ("Percentiles of the wakeup latencies:"), and a table's
  header row goes with its first row.

QTextDocument lays a document out lazily, a part at a time, and an edit made while that layout is
unfinished ends it where the edit is: the document then has only the pages laid out so far, and
print_() prints those. A report's PDF ended after its first probe run, with the other runs and the
Notes missing (issue 28), whenever a row to move came before the lazy layout had reached the end. So
the document is laid out in full before every look at it and after every edit.
"""
from __future__ import annotations

from PySide6.QtGui import QTextBlock, QTextCursor, QTextDocument, QTextFormat, QTextTable

# What is kept together may be at most this share of a page: anything taller could not fit on one
# page anyway and is left to break.
KEEP_SHARE = 0.8
LEAD_INS = 3        # short lines between a heading and what it heads (a run's "loop 15 ns · sampled 2 s")
MAX_INTRO_LINES = 3  # a paragraph that ends in a colon and introduces what follows


def paginate(doc: QTextDocument, max_moves: int = 200) -> int:
    """Move every row a page break would cut, and every heading, introduction or header row it would
    strand, to the next page (module docstring), the first in the document first (a move shifts
    everything after it); the number of moves. `doc` must have its page size."""
    moves = 0
    while moves < max_moves:
        lay_out_in_full(doc)
        height = doc.pageSize().height()
        fixes = [f for f in (_first_cut_row(doc, height), _first_stranded(doc, height)) if f is not None]
        if not fixes:
            break
        min(fixes, key=lambda f: f[0])[1]()
        moves += 1
    lay_out_in_full(doc)
    return moves


def lay_out_in_full(doc: QTextDocument) -> int:
    """Finish the document's lazy layout (module docstring); its page count."""
    # QTextDocumentLayout.pageCount() finishes the layout before counting (ensureLayoutFinished).
    return doc.documentLayout().pageCount()


def _page(y: float, height: float) -> int:
    return int(y // height)


def _crosses(top: float, bottom: float, height: float) -> bool:
    """Whether [top, bottom) starts on one page and ends on another, and would fit on one."""
    return _page(top, height) != _page(bottom - 0.5, height) and bottom - top < KEEP_SHARE * height


# -- table rows -------------------------------------------------------------------------------------

def _tables(doc: QTextDocument) -> list[QTextTable]:
    out: list[QTextTable] = []

    def walk(frame) -> None:
        for child in frame.childFrames():
            if isinstance(child, QTextTable):
                out.append(child)
            walk(child)
    walk(doc.rootFrame())
    return out


def _row_span(doc: QTextDocument, table: QTextTable, row: int) -> tuple[float, float]:
    """The top of a table row's first lines and the bottom of its last, in the paginated document."""
    lay = doc.documentLayout()
    cells = [table.cellAt(row, c) for c in range(table.columns())]
    return (min(lay.blockBoundingRect(c.firstCursorPosition().block()).top() for c in cells),
            max(lay.blockBoundingRect(c.lastCursorPosition().block()).bottom() for c in cells))


def _first_cut_row(doc: QTextDocument, height: float):
    """(position, move it) for the first table row a page break cuts in two; None when none is."""
    for t in _tables(doc):
        if t.rows() > 1 and not _table_moved(t) and _crosses(_row_span(doc, t, 0)[0], _row_span(doc, t, 1)[1], height):
            return t.firstPosition(), lambda t=t: _table_break_before(t)      # its header row alone
        for r in range(1, t.rows()):
            top, bottom = _row_span(doc, t, r)
            if _crosses(top, bottom, height):
                return t.cellAt(r, 0).firstPosition(), lambda t=t, r=r, top=top: _move_row(doc, t, r, top, height)
    return None


def _table_moved(table: QTextTable) -> bool:
    return bool(table.format().pageBreakPolicy() & QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore)


def _table_break_before(table: QTextTable) -> None:
    """A table whose header row would end a page starts the next one."""
    f = table.format()
    f.setPageBreakPolicy(QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore)
    table.setFormat(f)


def _move_row(doc: QTextDocument, table: QTextTable, row: int, top: float, height: float) -> None:
    """Before the row goes a borderless spacer row as tall as what is left of the page, so the row
    starts the next one; the row above it keeps its bottom border."""
    # One edit block: the document is laid out again once, not after each cell (a table of 300 pins
    # was laid out 5 times a move).
    edit = QTextCursor(doc)
    edit.beginEditBlock()
    table.insertRows(row, 1)
    for c in range(table.columns()):
        cell = table.cellAt(row, c)
        f = cell.format().toTableCellFormat()
        f.setTopPadding(0)
        f.setBottomPadding(0)
        f.setLeftBorder(0)
        f.setRightBorder(0)
        f.setBottomBorder(0)
        cell.setFormat(f)
    edit.endEditBlock()
    next_page = (_page(top, height) + 1) * height
    for _ in range(3):          # the spacer's own line counts too: grow it until the row moved
        lay_out_in_full(doc)
        moved_top, _bottom = _row_span(doc, table, row + 1)
        if moved_top >= next_page:
            break
        cell = table.cellAt(row, 0)
        f = cell.format().toTableCellFormat()
        f.setTopPadding(f.topPadding() + next_page - moved_top + 1)
        cell.setFormat(f)


# -- headings and what introduces a table -----------------------------------------------------------

def _is_heading(block: QTextBlock) -> bool:
    return block.blockFormat().headingLevel() > 0


def _introduces(block: QTextBlock) -> bool:
    """A heading, or a short paragraph that ends in a colon ("Percentiles of the gap lengths:", "What
    ran in the 320 largest gaps (...):"): each means nothing without what comes next."""
    if _is_heading(block):
        return True
    return 0 < block.layout().lineCount() <= MAX_INTRO_LINES and block.text().rstrip().endswith(":")


def _table_of(block: QTextBlock) -> QTextTable | None:
    return QTextCursor(block).currentTable()


def _has_image(block: QTextBlock) -> bool:
    it = block.begin()
    while not it.atEnd():
        if it.fragment().charFormat().isImageFormat():
            return True
        it += 1
    return False


def _kept_until(doc: QTextDocument, intro: QTextBlock) -> float:
    """The bottom of what `intro` must share a page with: the headings, introductions and short lead-in
    lines right after it, then the start of what it introduces (a table's header and first row, a
    picture, the first two lines of a paragraph)."""
    lay = doc.documentLayout()
    end = lay.blockBoundingRect(intro).bottom()
    block, lead_ins = intro.next(), 0
    while block.isValid():
        table = _table_of(block)
        if table is not None:
            return max(end, _row_span(doc, table, min(1, table.rows() - 1))[1])
        rect = lay.blockBoundingRect(block)
        lines = block.layout().lineCount()
        # A line or two of lead-in ("loop 15 ns · sampled 2 s"), or a short paragraph between a heading
        # and its table ("Pins in effect and those made since ... Now CPU 1 quiet", issue 28: "Pins made"
        # and it ended a page, the table began the next).
        short = lines <= 1 or (lines <= MAX_INTRO_LINES and _table_of(block.next()) is not None)
        lead_in = short and not _has_image(block) and block.next().isValid() and lead_ins < LEAD_INS
        if _introduces(block) or lead_in:
            end, lead_ins = rect.bottom(), lead_ins + (not _introduces(block))
            block = block.next()
            continue
        if lines == 0:
            return max(end, rect.bottom())
        line = block.layout().lineAt(min(1, lines - 1))
        return max(end, rect.top() + line.rect().bottom())
    return end


def _first_stranded(doc: QTextDocument, height: float):
    """(position, move it) for the first heading or introduction a page break parts from what it
    introduces; None when none is."""
    lay = doc.documentLayout()
    block = doc.begin()
    while block.isValid():
        moved = block.blockFormat().pageBreakPolicy() & QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore
        if not moved and _table_of(block) is None and _introduces(block):
            top = lay.blockBoundingRect(block).top()
            if _crosses(top, _kept_until(doc, block), height):
                return block.position(), lambda b=block: _break_before(b)
        block = block.next()
    return None


def _break_before(block: QTextBlock) -> None:
    f = block.blockFormat()
    f.setPageBreakPolicy(QTextFormat.PageBreakFlag.PageBreak_AlwaysBefore)
    QTextCursor(block).setBlockFormat(f)
