"""Ship the training child's stdout/stderr to the web app as it grows, with the child's stage.

Why the worker and not the child: the output includes what the child prints as it dies (a
CUDA error, a traceback, a kill), which only a process outside it can still read and send.
The child writes to two files in its run folder; each call of ``ship`` sends the bytes added
since the last acknowledged offset of each file (one chunk per stream, whole lines when the
file has any), so a failed call is simply sent again next time, and the server stores a resent
chunk once (it is keyed by stream and offset).
"""

from __future__ import annotations

import logging
from pathlib import Path

from grpodeck.contract.wire import MAX_LOG_CHUNK, STAGE_PREFIX, LogBatch, LogChunk
from worker.run_client import RunClient
from worker.supervise import redact_paths

log = logging.getLogger(__name__)
STREAMS = ("stdout", "stderr")
READ_BYTES = MAX_LOG_CHUNK  # utf-8 text decodes to at most as many characters as bytes


class LogShipper:
    def __init__(self, client: RunClient, folder: Path) -> None:
        self.client = client
        self.paths = {s: folder / f"{s}.log" for s in STREAMS}
        self.offsets = dict.fromkeys(STREAMS, 0)
        self.stage: str | None = None  # the last stage line seen, sent until acknowledged

    def _read(self, stream: str, final: bool) -> tuple[LogChunk | None, int]:
        """The next chunk of a stream and the offset after it; a partial last line waits for
        its end unless ``final`` (the child has exited) or it fills a whole chunk."""
        path, start = self.paths[stream], self.offsets[stream]
        try:
            with path.open("rb") as fh:
                fh.seek(start)
                data = fh.read(READ_BYTES)
        except FileNotFoundError:
            return None, start
        if not final and len(data) < READ_BYTES and b"\n" in data:
            data = data[:data.rindex(b"\n") + 1]
        elif not final and len(data) < READ_BYTES:
            data = b""
        if not data:
            return None, start
        text = redact_paths(data.decode("utf-8", "replace"))  # as the error tail (issue 22)
        return LogChunk(stream=stream, offset=start, text=text), start + len(data)

    def _stage_in(self, text: str) -> None:
        for line in text.splitlines():
            if line.startswith(STAGE_PREFIX):
                self.stage = line[len(STAGE_PREFIX):].strip()

    def ship(self, final: bool = False) -> bool:
        """Send what is new; True when something was sent. Never raises: the log is worth a
        retry, not a failed run."""
        chunks, ends = [], {}
        for stream in STREAMS:
            chunk, end = self._read(stream, final)
            if chunk is not None:
                chunks.append(chunk)
                ends[stream] = end
                if stream == "stdout":
                    self._stage_in(chunk.text)
        if not chunks and self.stage is None:
            return False
        try:
            stage = self.stage if self.stage in ("loading_model", "first_step", "saving") else None
            self.client.logs(LogBatch(chunks=chunks, stage=stage))
        except Exception as exc:  # noqa: BLE001 - the next call sends it again
            log.warning("run %s: log shipping failed: %s", self.client.run_id, exc)
            return False
        self.offsets.update(ends)
        self.stage = None
        return bool(chunks)

    def drain(self, max_calls: int = 400) -> None:
        """After the child exited: send everything left (a bounded number of calls)."""
        for _ in range(max_calls):
            if not self.ship(final=True):
                return
