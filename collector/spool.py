"""The durable on-disk spool: acknowledged requests not yet stored in ClickHouse.

Every acknowledged request passes through here (a write-ahead log): the collector answers a sender
once its request is in a segment that is fsynced, file and directory entry (POSIX: a rename is
durable only after its directory is synced). A segment is one batch file of framed requests
(:mod:`collector.wire`) named ``seg-<sequence>-<spans>.bin``.

Inserters store segments oldest first, several at a time. Before one inserts a group it records the
group (which segments, which deduplication token) in ``group-<token>.json``, fsynced; after a crash
the same group is inserted again with the same token, so ClickHouse drops what was already stored
(``insert_deduplication_token``), and only then are the segments deleted.

Thread-safety: every method takes an internal lock; file I/O blocks the calling thread.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

_SEGMENT = re.compile(r"^seg-(\d{12})-(\d+)\.bin$")
_GROUP = re.compile(r"^group-([0-9a-f]{32})\.json$")


class SpoolFullError(RuntimeError):
    """The spool has no room for a batch; nothing was written."""


@dataclass(frozen=True)
class Segment:
    """One spooled batch file.

    Attributes:
        path: the segment file.
        sequence: position in insert order.
        spans: spans in its requests (valid or not).
        size: bytes on disk.
        created: wall-clock time it was written (seconds since the epoch).
    """

    path: Path
    sequence: int
    spans: int
    size: int
    created: float


@dataclass(frozen=True)
class Group:
    """Segments being inserted together, with the token that makes repeating the insert harmless."""

    segments: tuple[Segment, ...]
    token: str

    @property
    def spans(self) -> int:
        """Spans in the group's segments."""
        return sum(s.spans for s in self.segments)


def fsync_directory(directory: Path) -> None:
    """Make renames and unlinks in ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Spool:
    """Ordered, size-bounded, fsynced segments in ``directory``.

    Args:
        directory: created if missing; on the same file system as the files :meth:`append` moves in.
        max_bytes: the total segment size :meth:`append` refuses to exceed.
    """

    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        directory.mkdir(parents=True, exist_ok=True)
        self._segments: list[Segment] = []
        for path in sorted(directory.iterdir()):
            match = _SEGMENT.match(path.name)
            if match is None:
                continue
            stat = path.stat()
            self._segments.append(Segment(path, int(match[1]), int(match[2]), stat.st_size, stat.st_mtime))
        self._next = self._segments[-1].sequence + 1 if self._segments else 0
        self._bytes = sum(s.size for s in self._segments)
        self._spans = sum(s.spans for s in self._segments)
        self._groups: dict[str, Group] = {}
        self._claimed: set[str] = set()
        for path in sorted(directory.iterdir()):
            match = _GROUP.match(path.name)
            if match is None:
                continue
            members = set(json.loads(path.read_text())["segments"])
            segments = tuple(s for s in self._segments if s.sequence in members)
            if segments:
                self._groups[match[1]] = Group(segments, match[1])
            else:
                path.unlink()

    def append(self, batch_file: Path, spans: int) -> Segment:
        """Move ``batch_file`` into the spool, durably, as the newest segment.

        Raises:
            SpoolFullError: it would take the spool past ``max_bytes``; the file is left in place.
            OSError: the file could not be synced or moved.
        """
        size = batch_file.stat().st_size
        with batch_file.open("rb+") as handle:
            os.fsync(handle.fileno())
        with self._lock:
            if self._bytes + size > self.max_bytes:
                raise SpoolFullError(
                    f"spool holds {self._bytes} bytes; {size} more would pass its limit of {self.max_bytes}"
                )
            path = self.directory / f"seg-{self._next:012d}-{spans}.bin"
            os.replace(batch_file, path)
            fsync_directory(self.directory)
            segment = Segment(path, self._next, spans, size, time.time())
            self._segments.append(segment)
            self._next += 1
            self._bytes += size
            self._spans += spans
            return segment

    def next_group(self, max_spans: int) -> Group | None:
        """Claim the group to insert next: a recorded one nobody is inserting, else the oldest
        segments not in any group, up to ``max_spans`` spans (at least one), recorded durably before
        it is returned. ``None`` when there is nothing to claim."""
        with self._lock:
            for token, group in self._groups.items():
                if token not in self._claimed:
                    self._claimed.add(token)
                    return group
            grouped = {s.sequence for group in self._groups.values() for s in group.segments}
            free = [s for s in self._segments if s.sequence not in grouped]
            if not free:
                return None
            chosen = [free[0]]
            for segment in free[1:]:
                if sum(s.spans for s in chosen) + segment.spans > max_spans:
                    break
                chosen.append(segment)
            group = Group(tuple(chosen), uuid.uuid4().hex)
            manifest = self.directory / f"group-{group.token}.json.tmp"
            with manifest.open("w") as handle:
                json.dump({"segments": [s.sequence for s in chosen]}, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(manifest, self.directory / f"group-{group.token}.json")
            fsync_directory(self.directory)
            self._groups[group.token] = group
            self._claimed.add(group.token)
            return group

    def release_group(self, group: Group) -> None:
        """Give back a claimed group whose insert failed; it stays recorded, for a later attempt."""
        with self._lock:
            self._claimed.discard(group.token)

    def finish_group(self, group: Group) -> None:
        """Delete a stored group's segments and its record, durably."""
        with self._lock:
            for segment in group.segments:
                segment.path.unlink(missing_ok=True)
            (self.directory / f"group-{group.token}.json").unlink(missing_ok=True)
            fsync_directory(self.directory)
            done = {s.sequence for s in group.segments}
            self._segments = [s for s in self._segments if s.sequence not in done]
            self._bytes -= sum(s.size for s in group.segments)
            self._spans -= group.spans
            self._groups.pop(group.token, None)
            self._claimed.discard(group.token)

    @property
    def bytes(self) -> int:
        """Total size of the segments."""
        return self._bytes

    @property
    def segments(self) -> int:
        """Number of segments."""
        return len(self._segments)

    @property
    def spans(self) -> int:
        """Spans in all segments."""
        return self._spans

    def oldest_age_s(self) -> float:
        """Seconds since the oldest segment was written; 0 when empty."""
        with self._lock:
            return max(0.0, time.time() - self._segments[0].created) if self._segments else 0.0

    def has_room(self, size: int) -> bool:
        """Whether ``size`` more bytes fit now."""
        return self._bytes + size <= self.max_bytes
