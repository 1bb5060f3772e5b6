"""What coremap changes on a machine, and how it gives it back: the pin service, the one pin flow over
small writers (a thread's affinity, an IRQ's, a kernel mask), the journal that records every write
before it is made, the undo/redo history read from it, and the privileged helper."""
