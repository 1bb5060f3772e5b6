"""tests/machines.py copy_machine: the one way a test gets a writable copy of a fixture machine. It must
copy as copytree(symlinks=True) does (links as links, modes, bytes), and a copy a test spoils must leave
the packed tree and the extracted folder as they were: the next test copies from them."""
from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

import pytest

from tests.machines import CPU_CACHES, _packed_tree, copy_machine, extract


def _state(root: Path) -> dict:
    """Each entry under root: its kind and mode, a link's target, a file's bytes (links not followed)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("file", stat.S_IMODE(st.st_mode), Path(p).read_bytes())
    return out


@pytest.fixture
def odd_tree(tmp_path) -> Path:
    """A tree with what copytree must not get wrong: a dangling link, a link to a folder and one out of
    the tree (never followed), modes the umask would drop or that forbid writing, bytes that are not text."""
    src = tmp_path / "src"
    (src / "proc" / "irq" / "24").mkdir(parents=True)
    (src / "proc" / "irq" / "24" / "smp_affinity").write_text("ff\n")
    (src / "proc" / "interrupts").write_bytes(b"CPU0\n\x00\xff\xfe binary\n")
    (src / "sys" / "devices").mkdir(parents=True)
    (src / "sys" / "devices" / "gone").symlink_to("../nowhere")
    (src / "sys" / "devices" / "irq").symlink_to("../../proc/irq")
    (src / "sys" / "devices" / "etc").symlink_to("/etc")
    shared = src / "sys" / "shared"
    shared.mkdir()
    (shared / "rw-all").write_text("x\n")
    (shared / "rw-all").chmod(0o666)             # the umask (022) drops go+w at create
    (shared / "read-only").write_text("y\n")
    (shared / "read-only").chmod(0o400)
    (src / "sys" / "locked").mkdir()
    (src / "sys" / "locked" / "inside").write_text("z\n")
    (src / "sys" / "locked").chmod(0o555)        # no write: filled before its mode is set
    return src


def test_a_copy_is_the_tree_entry_by_entry(odd_tree, tmp_path):
    dst = copy_machine(odd_tree, tmp_path / "dst")
    assert _state(dst) == _state(odd_tree)
    assert os.path.islink(dst / "sys" / "devices" / "gone") and not (dst / "sys" / "devices" / "gone").exists()
    assert os.readlink(dst / "sys" / "devices" / "etc") == "/etc"
    assert stat.S_IMODE(os.lstat(dst / "sys" / "shared" / "rw-all").st_mode) == 0o666


def test_a_machine_copy_matches_copytree_without_the_memory_blocks(tmp_path):
    src = extract("sno")
    shutil.copytree(src, tmp_path / "by-copytree", symlinks=True)
    whole = _state(tmp_path / "by-copytree")
    assert _state(copy_machine("sno", tmp_path / "whole", leave_out=())) == whole
    # UNREAD: the memory blocks and the nodes' links to them, and nothing else
    unread = re.compile(r"sys/devices/system/memory(/.*)?|sys/devices/system/node/node\d+/memory\d+")
    read = {k: v for k, v in whole.items() if not unread.fullmatch(k)}
    assert len(whole) - len(read) > 500          # sno has memory blocks, so the default copy is smaller
    assert _state(copy_machine("sno", tmp_path / "default")) == read


def test_the_default_copy_keeps_names_that_only_start_like_the_memory_links(tmp_path):
    # nodeK/memory_side_cache (Documentation/ABI/stable/sysfs-devices-node) is read; nodeK/memoryN is not
    def blocks(nodes: Path) -> list[str]:
        return [n for k in os.listdir(nodes) if k.startswith("node") and (nodes / k).is_dir()
                for n in os.listdir(nodes / k) if n.startswith("memory") and n[6:].isdigit()]

    dst = copy_machine("memorysidecaches", tmp_path / "dst", only=("sys/devices/system/node",))
    assert (dst / "sys/devices/system/node/node0/memory_side_cache").is_dir()
    assert blocks(extract("memorysidecaches") / "sys/devices/system/node") != []
    assert blocks(dst / "sys/devices/system/node") == []


def test_only_copies_the_named_paths_and_the_folders_above_them(odd_tree, tmp_path):
    dst = copy_machine(odd_tree, tmp_path / "dst", only=("proc/irq", "sys/shared/read-only", "proc/irq/24"))
    assert sorted(_state(dst)) == ["proc", "proc/irq", "proc/irq/24", "proc/irq/24/smp_affinity",
                                   "sys", "sys/shared", "sys/shared/read-only"]
    assert _state(dst)["sys/shared/read-only"] == _state(odd_tree)["sys/shared/read-only"]


def test_leave_out_names_folders_by_pattern(tmp_path):
    dst = copy_machine("sno", tmp_path / "dst", only=("sys/devices/system/cpu", "proc/irq"),
                       leave_out=(CPU_CACHES, "proc/irq/2"))
    cpu = _state(extract("sno") / "sys/devices/system/cpu")
    assert any("/cache/" in k for k in cpu)
    assert _state(dst / "sys/devices/system/cpu") == {k: v for k, v in cpu.items() if not
                                                      (k.split("/")[1:2] == ["cache"] and k.startswith("cpu"))}
    assert not (dst / "proc/irq/2").exists() and (dst / "proc/irq/24").is_dir()     # a name, not a prefix


def test_only_a_path_not_in_the_tree_is_refused_before_anything_is_written(odd_tree, tmp_path):
    with pytest.raises(FileNotFoundError, match="proc/nonesuch is not in"):
        copy_machine(odd_tree, tmp_path / "dst", only=("proc/irq", "proc/nonesuch"))
    assert not (tmp_path / "dst" / "proc").exists()


def test_a_spoiled_copy_leaves_the_cache_and_the_extracted_folder_as_they_were(tmp_path):
    src = extract("linux-amd64-offlineCPUs")
    packed, on_disk = _packed_tree(src, ""), _state(src)
    dst = copy_machine("linux-amd64-offlineCPUs", tmp_path / "spoiled", leave_out=())
    victim = next(rel for rel, kind, mode, _data in packed if kind == "f" and mode & 0o200)
    (dst / victim).write_text("spoiled\n")
    (dst / "sys").chmod(0o700)
    shutil.rmtree(dst / "proc")
    assert _packed_tree(src, "") == packed and _state(src) == on_disk
    assert _state(copy_machine("linux-amd64-offlineCPUs", tmp_path / "again", leave_out=())) == on_disk
