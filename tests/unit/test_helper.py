"""The privileged helper refuses every malformed request (hypothesis-generated mutations of valid
ones) and writes nothing: IRQ requests run against a temporary copy of the sno capture, where a
write would show in proc/irq; thread requests run on the live machine against a thread of this test.
Valid requests work, in-process and through HelperClient's subprocess; AffinityService falls back
to the helper on EPERM."""
import io
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.pinning.refusals import PinWriteError
from app.pinning.helper import MAX_LINE, Helper, HelperClient, main, serve, VERSION
from app.sysroot import SysRoot
from tests.machines import CPU_CACHES, copy_machine, extract

ROOT = Path(__file__).resolve().parents[2]
CPUS = tuple(sorted(os.sched_getaffinity(0)))


@pytest.fixture(scope="module")
def sno_root(tmp_path_factory):
    src = extract("sno")
    dst = tmp_path_factory.mktemp("helper") / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    return SysRoot(dst)


@pytest.fixture(scope="module")
def parked():
    ev = threading.Event()
    th = threading.Thread(target=ev.wait)
    th.start()
    yield th.native_id
    ev.set()
    th.join()


def _irq_state(root: SysRoot) -> dict:
    return {n: (root.irq_dir(n) / "smp_affinity_list").read_bytes()
            for n in os.listdir(root.proc("irq")) if (root.irq_dir(n) / "smp_affinity_list").exists()}


def _irq_base():
    return {"op": "set_irq_affinity", "irq": 24, "cpus": "0-1"}


def _thread_base(tid):
    return {"op": "set_thread_affinity", "tid": tid, "cpus": str(CPUS[0])}


BAD_VALUES = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(["/etc/shadow", "../../../etc/passwd", "/proc/1/mem", "24; rm -rf /", "0x18"]))
BAD_INTS = st.one_of(st.integers(max_value=-1), st.integers(min_value=4194305),
                     st.integers(min_value=2 ** 63, max_value=2 ** 70))
BAD_CPUS = st.one_of(
    st.sampled_from(["2-x", "", " ", "-1", "0-", "1-0", "0,,1", "0-99999999", "(null)", "12", "0-12",
                     "/sys/devices/system/cpu/online", "0-11:0/4", "abc"]),
    st.text(alphabet="0123456789-,:/ x", max_size=12).filter(lambda s: not _valid_cpus(s)),
    BAD_VALUES, st.integers())


def _valid_cpus(s):
    from app.errors import CpuListError
    from app.parse.cpulist import parse_cpulist
    try:
        c = parse_cpulist(s)
    except CpuListError:
        return False
    return bool(c) and max(c) <= 11        # sno's CPUs 0-11 (the live machine's are fewer)


@st.composite
def malformed(draw, base):
    req = dict(base)
    op_key = next(k for k in req if k in ("tid", "irq"))
    how = draw(st.sampled_from(["op", "id_type", "id_range", "cpus", "extra", "missing", "other_op_keys"]))
    if how == "op":
        req["op"] = draw(st.one_of(st.text(max_size=20).filter(
            lambda s: s not in ("set_irq_affinity", "set_thread_affinity", "hello")),
            st.sampled_from(["write_file", "exec", "set_irq_affinity ", "SET_IRQ_AFFINITY"]), BAD_VALUES))
    elif how == "id_type":
        req[op_key] = draw(st.one_of(BAD_VALUES, st.text(max_size=8)))
    elif how == "id_range":
        req[op_key] = draw(BAD_INTS) if op_key == "tid" else draw(
            st.one_of(st.integers(max_value=-1), st.integers(min_value=65536)))
    elif how == "cpus":
        req["cpus"] = draw(BAD_CPUS)
    elif how == "extra":
        key = draw(st.sampled_from(["path", "file", "root", "value", "pid", "cmd"]) | st.text(max_size=6).filter(
            lambda k: k not in req))
        req[key] = draw(BAD_VALUES | st.just("/proc/irq/24/smp_affinity_list"))
    elif how == "missing":
        del req[draw(st.sampled_from(sorted(req)))]
    else:
        # The other op's key: a thread request carrying "irq" (or the reverse).
        req["irq" if op_key == "tid" else "tid"] = req.pop(op_key)
    return json.dumps(req)


