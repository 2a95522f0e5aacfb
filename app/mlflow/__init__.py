"""A small MLflow-compatible subset of the tracking REST API under ``/mlflow``.

With ``MLFLOW_TRACKING_URI=http://deck:8000/mlflow`` any framework that logs through MLflow's
client (TRL's ``report_to="mlflow"``, Lightning's MLFlowLogger, ...) reports to the Deck with no
new package: an MLflow run becomes an outside run (the path ``grpodeck.client`` uses), its
params the run's config, its tags Deck tags, its metrics metric points through the one ingest
pipeline. Artifacts, models, the registry, traces and search are not offered.
"""
