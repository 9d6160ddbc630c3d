"""What one direction of a connection carried, counted: the `sent` and `received` of every
trial record, whichever protocol filled it (HTTP/2's frames by type from agent.h2.frames,
HTTP/3's datagrams, or bytes alone where an engine sees no frames)."""

from __future__ import annotations

from collections.abc import Mapping
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

    @classmethod
    def of(cls, counts: Mapping[str, object]) -> FrameCounts:
        """Back from `to_dict`'s form."""
        frames, frame_bytes, total = counts["frames"], counts["frame_bytes"], counts["bytes"]
        assert isinstance(frames, dict) and isinstance(frame_bytes, dict)
        assert isinstance(total, int)
        return cls(dict(frames), dict(frame_bytes), total)

    def plus(self, other: FrameCounts) -> FrameCounts:
        """Both counts together (two connections' of one trial)."""
        return FrameCounts(
            frames=_add(self.frames, other.frames),
            frame_bytes=_add(self.frame_bytes, other.frame_bytes),
            bytes_total=self.bytes_total + other.bytes_total,
        )

    def minus(self, earlier: FrameCounts) -> FrameCounts:
        """What was counted since `earlier` (a snapshot of the same tally)."""
        return FrameCounts(
            frames=_subtract(self.frames, earlier.frames),
            frame_bytes=_subtract(self.frame_bytes, earlier.frame_bytes),
            bytes_total=self.bytes_total - earlier.bytes_total,
        )


def _add(one: dict[str, int], other: dict[str, int]) -> dict[str, int]:
    return {name: one.get(name, 0) + other.get(name, 0) for name in {**one, **other}}


def _subtract(later: dict[str, int], earlier: dict[str, int]) -> dict[str, int]:
    diff = {name: count - earlier.get(name, 0) for name, count in later.items()}
    return {name: count for name, count in diff.items() if count}
