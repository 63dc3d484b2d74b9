"""Slurm hooks: where operators already live.

``gpulib slurm epilog`` (slurm.conf ``Epilog=``) captures every node of a job that ended badly
before anyone reboots it; ``gpulib slurm healthcheck`` (``HealthCheckProgram=``) runs preflight's
single-node checks and drains a node that fails them with a ``gpulib:`` reason, resuming only
the drains it set. Both talk to Slurm through :mod:`.scontrol` only, with timeouts.
"""