RAW_JUNK = st.one_of(
    st.binary(max_size=64), st.sampled_from([b"{", b"[]", b"null", b'"set_irq_affinity"', b"42", b"{}",
                                             b'{"op":"hello","op":"exec"}'.replace(b'"op":"exec"', b'"x":1')]),
    st.just(json.dumps(_irq_base()).encode() + b" " * (MAX_LINE + 1)))

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(line=malformed(_irq_base()) | RAW_JUNK)
def test_malformed_irq_requests_are_refused_and_write_nothing(sno_root, line):
    before = _irq_state(sno_root)
    reply = Helper(sno_root).handle(line)
    assert reply["ok"] is False and reply["error"], reply
    assert set(reply) == {"ok", "error"}
    assert _irq_state(sno_root) == before


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs to see a thread write")
@pytest.mark.usefixtures("live_machine")
def test_malformed_thread_requests_are_refused_and_write_nothing(parked):
    live = Helper(SysRoot("/"))
    before = os.sched_getaffinity(parked)
    assert before != {CPUS[0]}

    @SETTINGS
    @given(line=malformed(_thread_base(parked)))
    def check(line):
        reply = live.handle(line)
        assert reply["ok"] is False and reply["error"], reply
        assert os.sched_getaffinity(parked) == before

    check()


def test_valid_irq_request_writes(tmp_path):
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    root = SysRoot(dst)
    h = Helper(root)
    assert h.handle(json.dumps(_irq_base())) == {"ok": True}
    assert (root.irq_dir(24) / "smp_affinity_list").read_text() == "0-1\n"
    assert h.handle('{"op":"hello"}') == {"ok": True, "version": VERSION}
    # Offline for this machine (sno has 0-11): refused, unchanged.
    assert h.handle('{"op":"set_irq_affinity","irq":24,"cpus":"11-12"}')["error"] .startswith("CPU 12 is offline; choose among the online CPUs")
    assert (root.irq_dir(24) / "smp_affinity_list").read_text() == "0-1\n"
    # A thread request through a capture is refused: only the live machine has threads to set.
    assert Helper(root).handle(json.dumps(_thread_base(os.getpid())))["ok"] is False


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs")
@pytest.mark.usefixtures("live_machine")
def test_valid_thread_request_on_the_live_machine(parked):
    original = os.sched_getaffinity(parked)
    try:
        reply = Helper(SysRoot("/")).handle(json.dumps(_thread_base(parked)))
        assert reply == {"ok": True, "cpus": str(CPUS[0])}
        assert os.sched_getaffinity(parked) == {CPUS[0]}
    finally:
        os.sched_setaffinity(parked, original)


def test_serve_refuses_an_overlong_line_once_and_goes_on(sno_root):
    data = b'{"op":"hello",' + b" " * (3 * MAX_LINE) + b'"x":1}\n{"op":"hello"}\n'
    out = io.StringIO()
    serve(sno_root, io.BytesIO(data), out)
    replies = [json.loads(x) for x in out.getvalue().splitlines()]
    assert replies == [{"ok": False, "error": f"request longer than {MAX_LINE} bytes"},
                       {"ok": True, "version": VERSION}]


def test_helper_takes_no_arguments(capsys):
    assert main(["--root", "/tmp"]) == 2
    assert "takes no arguments" in capsys.readouterr().err


@pytest.mark.skipif(len(CPUS) < 2 or os.geteuid() != 0, reason="starts the helper as root directly")
@pytest.mark.usefixtures("live_machine")
def test_client_talks_to_a_helper_process(parked):
    original = os.sched_getaffinity(parked)
    client = HelperClient([sys.executable, "-m", "app.pinning.helper"])
    try:
        assert client.hello() == VERSION
        client.set_thread_affinity(parked, (CPUS[-1],))
        assert os.sched_getaffinity(parked) == {CPUS[-1]}
        with pytest.raises(PinWriteError, match="no thread 4194304"):
            client.set_thread_affinity(4194304, (CPUS[-1],))    # refused before any write
    finally:
        os.sched_setaffinity(parked, original)
        client.close()


