"""app/atomic.py: the old file survives any failure before the rename; no temporary file is left."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.atomic import AtomicWriteError, atomic_writer, write_atomic

ROOT = Path(__file__).resolve().parents[2]


def _leftovers(folder: Path, name: str) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name != name]


def test_write_atomic_replaces_content_and_keeps_mode(tmp_path):
    p = tmp_path / "a.bin"
    write_atomic(p, b"first")
    os.chmod(p, 0o600)
    write_atomic(p, b"second version")
    assert p.read_bytes() == b"second version"
    assert p.stat().st_mode & 0o777 == 0o600
    assert _leftovers(tmp_path, "a.bin") == []


def test_exception_mid_write_leaves_old_file_intact(tmp_path):
    p = tmp_path / "s.coremap"
    write_atomic(p, b"OLD" * 1000)
    with pytest.raises(RuntimeError):
        with atomic_writer(p) as f:
            f.write(b"NEW-partial" * 500)
            raise RuntimeError("simulated failure half way")
    assert p.read_bytes() == b"OLD" * 1000
    assert _leftovers(tmp_path, "s.coremap") == []


def test_rename_failure_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    p = tmp_path / "s.coremap"
    write_atomic(p, b"OLD")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(AtomicWriteError, match="unchanged"):
        write_atomic(p, b"NEW")
    monkeypatch.undo()
    assert p.read_bytes() == b"OLD"
    assert _leftovers(tmp_path, "s.coremap") == []


def test_killed_writer_process_leaves_old_file(tmp_path):
    # A real crash: a child process streams half the data, then is SIGKILLed before the rename.
    p = tmp_path / "s.coremap"
    write_atomic(p, b"OLD")
    code = (
        "import sys, time\n"
        "from app.atomic import atomic_writer\n"
        f"with atomic_writer({str(p)!r}) as f:\n"
        "    f.write(b'N' * 100000); f.flush()\n"
        "    print('written', flush=True)\n"
        "    time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout.readline().strip() == b"written"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert p.read_bytes() == b"OLD"
    # The killed writer's temporary file remains (nobody could remove it), but never under p's name.
    temps = _leftovers(tmp_path, "s.coremap")
    assert len(temps) == 1 and temps[0].startswith(".s.coremap.") and temps[0].endswith(".tmp")


def test_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(AtomicWriteError, match="does not exist"):
        write_atomic(tmp_path / "no" / "such" / "x", b"x")


def test_read_only_folder_is_a_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if os.geteuid() == 0:
        # Root ignores mode bits; a read-only mount stops it (EROFS). The test undoes its mount.
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"root ignores mode bits and a read-only tmpfs cannot be mounted here: {r.stderr}")
        undo = ["umount", str(ro)]
    else:
        ro.chmod(0o500)
        undo = ["chmod", "700", str(ro)]
    try:
        with pytest.raises(AtomicWriteError, match="writable"):
            write_atomic(ro / "x", b"x")
    finally:
        subprocess.run(undo, check=True)
