"""One run's page (header, stages, devices, findings, charts) and its JSON twin, and deleting a
run with everything it left in other domains."""
