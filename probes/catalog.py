"""The probe catalog: every probe this coremap has, found by its folder, in the order its record gives.

Everything that has to know about a probe reads its record (probes/record.py): the spec
(probes/spec.py) and through it the CLI (app/cli/probe.py) and the child (probes/__main__.py), the
panel's form, tabs and live runs (widgets/probe/), the text (probes/text.py), the report's pictures and
sections (widgets/pictures.py, widgets/report_images.py).

How to add a probe: a folder and a view, no table to edit.
- probes/<name>/__init__.py: its RECORD, a ProbeRecord (its `order` places it in the menus);
- probes/<name>/measure.py: its runner (build_parser, run, summarize, text_lines), what
  `python -m probes <name>` runs;
- probes/<name>/_loop.c: its timing loop, registering its functions with LP_METHODS (probes/_loops.h);
  it is compiled into probes._native, here by setup.py and on an ssh agent's far side by the agent,
  both from the files probes/build.py finds;
- probes/<name>/result.py: the typed definition of its stored result;
- widgets/probe/<name>.py, when its record names a view: View, the probe panel's tab of its runs,
  and Picture, when it names a picture for reports.
A name with a dash ("first-touch") has an underscore in its folder's and its view's names.

Found, not listed: the probes are the packages in this folder, each imported here by its name. This and
ProbeRecord.part (a probe's runner and view, by its name) are the only imports by a name, rather than
a table of probes, which would be a second place each new probe must be written. A record does not
import its runner, so reading all of them costs every `coremap` run only the records (issue 12).
"""
from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from probes.record import ProbeRecord


def _find() -> dict[str, ProbeRecord]:
    """The RECORD of each package beside this module, in their `order`."""
    found = [importlib.import_module(f"{__package__}.{m.name}").RECORD
             for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.ispkg]
    return {r.name: r for r in sorted(found, key=lambda r: r.order)}


# In the order the form and the CLI list them.
RECORDS: dict[str, ProbeRecord] = _find()
NAMES = tuple(RECORDS)
