"""The background processes' liveness: heartbeats, the stale-process banner and ``/healthz``."""
