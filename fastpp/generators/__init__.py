"""Schedule generators: one function per schedule, reading like the paper's phases.

Every generator fills an op block from ``fastpp.ops.new_ops`` and the per-device lengths, with the
signature ``(ops, length, p, n, m, G)``. ``registry`` gives them their public names,
placements and constraints; ``build_schedule`` and sweeps (``fastpp.batch``) call them
through it. Beside its generators each module states their closed forms (SCHEDULES.md section
5), which the registry entries point to and ``fastpp.theory`` reads.
"""
