"""The probe form's presets (probes/catalog.py Preset): wakeup's "like cyclictest" sets what
`cyclictest -p 80 -i 1000` measures with, in one click, and the run asks the child for exactly that
(its own argument parser reads the job back)."""
from __future__ import annotations

from probes.spec import record
from widgets.probe.form import ProbeForm


def test_like_cyclictest_sets_fifo_80_a_1_ms_timer_and_the_hold(qtbot):
    form = ProbeForm()
    qtbot.addWidget(form)
    form.set_probe("wakeup")
    form.set_cpus([0])
    # the defaults: SCHED_OTHER, and the hold on (no box ticked to give it up)
    assert form.spec().policy is None and not form.field("no_dma_latency").isChecked()
    form.field("interval_us").setValue(250)
    form.field("no_dma_latency").setChecked(True)
    button = form.preset_buttons["wakeup"]["like cyclictest"]
    assert "cyclictest -p 80 -i 1000" in button.toolTip()
    button.click()
    spec = form.spec()
    assert (spec.policy, spec.priority, spec.interval_us, spec.no_dma_latency) == ("fifo", 80, 1000, False)
    (job,) = spec.jobs()
    ns = record("wakeup").measure.build_parser().parse_args(list(job.args))
    assert (ns.policy, ns.priority, ns.interval_us, ns.no_dma_latency) == ("fifo", 80, 1000, False)
    assert job.label == "wakeup CPU 0 fifo 80"
    # only the wakeup page has it
    assert set(form.preset_buttons) == {"wakeup"}
