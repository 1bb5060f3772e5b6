"""The window's two big tables: the IRQ table (`irqs`) and the process/thread tree (`threads`), and the
row sync both use to apply a MachineState in place (`rows`)."""
