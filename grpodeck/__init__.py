"""GRPO Deck. ``grpodeck.contract`` is what the web app, the worker and outside clients share."""
