"""The live picture: the sampler that reads a machine once per tick, the rates between two reads,
where tracked threads run (residency), and MachineState, the one immutable value per tick the
window draws."""
