"""Many nodes at once: per-node configuration facts, job-scoped config drift, a GPU ledger across
archived incidents, and a SYNTHETIC incident generator for scale benchmarks.

Why: a job of 128 nodes fails because of one node, and that node is often the odd one out (another
driver, another NCCL, a GPU that failed three times this month). These modules make it stand out.
"""
