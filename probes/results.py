"""The one check of a stored probe result (a session's, `report --probe FILE`, a result file opened in
the window, an export) before the text, the plots and the report read it: a result whose
`placements` held strings stopped the report with a traceback (issue 24).

Each probe's result has one typed definition, in its own package (probes/<name>/result.py Stored),
extending what every result may hold (probes/result.py Result); app/parse/json_text.py convert checks a
result against it. The model (app/store) sits below probes/ and cannot name these types: whoever reads a
stored result for a person (the CLI, the window) hands check_result to the model's reader."""
from __future__ import annotations

from app.format import printable
from app.parse.json_text import convert, JsonInputError
from app.store.results import fields, fields_checked
from probes.catalog import RECORDS
from probes.result import Result

TEXTS = ("probe", "label", "source", "title", "verdict")    # shown in a terminal and the window
_SHARED = {f.name: f for f in fields(Result)}


def check_result(raw, what: str = "probe result") -> tuple[dict | None, list[str]]:
    """(the result with only fields in their definition, notes on what was left out); None, with one
    note naming the field, when it is not a probe result or its probe's own fields are out of shape.
    A shared field its probe's type does not define again is left out alone, with a note."""
    if type(raw) is not dict or type(raw.get("probe")) is not str:
        return None, [f'{what}: not a probe result (no "probe" name); left out']
    kept = {k: v for k, v in raw.items() if k != "schema_version"}   # the --json document's, not the result's
    record = RECORDS.get(raw["probe"])
    type_ = record.part("probes.{}.result").Stored if record is not None else Result
    notes = fields_checked(kept, Result, what, names={f.name for f in fields(type_) if _SHARED.get(f.name) == f})
    if type_ is not Result:
        try:
            convert(kept, type_, what=what)
        except JsonInputError as e:
            why = printable(str(e).removeprefix(f"{what}: "))
            return None, [f"{what}: a {printable(raw['probe'])} result out of shape ({why}); left out"]
    for key in TEXTS:
        if type(kept.get(key)) is str:
            kept[key] = printable(kept[key][:1 << 16])
        elif key in kept:
            del kept[key]       # null: no text; readers .get(key, "") it
    return kept, notes
