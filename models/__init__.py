"""Z3 models of the migration protocol: BMC, inductive proofs, reachability, mutants."""
