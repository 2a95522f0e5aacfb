"""Runs made elsewhere, stored as imported runs: the upload page, ``POST /api/imports``, and the
key mappings remembered per log source. The readers themselves are ``app.importers``."""
