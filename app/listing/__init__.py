"""The runs list: its one-query pages with filters and sort, each row's numbers, tags, notes and
archive, and ``GET /api/runs``."""
