"""ProbeSpec (probes/spec.py): the jobs a probe run becomes, and the options each probe refuses.

Oracles: each probe's own argument parser (probes/<name>/measure.py build_parser, what the child runs)
reads every job's argv back to the values asked for; probes/sweep/measure.py's default rounds.
"""
from __future__ import annotations

import pytest

from app.errors import CoremapError
from probes.catalog import RECORDS
from probes.spec import APPLIES, PROBE_NAMES, ProbeSpec, ProbeSpecError, applies, flag, record
from probes.sweep.measure import DEFAULT_ROUNDS

# A value for each option, as a front end would give it.
GIVEN = {"unbound": True, "duty": 50.0, "threshold_ns": 2000, "attribute": True, "interval_us": 250,
         "no_dma_latency": True, "policy": "fifo", "priority": 70, "slack_ns": 1, "rounds": 7,
         "pairs": "0:1", "command": ("true",), "placement": "0:1,unpinned", "transport": "pipe",
         "size": 3 << 20, "node": 0, "thp": "never", "work": "atomic", "threads": 3}


def _parse(job):
    """The job's argv as the child's own parser reads it."""
    return record(job.probe).measure.build_parser().parse_args(list(job.args))


@pytest.mark.parametrize("probe", PROBE_NAMES)
def test_the_childs_parser_reads_back_every_option_that_applies(probe):
    options = {k: v for k, v in GIVEN.items() if applies(k, probe) and k != "unbound"}
    spec = ProbeSpec(probe, (0, 1), seconds=0.5, **options)
    jobs = spec.jobs()
    assert len(jobs) == (2 if record(probe).per_cpu else 1)
    for job in jobs:
        ns = _parse(job)
        assert ns.seconds == 0.5
        for k, v in options.items():
            got = getattr(ns, k)
            if k == "command":
                # argparse keeps the "--" in a REMAINDER; the child (probes/counters/measure.py) drops it
                assert got[got.index("--") + 1:] == list(v)
            else:
                assert got == v, k
    assert _parse(jobs[0]).cpu == ("0" if record(probe).per_cpu else "0-1")


def test_per_cpu_jobs_their_labels_cpus_and_seconds():
    a, b = ProbeSpec("jitter", (3, 1), seconds=0.3, duty=50.0, policy="fifo", priority=80).jobs()
    assert (a.cpus, b.cpus) == ((1,), (3,))
    assert a.label == "jitter CPU 1 50% fifo 80" and a.seconds == 0.3 and a.steps == 1
    assert a.args[:4] == ("--cpu", "1", "--seconds", "0.3")
    # 100% is the default duty: no suffix
    assert ProbeSpec("jitter", (2,), duty=100.0).jobs()[0].label == "jitter CPU 2"


def test_unbound_runs_keep_no_cpu_free():
    (job,) = ProbeSpec("wakeup", (2,), unbound=True).jobs()
    assert job.cpus == () and job.label == "wakeup CPU 2 unbound" and "--unbound" in job.args
    (job,) = ProbeSpec("jitter", unbound=True).jobs()
    assert job.cpus == () and job.label == "jitter unbound" and "--cpu" not in job.args


def test_sweep_and_c2c_take_the_list_in_one_job():
    (job,) = ProbeSpec("sweep", (0, 1, 2, 3), rounds=9).jobs()
    assert job.cpus == (0, 1, 2, 3) and job.label == "sweep CPUs 0-3"
    assert job.steps == 9 and job.seconds is None
    assert ProbeSpec("sweep", (0, 1)).jobs()[0].steps == DEFAULT_ROUNDS
    assert ProbeSpec("c2c", (0, 1, 2, 3)).jobs()[0].steps == 6          # every pair of four CPUs
    assert ProbeSpec("c2c", (0, 1, 2), pairs="0:1,0:2").jobs()[0].steps == 2


