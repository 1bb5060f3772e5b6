"""The Help menu (keyboard shortcuts, the README, About coremap), File → Quit (Ctrl+Q) and Edit → Find
(Ctrl+F, widgets/search_bar.py), added by the composition root (widgets/application.py) to a built
window (issue 23: there was no Help menu, no list of shortcuts, no Quit and no search).

The shortcuts are read from the window's menus when the list is opened, so it always names what the
menus hold. The README is the one installed with coremap (its package metadata: the wheel carries
it), shown as Markdown; pictures that the install does not hold are named instead of drawn. Every
window here is non-modal: the main window stays live behind it.
"""
from __future__ import annotations

import html
import importlib.metadata
import platform
import re
from pathlib import Path

import PySide6
from PySide6.QtCore import QObject, QUrl, qVersion
from PySide6.QtGui import QAction, QGuiApplication, QImage, QKeySequence, QPixmap, QTextCursor, QTextDocument
from PySide6.QtWidgets import QDialog, QLayout, QMenu, QTextBrowser, QVBoxLayout, QWidget

import app
from app.store.folders import reports_dir, settings_path, state_dir

README_PICTURE_WIDTH = 700      # px: the README window's width less its margins and scroll bar
# Keys that are not menu actions: the grid's gestures and the search bar's.
OTHER_KEYS = (
    ("Click a CPU", "show what runs on it (the CPU dock)"),
    ("Drag from the grid", "select CPUs; drop threads or IRQs on a CPU, core, socket or node to pin them"),
    ("Wheel, + / −", "zoom the grid (Fit: whole machine)"),
    ("Esc", "close the search bar"),
)


class TextWindow(QDialog):
    """A non-modal window showing one text (HTML or Markdown) in a QTextBrowser."""

    def __init__(self, name: str, title: str, parent: QWidget, size: tuple[int, int]):
        super().__init__(parent)
        self.setObjectName(f"help-{name}")
        self.setWindowTitle(title)
        self.browser = QTextBrowser(self)
        self.browser.setOpenExternalLinks(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.browser)
        if QGuiApplication.platformName() == "offscreen":
            # It warns "does not support propagateSizeHints()" for a top-level layout's minimum size
            # (see widgets/main_window.py); nobody resizes an offscreen window.
            lay.setSizeConstraint(QLayout.SizeConstraint.SetNoConstraint)
        self.resize(*size)


class HelpMenu(QObject):
    """The Help menu of `window` and the windows it opens (one each; opened again, raised)."""

    def __init__(self, window: QWidget, menu: QMenu):
        super().__init__(window)
        self.window, self.menu = window, menu
        self.windows: dict[str, TextWindow] = {}
        self.actions: dict[str, QAction] = {}      # find, quit, shortcuts, readme, about

    def show(self, name: str, title: str, text: str, markdown: bool = False) -> TextWindow:
        d = self.windows.get(name)
        if d is None:
            d = self.windows[name] = TextWindow(name, title, self.window, (760, 640) if markdown else (560, 480))
        if markdown:
            root = _source_tree()
            d.browser.setSearchPaths([str(root)] if root is not None else [])
            d.browser.setMarkdown(text)
            _fit_pictures(d.browser.document(), README_PICTURE_WIDTH)
        else:
            d.browser.setHtml(text)
        d.show()
        if QGuiApplication.platformName() != "offscreen":
            d.raise_()          # offscreen (tests, screenshots) has no stacking and warns that it has none
        return d


def add_help(window, file_menu: QMenu, edit_menu: QMenu) -> HelpMenu:
    """The Help menu, Quit at the end of `file_menu` and Find in `edit_menu`. `window` is the
    MainWindow: its menus are listed, its search bar opened, and it is closed."""
    find = QAction("&Find…", window)
    find.setShortcut(QKeySequence(QKeySequence.StandardKey.Find))
    find.setToolTip("Search the grid, the IRQs and the threads at once")
    find.triggered.connect(window.search_bar.open)
    edit_menu.addSeparator()
    edit_menu.addAction(find)
    file_menu.addSeparator()
    quit_action = QAction("&Quit", window)
    quit_action.setShortcut(QKeySequence("Ctrl+Q"))       # QKeySequence.Quit is empty on some platforms
    quit_action.setMenuRole(QAction.MenuRole.QuitRole)
    quit_action.triggered.connect(window.close)
    file_menu.addAction(quit_action)
    helps = HelpMenu(window, window.menuBar().addMenu("&Help"))
    shortcuts = helps.menu.addAction("&Keyboard Shortcuts")
    shortcuts.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))     # F1
    shortcuts.triggered.connect(lambda: helps.show("shortcuts", "Keyboard shortcuts — coremap",
                                                   shortcuts_html(window.menuBar())))
    readme = helps.menu.addAction("coremap &README")
    readme.triggered.connect(lambda: helps.show("readme", "README — coremap", readme_markdown(), markdown=True))
    helps.menu.addSeparator()
    about = helps.menu.addAction("&About coremap")
    about.setMenuRole(QAction.MenuRole.AboutRole)
    about.triggered.connect(lambda: helps.show("about", "About coremap", about_html()))
    helps.actions.update(find=find, quit=quit_action, shortcuts=shortcuts, readme=readme, about=about)
    return helps


