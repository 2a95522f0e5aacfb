"""What workers and scripts report, and what their silence means: the run-token report API,
the batch pipeline over metrics, rollouts, health and alerts, outside runs' registration, and
the lost-run watch. It stands above every service a batch reaches."""
