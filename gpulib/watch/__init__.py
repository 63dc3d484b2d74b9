"""``gpulib watch``: a training heartbeat that catches an interruption while it happens.

Follows the job's logs (:mod:`.follow`), raises alerts for silence, error signatures of the
diagnosis catalogue and step times out of band (:mod:`.rules`), serves its state as Prometheus
metrics (:mod:`.metrics`) and, on an alert, captures an evidence bundle and diagnoses it
(:mod:`.actions`). The Prometheus alert rules and the Grafana dashboard that go with it live in
``monitoring/``.
"""