@pytest.mark.parametrize("option", sorted(set(GIVEN)))
def test_an_option_another_probe_takes_is_refused_by_name(option):
    for probe in PROBE_NAMES:
        if applies(option, probe):
            ProbeSpec(probe, (0,), **{option: GIVEN[option]})
            continue
        with pytest.raises(ProbeSpecError) as e:
            ProbeSpec(probe, (0,), **{option: GIVEN[option]})
        assert isinstance(e.value, CoremapError)
        assert str(e.value).startswith(f"{flag(option)} does not apply to the {probe} probe; it applies to ")
        assert APPLIES[option][-1] in str(e.value)


def test_a_zero_is_an_option_given():
    with pytest.raises(ProbeSpecError, match="--slack-ns"):
        ProbeSpec("c2c", (0, 1), slack_ns=0)
    assert "--slack-ns" in ProbeSpec("jitter", (0,), slack_ns=0).jobs()[0].args


def test_no_such_probe():
    with pytest.raises(ProbeSpecError, match="no probe named 'nap'"):
        ProbeSpec("nap", (0,))


@pytest.mark.parametrize("probe", PROBE_NAMES)
def test_each_record_is_what_its_child_takes(probe):
    """A record's fields are options of the child's own parser, with the record's defaults and choices
    (the child reads them from the record), and its module makes and lays out results."""
    rec, mod = record(probe), record(probe).measure
    assert all(callable(getattr(mod, f, None)) for f in ("build_parser", "run", "summarize", "text_lines"))
    defaults = vars(mod.build_parser().parse_args([]))
    for f in rec.fields:
        if f.kind == "command":
            continue
        assert f.option in defaults, f.option
        if f.unless:
            # the child must see whether it was given, to refuse it beside the option it excludes
            assert defaults[f.option] is None, f.option
        elif f.kind != "flag" and f.default is not None:
            assert defaults[f.option] == f.default, f.option
        choices = next(a.choices for a in mod.build_parser()._actions if a.dest == f.option)
        if f.kind == "choice":
            assert tuple(choices) == f.values()


def test_values_out_of_a_records_bounds_are_refused_with_the_bounds():
    with pytest.raises(ProbeSpecError, match=r"^--rounds 1: the sweep probe takes 2 to 100000 rounds$"):
        ProbeSpec("sweep", (0, 1), rounds=1)
    assert ProbeSpec("messaging", rounds=1).rounds == 1          # one round is enough to alternate nothing
    with pytest.raises(ProbeSpecError, match="--transport 'tcp': the messaging probe takes shm, pipe, udp"):
        ProbeSpec("messaging", transport="tcp")
    with pytest.raises(ProbeSpecError, match="--size 0 B: the first-touch probe takes 1 B to"):
        ProbeSpec("first-touch", (0,), size=0)
    with pytest.raises(ProbeSpecError, match="no probe option named 'colour'"):
        ProbeSpec("jitter", (0,), colour="red")


def test_labels_say_what_each_record_shows():
    assert ProbeSpec("messaging").jobs()[0].label == "messaging auto shm"
    assert ProbeSpec("messaging", (0, 1), transport="pipe", placement="0:1").jobs()[0].label == "messaging 0:1 pipe"
    assert ProbeSpec("scaling").jobs()[0].label == "scaling all CPUs lock"
    assert ProbeSpec("scaling", (0, 1), command=("make", "-j")).jobs()[0].label == "scaling CPUs 0-1 -- make -j"
    (a,) = ProbeSpec("first-touch", (3,), size=64 << 20, thp="never", node=0).jobs()
    assert a.label == "first-touch CPU 3 64 MiB memory on node 0 thp never"


def test_steps_come_from_the_record():
    assert [j.steps for j in ProbeSpec("counters", (0, 1)).jobs()] == [2, 2]      # pinned, then unpinned
    assert ProbeSpec("jitter", (0,)).jobs()[0].steps == 1
    assert set(RECORDS) == set(PROBE_NAMES)
