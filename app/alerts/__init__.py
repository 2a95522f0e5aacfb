"""Alerts: findings that reach a person, once, with the evidence and a link.

models (records, outbox) -> rules (who is told about what) -> service (open/update/resolve from
the stored findings' transitions, write outbox jobs in the same transaction) -> sender (a
separate process claims jobs atomically and delivers them through channels).
"""
