"""The run record: its table, the only place that changes its status, its queries and writes,
and how a route finds a run. Every other domain stands on it; it imports none of them."""
