"""nghttp2's windows: `-w N` / `-W N` mean 2^N - 1 bytes, N in 0..30 (nghttp, nghttpd, h2load).

The agent takes exact byte counts. A count nghttp2 cannot express is mapped to the nearest
2^N - 1 (nearest in bytes; a tie goes to the larger window) and the mapping is recorded, or it is
rejected, as the `--unrepresentable-window` switch says. 65535 (N = 16) is exact; the study's
256 ... 32768 are not (nghttp2 ran them as 255 ... 32767).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.engines.nghttp2.errors import UnrepresentableWindowError
from agent.engines.spec import UnrepresentablePolicy

MAX_BITS = 30


@dataclass(frozen=True)
class WindowMapping:
    requested: int
    bits: int

    @property
    def on_wire(self) -> int:
        return (1 << self.bits) - 1

    @property
    def exact(self) -> bool:
        return self.requested == self.on_wire


def nearest_bits(window: int) -> int:
    """The N whose 2^N - 1 is nearest to `window` bytes (ties to the larger N), in 0..30."""
    if window < 0:
        raise ValueError(f"window {window} is negative")
    if window >= (1 << MAX_BITS) - 1:
        return MAX_BITS
    upper = (window + 1).bit_length()  # smallest N with 2^N - 1 >= window
    lower = upper - 1
    if (1 << upper) - 1 - window <= window - ((1 << lower) - 1):
        return upper
    return lower


def on_wire(window: int) -> int:
    """The window nghttp2 runs for `window` bytes (the engine's `window_map`)."""
    return (1 << nearest_bits(window)) - 1


def is_representable(window: int) -> bool:
    return 0 <= window <= (1 << MAX_BITS) - 1 and (window + 1) & window == 0


def describe(name: str, mapping: WindowMapping) -> str:
    """One line: what nghttp2 does with a window it cannot express."""
    return (
        f"{name} {mapping.requested} is not 2^N - 1 bytes, which nghttp2 needs: "
        f"it uses {mapping.on_wire} (-w/-W {mapping.bits})"
    )


def map_window(name: str, window: int, policy: UnrepresentablePolicy) -> WindowMapping:
    """The window nghttp2 runs for `window`; UnrepresentableWindowError if it is not exact and
    the policy is "reject". `name` is the option or key named in the message."""
    mapping = WindowMapping(window, nearest_bits(window))
    if not mapping.exact and policy == "reject":
        raise UnrepresentableWindowError(
            f"{describe(name, mapping)}; use a 2^N - 1 value or map it "
            "(--unrepresentable-window map)"
        )
    return mapping
