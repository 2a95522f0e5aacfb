"""Accounts: users, browser sessions and API keys, and who may do what to a run."""
