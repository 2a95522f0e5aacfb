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

from grpodeck.contract.log_markers import MARKERS_FILE, MARKERS_STREAM, sign
from grpodeck.contract.wire import (
    MAX_LOG_CHUNK,
    EvalProgress,
    LogBatch,
    LogChunk,
    parse_stage_line,
)
from worker.run_client import RunClient
from worker.supervise import redact_paths

log = logging.getLogger(__name__)
STREAMS = ("stdout", "stderr", MARKERS_STREAM)
READ_BYTES = MAX_LOG_CHUNK  # utf-8 text decodes to at most as many characters as bytes
MARKER_READ_BYTES = MAX_LOG_CHUNK // 4  # a signature more than doubles a short rank line


class LogShipper:
    def __init__(self, client: RunClient, folder: Path) -> None:
        self.client = client
        self.paths = {s: folder / f"{s}.log" for s in STREAMS}
        self.paths[MARKERS_STREAM] = folder / MARKERS_FILE
        self.offsets = dict.fromkeys(STREAMS, 0)
        self.stage: str | None = None  # the last stage line seen, sent until acknowledged
        self.eval_progress: EvalProgress | None = None  # with it, while evaluating

    def _read(self, stream: str, final: bool) -> tuple[LogChunk | None, int]:
        """The next chunk of a stream and the offset after it; a partial last line waits for
        its end unless ``final`` (the child has exited) or it fills a whole chunk."""
        path, start = self.paths[stream], self.offsets[stream]
        try:
            with path.open("rb") as fh:
                fh.seek(start)
                data = fh.read(MARKER_READ_BYTES if stream == MARKERS_STREAM else READ_BYTES)
        except FileNotFoundError:
            return None, start
        whole = stream == MARKERS_STREAM  # signed line by line: never a partial one
        if (whole or not final) and len(data) < READ_BYTES and b"\n" in data:
            data = data[:data.rindex(b"\n") + 1]
        elif (whole or not final) and len(data) < READ_BYTES:
            data = b""
        if not data:
            return None, start
        text = redact_paths(data.decode("utf-8", "replace"))  # as the error tail (issue 22)
        if stream == MARKERS_STREAM:  # the supervisor vouches for them (log_markers)
            if not self.client.marker_key:
                return None, start + len(data)
            text = sign(self.client.marker_key, text)
        return LogChunk(stream=stream, offset=start, text=text), start + len(data)

    def _stage_in(self, text: str) -> None:
        for line in text.splitlines():
            if (parsed := parse_stage_line(line)) is not None:
                self.stage, self.eval_progress = parsed

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
            self.client.logs(LogBatch(chunks=chunks, stage=self.stage,  # type: ignore[arg-type]
                                      eval_progress=self.eval_progress))
        except Exception as exc:  # noqa: BLE001 - the next call sends it again
            log.warning("run %s: log shipping failed: %s", self.client.run_id, exc)
            return False
        self.offsets.update(ends)
        self.stage = self.eval_progress = None
        return bool(chunks)

    def drain(self, max_calls: int = 400) -> None:
        """After the child exited: send everything left (a bounded number of calls)."""
        for _ in range(max_calls):
            if not self.ship(final=True):
                return
