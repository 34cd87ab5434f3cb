"""What operators see of a running gateway: Prometheus metrics (per process, per worker, fleets),
OpenTelemetry traces, and the redaction that keeps secrets out of all of it."""
