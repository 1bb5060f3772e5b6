"""Quiet CPUs: isolating CPUs at run time and giving them back, which CPUs are quiet now (the
ledger of isolates in effect), the guard that keeps pins and quiet CPUs as set, and the boot plan
that makes it permanent."""
