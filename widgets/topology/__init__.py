"""The CPU grid, one room per concern:

- layout.py   the boxes and where each goes (no Qt: unit-tested in tests/unit)
- items.py    the graphics items (cell, core box, group box), their palette and fonts
- legend.py   ColorLegend, the colour bar and the key under the grid
- tooltip.py  a cell's tooltip text
- drag.py     the grid as a drag source: CPU drags (CPU_MIME) to the probe panel
- drop.py     the grid as a drop target: the target under the cursor, lit, judged by a DropPolicy
- gestures.py CpuGestures: the mouse and keys (click, select, CPU drags, pan, zoom), held by the view
- view.py     TopologyView: the scene, set_state and recolouring, selection and zoom, drops

The grid knows nothing of pinning: widgets/pinning/ gives it a drop policy and listens to its
`pin_requested`.
"""
