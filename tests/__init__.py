"""The test suite. Imported before its conftest and its modules, so this is where the suite's
process-wide switches go.

Bytecode caches on, for the suite's processes and every one they start (servers, workers,
trainings, scripts): a machine that sets PYTHONDONTWRITEBYTECODE (this one does) made each of
them compile the project from source (~0.3 s of CPU per server start, some 160 starts) and
each xdist worker rewrite and compile every test module anew, on every run.
"""

import os
import sys

sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
