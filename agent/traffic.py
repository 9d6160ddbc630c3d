"""What one direction of a connection carried, counted: the `sent` and `received` of every
trial record, whichever protocol filled it (HTTP/2's frames by type from agent.h2.frames,
HTTP/3's datagrams, or bytes alone where an engine sees no frames)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FrameCounts:
    """Frames and bytes on one direction of a connection. `bytes_total` includes the preface."""

    frames: dict[str, int]
    frame_bytes: dict[str, int]
    bytes_total: int

    @classmethod
    def empty(cls) -> FrameCounts:
        return cls({}, {}, 0)

    def to_dict(self) -> dict[str, object]:
        return {
            "bytes": self.bytes_total,
            "frames": dict(sorted(self.frames.items())),
            "frame_bytes": dict(sorted(self.frame_bytes.items())),
        }

    def minus(self, earlier: FrameCounts) -> FrameCounts:
        """What was counted since `earlier` (a snapshot of the same tally)."""
        return FrameCounts(
            frames=_subtract(self.frames, earlier.frames),
            frame_bytes=_subtract(self.frame_bytes, earlier.frame_bytes),
            bytes_total=self.bytes_total - earlier.bytes_total,
        )


def _subtract(later: dict[str, int], earlier: dict[str, int]) -> dict[str, int]:
    diff = {name: count - earlier.get(name, 0) for name, count in later.items()}
    return {name: count for name, count in diff.items() if count}