def _fit_pictures(doc: QTextDocument, width: int) -> None:
    """Give every picture of `doc` at most `width` pixels, its height in proportion: Markdown says
    nothing of a picture's size, and the README's screenshots are 1600 pixels wide."""
    cursor = QTextCursor(doc)
    block = doc.begin()
    while block.isValid():
        it = block.begin()
        while not it.atEnd():
            frag = it.fragment()
            fmt = frag.charFormat()
            if fmt.isImageFormat():
                image = fmt.toImageFormat()
                found = doc.resource(QTextDocument.ResourceType.ImageResource, QUrl(image.name()))
                size = found.size() if isinstance(found, (QImage, QPixmap)) else None
                if size is not None and size.width() > width:
                    image.setWidth(width)
                    image.setHeight(size.height() * width / size.width())
                    cursor.setPosition(frag.position())
                    cursor.setPosition(frag.position() + frag.length(), QTextCursor.MoveMode.KeepAnchor)
                    cursor.setCharFormat(image)
            it += 1
        block = block.next()


def _menu_rows(menu: QMenu, path: str) -> list[tuple[str, str]]:
    rows = []
    for a in menu.actions():
        if a.isSeparator():
            continue
        name = f"{path} → {a.text().replace('&', '')}"
        if a.menu() is not None:
            rows += _menu_rows(a.menu(), name)
        elif not a.shortcut().isEmpty():
            rows.append((a.shortcut().toString(QKeySequence.SequenceFormat.NativeText), name))
    return rows


def shortcuts_html(menu_bar) -> str:
    """Every menu item with a shortcut (read from the menus now), then the keys of the grid."""
    rows = []
    for a in menu_bar.actions():
        if a.menu() is not None:
            rows += _menu_rows(a.menu(), a.text().replace("&", ""))
    out = ["<h3>Menus</h3><table cellpadding='3'>"]
    out += [f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(n)}</td></tr>" for k, n in rows]
    out.append("</table><h3>Grid and search</h3><table cellpadding='3'>")
    out += [f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(n)}</td></tr>" for k, n in OTHER_KEYS]
    out.append("</table>")
    return "".join(out)


def _source_tree() -> Path | None:
    """The source tree this coremap runs from (an editable install), where the README's pictures are."""
    root = Path(app.__file__).resolve().parent.parent
    return root if (root / "resources" / "screenshots").is_dir() else None


def readme_markdown() -> str:
    """The README installed with coremap (package metadata); a picture the install does not hold
    becomes its caption in italics."""
    try:
        text = importlib.metadata.metadata("coremap").get_payload() or ""
    except importlib.metadata.PackageNotFoundError:
        text = ""
    if not text.strip():
        return "The README is not installed with this coremap; see the project's README.md."
    root = _source_tree()

    def picture(m: re.Match) -> str:
        alt, target = m.group(1), m.group(2)
        return m.group(0) if root is not None and (root / target).is_file() else f"*(picture: {alt})*"

    return re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", picture, text)


def about_html() -> str:
    """Version, licence, what it runs on, and where it keeps its files."""
    rows = (("Version", app.__version__), ("Licence", "MIT"),
            ("Python", platform.python_version()), ("Qt", f"{qVersion()} (PySide6 {PySide6.__version__})"),
            ("Settings", str(settings_path())), ("State (pin journal, autosave)", str(state_dir(create=False))),
            ("Reports", str(reports_dir(create=False))))
    table = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return ("<h2>coremap</h2><p>See which CPUs take interrupts and run threads; pin them; measure jitter "
            f"per CPU.</p><table cellpadding='3'>{table}</table>")
