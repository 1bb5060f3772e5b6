"""app/store/folders.py: reports go to the user's XDG documents folder (issue 23), not ~/coremap-reports."""
from __future__ import annotations

import pytest

from app.store.folders import StateDirError, documents_dir, reports_dir


@pytest.fixture
def home(tmp_path, monkeypatch):
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    for var in ("COREMAP_REPORTS_DIR", "COREMAP_STATE_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_DOCUMENTS_DIR"):
        monkeypatch.delenv(var, raising=False)
    return h


def _user_dirs(home, text):
    (home / ".config").mkdir(exist_ok=True)
    (home / ".config" / "user-dirs.dirs").write_text(text)


def test_reports_go_to_the_documents_folder_xdg_user_dirs_names(home):
    _user_dirs(home, '# written by xdg-user-dirs-update\nXDG_DESKTOP_DIR="$HOME/Desktop"\n'
                     'XDG_DOCUMENTS_DIR="$HOME/Dokumente"\n')
    assert documents_dir() == home / "Dokumente"
    assert reports_dir() == home / "Dokumente" / "coremap" and reports_dir().is_dir()
    assert not (home / "coremap-reports").exists()


def test_an_absolute_documents_folder_and_xdg_config_home(home, tmp_path, monkeypatch):
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "user-dirs.dirs").write_text(f'XDG_DOCUMENTS_DIR="{tmp_path}/docs"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(cfg))
    assert reports_dir(create=False) == tmp_path / "docs" / "coremap"


def test_without_a_documents_folder_reports_go_to_the_state_folder(home):
    assert documents_dir() is None                                   # no user-dirs.dirs, no ~/Documents
    assert reports_dir() == home / ".local" / "state" / "coremap" / "reports"
    _user_dirs(home, 'XDG_DOCUMENTS_DIR="$HOME/"\n')                 # xdg-user-dirs: "the user has none"
    assert documents_dir() is None
    _user_dirs(home, 'XDG_DOCUMENTS_DIR="relative/docs"\n')          # invalid in the spec: ignored
    assert documents_dir() is None


def test_an_existing_documents_folder_is_used_without_user_dirs(home):
    (home / "Documents").mkdir()
    assert reports_dir(create=False) == home / "Documents" / "coremap"


def test_coremap_reports_dir_wins_and_an_unwritable_one_is_one_sentence(home, tmp_path, monkeypatch):
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "mine"))
    assert reports_dir() == tmp_path / "mine"
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("COREMAP_REPORTS_DIR", str(tmp_path / "file" / "sub"))
    with pytest.raises(StateDirError, match="cannot create the reports folder .* set COREMAP_REPORTS_DIR"):
        reports_dir()
