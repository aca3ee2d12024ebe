"""The control plane, without pyspark: checkpoints and the lease, supervision, monitoring, backfills, catch-up planning, on-call requests, the audit."""
