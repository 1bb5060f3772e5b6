"""read_* functions: SysRoot -> frozen dataclasses (Topology, IrqTable, ThreadsSample, MachineSample)."""
