"""Pinning in the window: drag a thread, process or IRQ onto the CPU grid, or pick rows and press
Ctrl+P. One room per concern:

- mime.py        the pin drag's payload (PIN_MIME, PinPayload), written by the tables, read by the grid
- drop.py        PinDropPolicy: what the grid may take before a drop, and the hint that says why not
- dialog.py      the "Pin to…" dialog and its check of a typed CPU list
- feedback.py    the result line, the journal of pins, the restore bar
- controller.py  PinController: requests, undo / redo / restore through one AffinityService

This package imports the grid (widgets/topology/), never the other way round: the grid emits
`pin_requested(PinRequest)` and asks the drop policy it was given.
"""
