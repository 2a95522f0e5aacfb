"""Uploaded prompt datasets: the only local files a run may train on (issue 7, bug 4)."""
