"""coremap plan: the kernel command line fragment in the kernel's documented syntax (read back by the
same parser that reads /proc/cmdline), what is already in place on a real isolated node, the boot
CPU kept out of nohz_full=/rcu_nocbs=, the kernel's CONFIG_NO_HZ_FULL read from the machine, the way
the machine keeps its command line (BLS and grubby, Debian's /etc/default/grub.d, another GRUB), the
tuned route apart from the hand-written one, the guard unit the README shows, and a rollback for every
piece: the apply and roll-back lines are run on copies of the files, and must give the file back
byte for byte."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest

from app.cli.main import main
from app.machine.boot import read_boot_cpu, read_boot_loader, read_kernel_config
from app.machine.topology import read_topology
from app.parse.cpulist import parse_cpulist, parse_cpumask
from app.parse.kconfig import config_enabled, parse_kernel_config
from app.parse.topology import parse_cmdline_isolation
from app.quiet.boot_plan import PlanError, make_plan
from app.quiet.boot_plan_pieces import GUARD_UNIT
from app.quiet.boot_plan_text import plan_text, rollback_script, write_plan_folder
from app.sysroot import SysRoot
from tests.machines import copy_machine, extract

REPO = Path(__file__).resolve().parents[2]
# Documentation/admin-guide/kernel-parameters.txt: isolcpus= [flag-list,]<cpu-list>, the flags nohz,
# domain and managed_irq; nohz_full=, rcu_nocbs=, irqaffinity= take a <cpu-list>.
# The words tuned's profiles add are spelt as kernel-parameters.txt has them.
WORD = re.compile(r"(isolcpus)=((?:(?:nohz|domain|managed_irq),)*)([0-9,\-]+)$|"
                  r"(nohz_full|rcu_nocbs|irqaffinity)=([0-9,\-]+)$|"
                  r"(nohz=on|skew_tick=1|rcupdate\.rcu_normal_after_boot=1|tsc=reliable|nosoftlockup|"
                  r"intel_pstate=disable)$")
RELEASE = "6.1.0-18-amd64"


@pytest.fixture(scope="module")
def master():
    return read_topology(SysRoot(extract("master.internal")))


@pytest.fixture(scope="module")
def worker1():
    return read_topology(SysRoot(extract("worker1.internal")))


def machine_tree(tmp_path: Path, files: dict[str, str], *, base: str = "sno") -> SysRoot:
    """A copy of a real machine's CPUs (sno: 12 CPUs, one core each) with `files` added: the /boot,
    /etc and /usr a capture lacks."""
    src = extract(base)
    root = tmp_path / "machine"
    proc = [f"proc/{name}" for name in ("cmdline", "cpuinfo") if (src / "proc" / name).exists()]
    copy_machine(src, root, only=("sys/devices/system", *proc))
    (root / "proc").mkdir(exist_ok=True)
    for rel, text in {"proc/sys/kernel/osrelease": RELEASE + "\n", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith(".gz"):
            p.write_bytes(gzip.compress(text.encode()))
        else:
            p.write_text(text)
    return SysRoot(root)


def plan_on(root: SysRoot, quiet: str, **kw):
    return make_plan(read_topology(root), quiet, root=root, **kw)


def pieces(plan, route: str | None = None):
    routes = [plan.route(route)] if route else [r for r in plan.routes if r.offered]
    return [p for r in routes for p in r.pieces] + ([] if route else list(plan.common))


def run_sh(lines, folder: Path, paths: dict[str, Path]) -> None:
    """Run a piece's shell lines in the plan `folder`, its absolute paths moved under tmp (`paths`),
    every line a person does by hand (#) or that restarts a service left out."""
    script = []
    for line in lines:
        if line.startswith("#") or line.split()[0] in ("systemctl", "update-grub", "grub2-mkconfig",
                                                         "grub-mkconfig", "tuned-adm", "grubby", "cat"):
            continue
        for real, fake in sorted(paths.items(), key=lambda kv: -len(kv[0])):
            line = line.replace(real, str(fake))
        script.append(line)
    subprocess.run(["sh", "-e", "-c", "\n".join(script)], cwd=folder, check=True)


# -- the kernel command line ------------------------------------------------------------------------------
def test_fragment_follows_the_kernel_syntax_and_reads_back(master):
    plan = make_plan(master, "2-27,58-83")
    for word in plan.cmdline_fragment.split():
        assert WORD.match(word), word
    back = parse_cmdline_isolation(plan.cmdline_fragment)
    assert back.isolcpus == plan.quiet and set(back.isolcpus_flags) == {"managed_irq", "domain"}
    assert back.nohz_full == plan.quiet and back.rcu_nocbs == plan.quiet
    irqaff = dict(w.split("=", 1) for w in plan.cmdline_fragment.split() if "=" in w)["irqaffinity"]
    assert parse_cpulist(irqaff) == plan.housekeeping
    assert set(plan.quiet) | set(plan.housekeeping) == set(master.online)
    assert not set(plan.quiet) & set(plan.housekeeping)


def test_says_what_the_running_kernel_already_has(worker1):
    # worker1 booted with isolcpus=managed_irq,0-4,11-79 nohz_full=0-4,11-79 rcu_nocbs=0-4,11-79, no
    # irqaffinity. The kernel drops the boot CPU (0) from nohz_full= itself: that one is in place; the
    # plan's rcu_nocbs= leaves CPU 0 out, so with --replace it is not (merged, the running 0 is kept).
    assert {p.name: p for p in make_plan(worker1, "0-4,11-79").params}["rcu_nocbs"].in_place
    plan = make_plan(worker1, "0-4,11-79", replace=True)
    by = {p.name: p for p in plan.params}
    assert by["nohz_full"].value == by["rcu_nocbs"].value == "1-4,11-79"
    assert by["nohz_full"].in_place and by["nohz_full"].running == "0-4,11-79"
    assert not by["isolcpus"].in_place and by["isolcpus"].running == "managed_irq,0-4,11-79"
    assert not by["rcu_nocbs"].in_place and by["rcu_nocbs"].running == "0-4,11-79"
    assert not by["irqaffinity"].in_place and by["irqaffinity"].running is None
    assert "already in place (running: nohz_full=0-4,11-79)" in plan_text(plan)


def test_the_boot_cpu_is_never_nohz_full_nor_rcu_nocbs(tmp_path):
    root = machine_tree(tmp_path, {})
    plan = plan_on(root, "0")
    assert parse_cmdline_isolation(plan.cmdline_fragment).nohz_full is None
    assert "nohz_full" not in plan.cmdline_fragment and "rcu_nocbs" not in plan.cmdline_fragment
    assert plan.cmdline_fragment.startswith("isolcpus=managed_irq,domain,0 irqaffinity=1-11 nohz=on")
    assert not plan.route("tuned").offered and "boot CPU (0)" in plan.route("tuned").why
    text = plan_text(plan)
    assert "no nohz_full= or rcu_nocbs= for CPU 0: it is the boot CPU" in text
    assert any(n.startswith("CPU 0 is the boot CPU") for n in plan.notes)
    # With other CPUs: they get the tick words, CPU 0 does not; tuned isolates them only.
    plan = plan_on(root, "0-3")
    back = parse_cmdline_isolation(plan.cmdline_fragment)
    assert back.isolcpus == (0, 1, 2, 3) and back.nohz_full == back.rcu_nocbs == (1, 2, 3)
    assert "isolated_cores=1-3\n" in {p.name: p.text for p in pieces(plan, "tuned")}["cpu-partitioning-variables.conf"]
    assert "CPU 0 (the boot CPU) is left out of isolated_cores" in plan.route("tuned").why


def test_cli_plan_quiet_0_says_so_and_emits_no_nohz_full_0(tmp_path, capsys):
    root = machine_tree(tmp_path, {})
    assert main(["plan", "--quiet", "0", "--root", str(root.root)]) == 0
    out = capsys.readouterr().out
    assert "nohz_full=0" not in out and "rcu_nocbs=0" not in out and "isolated_cores=0" not in out
    assert "CPU 0 is the boot CPU" in out


def test_the_boot_cpu_the_kernel_dropped_from_nohz_full_is_the_one_kept_out(tmp_path):
    # The running kernel was asked for nohz_full=1-3 and shows 1,3: it dropped CPU 2, its boot CPU.
    root = machine_tree(tmp_path, {"proc/cmdline": "ro nohz_full=1-3\n", "sys/devices/system/cpu/nohz_full": "1,3\n"})
    assert read_boot_cpu(root)[0] == 2
    plan = plan_on(root, "1-3")
    assert plan.facts.boot_cpu == 2 and parse_cmdline_isolation(plan.cmdline_fragment).nohz_full == (1, 3)
    assert "CPU 2: the running kernel dropped it from nohz_full=" in plan_text(plan)


# -- the kernel's CONFIG_NO_HZ_FULL -------------------------------------------------------------------------
def test_a_kernel_without_no_hz_full_gets_one_clear_line(tmp_path, capsys):
    root = machine_tree(tmp_path, {f"boot/config-{RELEASE}": "CONFIG_NO_HZ_IDLE=y\n# CONFIG_NO_HZ_FULL is not set\n"
                                                              "CONFIG_RCU_NOCB_CPU=y\n"})
    assert main(["plan", "--quiet", "2-3", "--root", str(root.root)]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "lacks CONFIG_NO_HZ_FULL" in ln]
    assert line.strip().startswith(f"This kernel ({RELEASE}) lacks CONFIG_NO_HZ_FULL (/boot/config-{RELEASE}): "
                                   "nohz_full= will be ignored")
    assert "linux-image-rt-amd64" in out.split("lacks CONFIG_NO_HZ_FULL", 1)[1].split("\n\n", 1)[0]
    assert "honoured by: Linux 3.10; ignored by this kernel (built without CONFIG_NO_HZ_FULL)" in out
    assert "not set now" not in [ln for ln in out.splitlines() if "Linux 3.10" in ln][0]


def test_the_kernel_config_from_proc_config_gz_and_from_sysfs(tmp_path):
    gz = machine_tree(tmp_path / "a", {"proc/config.gz": "CONFIG_NO_HZ_FULL=y\n# CONFIG_RCU_NOCB_CPU is not set\n"})
    k = read_kernel_config(gz, RELEASE)
    assert (k.no_hz_full, k.rcu_nocb_cpu, k.source) == (True, False, "/proc/config.gz")
    assert any("lacks CONFIG_RCU_NOCB_CPU" in n for n in plan_on(gz, "2-3").notes)
    # The sysfs file is there only in kernels built with it (drivers/base/cpu.c).
    real = SysRoot(extract("linux-amd64-offlineCPUs"))       # its cpu/nohz_full reads "(null)"
    assert read_kernel_config(real, None).no_hz_full is True
    # A capture with neither says nothing either way.
    assert read_kernel_config(SysRoot(extract("sno")), None).no_hz_full is None
    assert "is not known" in plan_text(make_plan(read_topology(SysRoot(extract("sno"))), "2", root=SysRoot(extract("sno"))))


def test_this_machines_kernel_config_matches_zcat():
    if not Path("/proc/config.gz").exists() or Path(f"/boot/config-{Path('/proc/sys/kernel/osrelease').read_text().strip()}").exists():
        pytest.skip("this machine's kernel configuration is not (only) in /proc/config.gz")
    config = parse_kernel_config(gzip.decompress(Path("/proc/config.gz").read_bytes()).decode())
    k = read_kernel_config(SysRoot("/"), Path("/proc/sys/kernel/osrelease").read_text().strip())
    assert k.source == "/proc/config.gz" and k.no_hz_full == config_enabled(config, "CONFIG_NO_HZ_FULL")
    assert k.no_hz_full == Path("/sys/devices/system/cpu/nohz_full").exists()


def test_parse_kernel_config():
    c = parse_kernel_config("#\n# Automatically generated file\nCONFIG_HZ=250\nCONFIG_NO_HZ_FULL=y\n"
                            "# CONFIG_PREEMPT_RT is not set\nCONFIG_X=m\nCONFIG_S=\"a b\"\nnoise\n")
    assert c == {"CONFIG_HZ": "250", "CONFIG_NO_HZ_FULL": "y", "CONFIG_PREEMPT_RT": "n", "CONFIG_X": "m",
                 "CONFIG_S": '"a b"'}
    assert config_enabled(c, "CONFIG_X") and not config_enabled(c, "CONFIG_PREEMPT_RT")
    assert config_enabled(c, "CONFIG_NEVER_OFFERED") is False and config_enabled({}, "CONFIG_X") is None


# -- the machine's way of keeping its command line ----------------------------------------------------------
def test_a_bls_tree_uses_grubby_and_puts_back_what_was_there(tmp_path):
    root = machine_tree(tmp_path, {
        "boot/loader/entries/0123-5.14.0-427.el9.x86_64.conf": "title RHEL\noptions root=/dev/sda2 isolcpus=managed_irq,2-3\n",
        "proc/cmdline": "BOOT_IMAGE=/vmlinuz root=/dev/sda2 isolcpus=managed_irq,2-3\n"})
    assert read_boot_loader(root).kind == "grubby"
    plan = plan_on(root, "2-3")
    [kernel] = [p for p in pieces(plan, "by-hand") if p.title.startswith("Kernel command line")]
    assert kernel.title == "Kernel command line, with grubby" and "/boot/loader/entries holds 1 boot entry" in kernel.why
    tuned_words = "nohz=on skew_tick=1 rcupdate.rcu_normal_after_boot=1 nosoftlockup"
    assert kernel.apply == ('grubby --update-kernel=ALL --args="isolcpus=managed_irq,domain,2-3 nohz_full=2-3 '
                            f'rcu_nocbs=2-3 irqaffinity=0-1,4-11 {tuned_words}"',)
    assert kernel.rollback == ('grubby --update-kernel=ALL --remove-args="nohz_full=2-3 rcu_nocbs=2-3 irqaffinity=0-1,4-11 '
                               f'{tuned_words}"', 'grubby --update-kernel=ALL --args="isolcpus=managed_irq,2-3"')
    assert "boot loader: grubby (/boot/loader/entries holds 1 boot entry" in plan_text(plan)
    assert not any("/etc/default/grub" in line for p in pieces(plan, "by-hand") for line in p.apply)


def test_grubby_alone_is_enough_to_choose_it(tmp_path):
    root = machine_tree(tmp_path, {"usr/sbin/grubby": "#!/bin/sh\n", "etc/default/grub": 'GRUB_CMDLINE_LINUX="rhgb"\n'})
    loader = read_boot_loader(root)
    assert loader.kind == "grubby" and "/usr/sbin/grubby is installed" in loader.why


def test_a_debian_tree_gets_a_grub_d_file_that_grub_mkconfig_would_read(tmp_path):
    root = machine_tree(tmp_path, {"usr/sbin/update-grub": "#!/bin/sh\n", "etc/debian_version": "12.5\n",
                                   "etc/default/grub": 'GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX="console=ttyS0"\n'})
    plan = plan_on(root, "2-3")
    [kernel] = [p for p in pieces(plan, "by-hand") if p.title.startswith("Kernel command line")]
    assert kernel.path == "/etc/default/grub.d/coremap-quiet.cfg" and "update-grub" in kernel.why
    assert kernel.apply[-1] == kernel.rollback[-1] == "update-grub"
    assert not any("grubby" in line for line in kernel.apply + kernel.rollback)
    # What grub-mkconfig does (Debian's grub-common): source /etc/default/grub, then grub.d/*.cfg.
    folder = tmp_path / "plan"
    write_plan_folder(folder, plan)
    etc = tmp_path / "etc-default"
    (etc / "grub.d").mkdir(parents=True)
    (etc / "grub").write_bytes((root.root / "etc/default/grub").read_bytes())
    fake = {"/etc/default/grub.d/coremap-quiet.cfg": etc / "grub.d" / "coremap-quiet.cfg", "/etc/default/grub": etc / "grub"}
    read = f'. {etc}/grub; for x in {etc}/grub.d/*.cfg; do if [ -e "$x" ]; then . "$x"; fi; done; printf %s "$GRUB_CMDLINE_LINUX"'
    run_sh(kernel.apply, folder, fake)
    got = subprocess.run(["sh", "-c", read], capture_output=True, text=True, check=True).stdout
    assert got == "console=ttyS0 " + plan.cmdline_fragment
    run_sh(kernel.rollback, folder, fake)
    assert not list((etc / "grub.d").iterdir())
    assert subprocess.run(["sh", "-c", read], capture_output=True, text=True, check=True).stdout == "console=ttyS0"


def test_a_word_the_debian_machine_has_otherwise_is_taken_out_by_hand_and_put_back(tmp_path):
    root = machine_tree(tmp_path, {"usr/sbin/update-grub": "#!/bin/sh\n", "proc/cmdline": "ro nohz_full=5\n"})
    [kernel] = [p for p in pieces(plan_on(root, "2-3"), "by-hand") if p.title.startswith("Kernel command line")]
    assert kernel.apply[0].startswith("# first take nohz_full=5 out of /etc/default/grub")
    assert "# put nohz_full=5 back where you took it out" in kernel.rollback


def test_another_grub_edits_its_line_and_the_rollback_gives_the_file_back(tmp_path):
    original = 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=rhel/root nohz_full=7 rhgb"\nGRUB_X=y\n'
    root = machine_tree(tmp_path, {"etc/default/grub": original, "boot/grub2/grub.cfg": ""})
    plan = plan_on(root, "2-3")
    [kernel] = [p for p in pieces(plan, "by-hand") if p.title.startswith("Kernel command line")]
    assert kernel.apply[-1] == kernel.rollback[-1] == "grub2-mkconfig -o /boot/grub2/grub.cfg"
    work = tmp_path / "grub"
    work.write_text(original)
    run_sh(kernel.apply, tmp_path, {"/etc/default/grub": work})
    line = [ln for ln in work.read_text().splitlines() if ln.startswith("GRUB_CMDLINE_LINUX=")]
    assert line == [f'GRUB_CMDLINE_LINUX="crashkernel=auto rd.lvm.lv=rhel/root rhgb {plan.cmdline_fragment}"']
    run_sh(kernel.rollback, tmp_path, {"/etc/default/grub": work})
    assert work.read_text() == original


def test_without_the_machines_files_both_ways_are_shown(master):
    plan = make_plan(master, "3")
    titles = [p.title for p in pieces(plan, "by-hand")]
    assert titles[:2] == ["Kernel command line, with grubby", "Kernel command line, with a file in /etc/default/grub.d"]
    assert "Both usual ways of setting the kernel command line follow." in " ".join(plan_text(plan).split())
    # Neither way's roll back runs from the script until the user says which one was used.
    script = rollback_script(plan, plan.route("by-hand"))
    assert '# grubby --update-kernel=ALL --remove-args="isolcpus=managed_irq,domain,3' in script
    assert "\n# if test -e /etc/default/grub.d/coremap-quiet.cfg.before-coremap; then" in script
    assert not re.search(r"^(grubby|update-grub|if test -e /etc/default/grub.d)", script, re.M)
    assert "\nsystemctl disable --now coremap-guard.service\n" in script        # the pieces of both, not commented


# -- tuned, apart ---------------------------------------------------------------------------------------
def test_the_tuned_route_says_which_words_set_outside_tuned_must_go_first(worker1):
    why = " ".join(make_plan(worker1, "5-10", replace=True).route("tuned").why.split())
    assert ("the running command line already has isolcpus=managed_irq,0-4,11-79 nohz_full=0-4,11-79 "
            "rcu_nocbs=0-4,11-79 systemd.cpu_affinity=5,6,7,8,9,10, set outside tuned") in why
    # Added to the 74 CPUs worker1 isolates already, 5-10 would leave none for housekeeping.
    with pytest.raises(PlanError, match=r"with CPUs 0-4,11-79, which the running command line isolates already "
                                        r"\(--replace isolates only the CPUs asked for\) leaves no CPU"):
        make_plan(worker1, "5-10")


def test_the_tuned_route_says_what_tuned_adds_and_never_mixes_with_the_hand_written_one(tmp_path):
    variables = "# shipped by tuned\nisolated_cores=${f:calc_isolated_cores:1}\n"
    root = machine_tree(tmp_path, {"etc/tuned/active_profile": "throughput-performance\n",
                                   "etc/tuned/cpu-partitioning-variables.conf": variables})
    plan = plan_on(root, "2-3")
    tuned = plan.route("tuned")
    why = " ".join(p.why for p in tuned.pieces)
    for word in ("nohz_full=2-3", "rcu_nocbs=2-3", "intel_pstate=disable", "nosoftlockup", "skew_tick=1", "nohz=on",
                 f"tuned.non_isolcpus={'00000ff3'}"):
        assert word in why, word
    assert "It adds no isolcpus=, managed_irq or irqaffinity=" in why
    tuned_lines = [line for p in tuned.pieces for line in (*p.apply, *p.rollback, p.text or "")]
    hand_lines = [line for p in plan.route("by-hand").pieces for line in (*p.apply, *p.rollback, p.text or "")]
    assert not any("isolcpus=" in line or "irqaffinity=" in line or "grubby" in line for line in tuned_lines)
    assert not any("tuned" in line for line in hand_lines)
    profile = tuned.pieces[1]
    assert profile.apply[0] == "tuned-adm profile cpu-partitioning"
    assert profile.rollback == ("tuned-adm profile throughput-performance",)
    # The packaged variables file is kept and put back byte for byte.
    folder = tmp_path / "plan"
    write_plan_folder(folder, plan)
    work = tmp_path / "variables.conf"
    work.write_text(variables)
    fake = {"/etc/tuned/cpu-partitioning-variables.conf": work}
    run_sh(tuned.pieces[0].apply, folder, fake)
    assert work.read_text().endswith("isolated_cores=2-3\n")
    run_sh(tuned.pieces[0].rollback, folder, fake)
    assert work.read_text() == variables and not Path(f"{work}.before-coremap").exists()
    text = plan_text(plan)
    assert text.index("== A. By hand") < text.index("== B. With tuned") < text.index("== On either route")
    assert "adds the kernel parameters above" not in text


# -- rollback for every piece, the guard unit ----------------------------------------------------------------
def test_every_piece_has_its_rollback_in_the_text_json_and_folder(tmp_path, capsys):
    root = machine_tree(tmp_path, {"usr/sbin/update-grub": "#!/bin/sh\n", "etc/default/irqbalance": "IRQBALANCE_ONESHOT=0\n"})
    out = tmp_path / "plan"
    assert main(["plan", "--quiet", "2-3", "--service", "trading", "--root", str(root.root), "--out", str(out),
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    every = [p for r in data["routes"] if r["offered"] for p in r["pieces"]] + data["common"]
    assert len(every) == 7
    for p in every:
        assert p["apply"] and p["rollback"], p["title"]
    plan = plan_on(root, "2-3", service="trading")
    text = plan_text(plan)
    assert text.count("  roll back:") == 7
    names = sorted(p.name for p in out.iterdir())
    assert names == ["cmdline.txt", "coremap-guard.service", "coremap-housekeeping.conf", "coremap-quiet.cfg",
                     "cpu-partitioning-variables.conf", "irqbalance", "plan.txt", "rollback-by-hand.sh",
                     "rollback-tuned.sh", "trading.service.coremap-cpuaffinity.conf"]
    for route in ("by-hand", "tuned"):
        script = (out / f"rollback-{route}.sh").read_text()
        assert script == rollback_script(plan, plan.route(route))
        subprocess.run(["sh", "-n", str(out / f"rollback-{route}.sh")], check=True)    # the shell can read it
        for piece in [*plan.route(route).pieces, *plan.common]:
            for line in piece.rollback:
                assert line in script, line
        assert script.index("coremap-guard.service") < script.index("# then reboot")
    # Last applied, first undone: the guard unit goes before the kernel's words come back.
    by_hand = (out / "rollback-by-hand.sh").read_text()
    assert by_hand.index("systemctl disable --now coremap-guard.service") < by_hand.index("coremap-quiet.cfg")


def test_irqbalance_file_of_the_machine_is_kept_whole_and_given_back(tmp_path):
    original = "# Debian's file\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=7\n"
    root = machine_tree(tmp_path, {"etc/default/irqbalance": original})
    plan = plan_on(root, "2-3")
    [irq] = [p for p in pieces(plan, "by-hand") if p.name == "irqbalance"]
    assert irq.path == "/etc/default/irqbalance" and irq.text.count("IRQBALANCE_BANNED_CPULIST=2-3\n") == 1
    assert "IRQBALANCE_ONESHOT=0\n" in irq.text and "IRQBALANCE_BANNED_CPULIST=7" not in irq.text
    mask = re.search(r"IRQBALANCE_BANNED_CPUS=([0-9a-f,]+)", irq.text).group(1)
    assert parse_cpumask(mask) == (2, 3)
    folder = tmp_path / "plan"
    write_plan_folder(folder, plan)
    work = tmp_path / "irqbalance"
    work.write_text(original)
    run_sh(irq.apply, folder, {"/etc/default/irqbalance": work})
    assert work.read_text() == irq.text
    run_sh(irq.rollback, folder, {"/etc/default/irqbalance": work})
    assert work.read_text() == original


def test_a_new_file_is_removed_by_its_rollback_and_an_unknown_one_is_found_out(tmp_path):
    root = machine_tree(tmp_path, {"etc/hostname": "n7\n"})        # /etc read: coremap's files are not there
    plan = plan_on(root, "2-3")
    folder = tmp_path / "plan"
    write_plan_folder(folder, plan)
    [guard] = plan.common
    assert guard.apply[0] == "install -D -m 0644 coremap-guard.service /etc/systemd/system/coremap-guard.service"
    unit = tmp_path / "sys-root" / "coremap-guard.service"
    run_sh(guard.apply, folder, {"/etc/systemd/system/coremap-guard.service": unit})
    assert unit.read_text() == guard.text
    run_sh(guard.rollback, folder, {"/etc/systemd/system/coremap-guard.service": unit})
    assert not unit.exists()
    # A capture without /etc: whether the file is there is found out when applied.
    [guard] = make_plan(read_topology(SysRoot(extract("sno"))), "2", root=SysRoot(extract("sno"))).common
    assert guard.apply[0].startswith("test ! -e /etc/systemd/system/coremap-guard.service || cp -p")
    for there in (False, True):
        if there:
            unit.write_text("mine\n")
        run_sh(guard.apply, folder, {"/etc/systemd/system/coremap-guard.service": unit})
        run_sh(guard.rollback, folder, {"/etc/systemd/system/coremap-guard.service": unit})
        assert (unit.read_text() == "mine\n") if there else not unit.exists()


def test_the_guard_unit_is_the_one_the_readme_shows(master):
    readme = (REPO / "README.md").read_text()
    start = readme.index("      # /etc/systemd/system/coremap-guard.service\n")
    block = []
    for line in readme[start:].splitlines()[1:]:
        if not line.startswith("      "):
            break
        block.append(line[6:])
    assert "\n".join(block) + "\n" == GUARD_UNIT
    [guard] = make_plan(master, "3").common
    assert guard.text == "# /etc/systemd/system/coremap-guard.service\n" + GUARD_UNIT
    assert "ExecStart=/usr/bin/coremap guard --interval 1 --reapply" in guard.text
    assert guard.rollback == ("systemctl disable --now coremap-guard.service",
                              "if test -e /etc/systemd/system/coremap-guard.service.before-coremap; then mv "
                              "/etc/systemd/system/coremap-guard.service.before-coremap "
                              "/etc/systemd/system/coremap-guard.service; else rm -f "
                              "/etc/systemd/system/coremap-guard.service; fi",
                              "systemctl daemon-reload")


def test_files_carry_the_lists(master):
    plan = make_plan(master, "4-5", service="trading")
    text = {f.name: f.text for f in plan.files}
    assert "isolated_cores=4-5\n" in text["cpu-partitioning-variables.conf"]
    assert "IRQBALANCE_BANNED_CPULIST=4-5\n" in text["irqbalance"]
    assert "[Service]\nCPUAffinity=4-5\n" in text["trading.service.coremap-cpuaffinity.conf"]
    assert "[Manager]\nCPUAffinity=" in text["coremap-housekeeping.conf"]
    assert any("share a core" in n or "shares a core" in n for n in plan.notes)   # 4 and 5 have siblings 60, 61


@pytest.mark.parametrize("quiet, why", [("0-111", "leaves no CPU"), ("200", "not online"), ("2-x", "not a CPU number"),
                                        ("", "names no CPU")])
def test_bad_quiet_sets(master, quiet, why):
    with pytest.raises(PlanError, match=why):
        make_plan(master, quiet)


def test_bad_service_name(master):
    with pytest.raises(PlanError, match="unit name"):
        make_plan(master, "3", service="x; rm -rf /")


def test_cli_writes_a_folder_and_applies_nothing(tmp_path, capsys):
    root = extract("master.internal")
    before = (root / "proc" / "cmdline").read_text()
    assert main(["plan", "--quiet", "3", "--root", str(root), "--out", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "isolcpus=managed_irq,domain,3 nohz_full=3 rcu_nocbs=3" in out
    assert "Written to" in out and "rollback-by-hand.sh" in out
    names = sorted(p.name for p in (tmp_path / "plan").iterdir())
    assert names == ["cmdline.txt", "coremap-guard.service", "coremap-housekeeping.conf", "coremap-quiet.cfg",
                     "cpu-partitioning-variables.conf", "irqbalance", "plan.txt", "rollback-by-hand.sh",
                     "rollback-tuned.sh"]
    assert (root / "proc" / "cmdline").read_text() == before