DROPPED = r"""
import json, os, sys
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.refusals import PinWriteError
from app.pinning.helper import HelperClient, VERSION
from app.pinning.journal import Journal
from app.sysroot import SysRoot
victim, cpu, jdir, use_helper = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
client = HelperClient([sys.executable, "-m", "app.pinning.helper"]) if use_helper else None
if client:
    client.hello()                      # started while still root, as pkexec would have
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
svc = AffinityService(SysRoot("/"), Journal(jdir + "/journal.jsonl"), writer=client)
[r] = svc.apply(PinRequest((PinTarget("thread", victim),), (cpu,)))
print(json.dumps({"code": r.code, "message": r.message, "after": r.after}))
"""


@pytest.mark.skipif(len(CPUS) < 2 or os.geteuid() != 0, reason="needs root to drop privileges")
@pytest.mark.parametrize("use_helper", [False, True])
@pytest.mark.usefixtures("live_machine")
def test_denied_direct_write_goes_through_the_helper(use_helper):
    import tempfile
    tmp_path = Path(tempfile.mkdtemp(prefix="coremap-dropped-"))   # pytest's tmp is 0700 root's
    os.chown(tmp_path, 65534, 65534)                     # the state folder of the user it drops to, as
    tmp_path.chmod(0o700)                                # the journal requires (its owner's, 0700)
    sleeper = subprocess.Popen(["sleep", "60"])          # root's process: nobody may not pin it
    try:
        original = os.sched_getaffinity(sleeper.pid)
        r = subprocess.run([sys.executable, "-c", DROPPED, str(sleeper.pid), str(CPUS[-1]), str(tmp_path),
                            "1" if use_helper else "0"], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        if use_helper:
            assert out["code"] == "ok" and os.sched_getaffinity(sleeper.pid) == {CPUS[-1]}
        else:
            assert out["code"] == "denied" and "needs the helper" in out["message"]
            assert os.sched_getaffinity(sleeper.pid) == original
    finally:
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(tmp_path)


RETRIED = r"""
import json, os, sys
from app.pinning.service import AffinityService, PinRequest, PinTarget
from app.pinning.helper import HelperClient, VERSION
from app.pinning.journal import Journal
from app.sysroot import SysRoot
victim, cpu, other, jdir = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
client = HelperClient([sys.executable, "-m", "app.pinning.helper"])
client.hello()                          # started while still root, as pkexec would have
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
svc = AffinityService(SysRoot("/"), Journal(jdir + "/journal.jsonl"))
req = PinRequest((PinTarget("thread", victim),), (cpu,))
codes = [svc.apply(req)[0].code, svc.with_writer(client).apply(req)[0].code]
codes.append(svc.apply(PinRequest((PinTarget("thread", victim),), (other,)))[0].code)
print(json.dumps(codes))
"""


@pytest.mark.skipif(len(CPUS) < 2 or os.geteuid() != 0, reason="needs root to drop privileges")
@pytest.mark.usefixtures("live_machine")
def test_with_writer_retries_through_the_helper_once():
    """The window's "Retry with privileges": the denied pin goes through the helper, and the service
    it came from still has no writer (the next denied pin asks again)."""
    import tempfile
    tmp_path = Path(tempfile.mkdtemp(prefix="coremap-retried-"))   # pytest's tmp is 0700 root's
    os.chown(tmp_path, 65534, 65534)                     # the state folder of the user it drops to, as
    tmp_path.chmod(0o700)                                # the journal requires (its owner's, 0700)
    sleeper = subprocess.Popen(["sleep", "60"])          # root's process: nobody may not pin it
    try:
        original = os.sched_getaffinity(sleeper.pid)
        r = subprocess.run([sys.executable, "-c", RETRIED, str(sleeper.pid), str(CPUS[-1]), str(CPUS[0]),
                            str(tmp_path)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout) == ["denied", "ok", "denied"]
        assert os.sched_getaffinity(sleeper.pid) == {CPUS[-1]} != original
    finally:
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(tmp_path)


# -- issue 13's ops: a mask an isolate moves, irqbalance's banned CPUs ---------------------------------------
@pytest.fixture
def mask_root(tmp_path):
    """sno's CPUs, a workqueue cpumask, a network queue, and irqbalance's Debian file (with other lines)."""
    from tests.machines import writable_test_tree
    src = extract("sno")
    dst = tmp_path / "sno"
    copy_machine(src, dst, only=("proc/irq", "sys/devices/system/cpu"), leave_out=(CPU_CACHES,))
    (dst / "sys" / "devices" / "virtual" / "workqueue").mkdir(parents=True)
    (dst / "sys" / "devices" / "virtual" / "workqueue" / "cpumask").write_text("fff\n")
    q = dst / "sys" / "class" / "net" / "eth0" / "queues" / "rx-3"
    q.mkdir(parents=True)
    (q / "rps_cpus").write_text("0\n")
    (dst / "etc" / "default").mkdir(parents=True)
    (dst / "etc" / "default" / "irqbalance").write_text(
        '# Debian\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=5\nIRQBALANCE_ARGS="--policyscript=x"\n')
    return SysRoot(writable_test_tree(dst))


def _files(root: SysRoot) -> dict:
    return {p: p.read_bytes() for p in root.root.rglob("*") if p.is_file() and "irq" not in p.parts[-3:-1]}


MASK_OK = {"op": "set_mask", "kind": "rps", "netdev": "eth0", "queue": 3, "cpus": "2-3"}
BAD_MASKS = [dict(MASK_OK, kind="file"), dict(MASK_OK, netdev="../../../etc"), dict(MASK_OK, netdev="eth0/x"),
             dict(MASK_OK, netdev=None), dict(MASK_OK, netdev="e" * 16), dict(MASK_OK, queue=-1),
             dict(MASK_OK, queue=70000), dict(MASK_OK, queue="3"), dict(MASK_OK, queue=4),
             dict(MASK_OK, kind="workqueue"), {**MASK_OK, "path": "/etc/shadow"}, dict(MASK_OK, cpus="12"),
             dict(MASK_OK, netdev="eth1"), {k: v for k, v in MASK_OK.items() if k != "queue"},
             {"op": "irqbalance_ban_cpus", "cpus": "2-3", "path": "/etc/shadow"},
             {"op": "irqbalance_ban_cpus", "cpus": "99"}, {"op": "irqbalance_ban_cpus", "cpus": ""}]


@pytest.mark.parametrize("req", BAD_MASKS, ids=[str(i) for i in range(len(BAD_MASKS))])
def test_bad_mask_and_irqbalance_requests_are_refused_and_write_nothing(mask_root, req):
    before = _files(mask_root)
    reply = Helper(mask_root).handle(json.dumps(req))
    assert reply["ok"] is False and reply["error"], reply
    assert _files(mask_root) == before


def test_valid_mask_and_irqbalance_requests_write(mask_root):
    h = Helper(mask_root)
    assert h.handle(json.dumps(MASK_OK)) == {"ok": True}
    assert (mask_root.net_dir("eth0") / "queues" / "rx-3" / "rps_cpus").read_text() == "0000000c\n"
    assert h.handle('{"op":"set_mask","kind":"workqueue","netdev":null,"queue":0,"cpus":"0,4-11"}') == {"ok": True}
    assert mask_root.workqueue_cpumask().read_text() == "00000ff1\n"
    reply = h.handle('{"op":"irqbalance_ban_cpus","cpus":"1-3"}')
    assert reply == {"ok": True, "path": str(mask_root.path("etc", "default", "irqbalance"))}
    assert mask_root.path("etc", "default", "irqbalance").read_text() == (
        '# Debian\nIRQBALANCE_ONESHOT=0\nIRQBALANCE_BANNED_CPULIST=1-3\nIRQBALANCE_ARGS="--policyscript=x"\n')


def test_a_capture_never_gets_irqbalances_file(tmp_path):
    src = extract("sno")
    copy_machine(src, tmp_path / "s", only=("sys/devices/system/cpu",), leave_out=(CPU_CACHES,))
    reply = Helper(SysRoot(tmp_path / "s")).handle('{"op":"irqbalance_ban_cpus","cpus":"1"}')
    assert reply["ok"] is False and "live machine" in reply["error"]
    assert not (tmp_path / "s" / "etc").exists()


def test_the_banned_line_is_appended_when_the_file_has_none():
    from app.machine.irqbalance import with_banned_cpus
    assert with_banned_cpus("", (2, 3)) == "# coremap: irqbalance never moves an IRQ onto the quiet CPUs\n" \
                                           "IRQBALANCE_BANNED_CPULIST=2-3\n"
    assert with_banned_cpus("A=1\nexport IRQBALANCE_BANNED_CPULIST=7\nIRQBALANCE_BANNED_CPULIST=8\n", (1,)) == \
        "A=1\nIRQBALANCE_BANNED_CPULIST=1\n"
