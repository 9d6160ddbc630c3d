"""Sans-IO decoder of the PPK2's sample stream: bytes in, numpy blocks out, every loss counted.

The stream (after command 0x06) is little-endian u32 words at 100 kS/s: ADC code bits 0-13,
range bits 14-16, a rolling counter bits 18-23 (6 bits), logic inputs D0-D7 bits 24-31.
`Ppk2Decoder.feed(data)` returns a `Ppk2Block` of the samples the bytes completed, never
raises on any input, and keeps an unfinished word (or an undecided tail) for the next feed.
Feeding a stream whole or split anywhere gives the same samples, counts and positions (the
currents may differ in the last bits where the spike filter is on, see below).

Framing and loss (what ppk2-api does not do: it ignores the counter and never realigns):
- A word can be a sample if its range field is 0-4 (5-7 name no range; ppk2-api clamps them
  to 4). An alignment is trusted once SYNC_WORDS such words in a row carry consecutive
  counters; bytes before the first such run are skipped and counted (`skipped_bytes`, not a
  resync).
- A counter step of k != 1 followed by SYNC_WORDS - 1 good steps at the same alignment is a
  gap: (k - 1) mod 64 samples lost, counted with the position of the first sample after it,
  never closed up (`index` keeps each sample's place in time). Losses of 64 samples or more
  are invisible to a 6-bit counter: only their remainder mod 64 is counted. Bytes lost in
  whole words' worth from inside a word keep the alignment and leave a gap with a word of two
  words' bytes beside it, so the word either side of every gap is dropped, counted with it.
- Any other break (the steps after it do not hold, or the word's range is 5-7) is a framing
  slip (a byte lost or added, or a corrupt word): the decoder searches forward from the
  breaking word, byte by byte, for the next run of SYNC_WORDS good words, counts a resync and
  the bytes skipped, then counts the samples lost across it as a gap.
- A slip is seen a word late or a word early: a lost logic byte, or a byte added after byte 2,
  leaves the word before the break misread yet passing (its logic byte another word's ADC
  byte, or the added byte), and a byte added after byte 0 or 1 leaves the new run's first word
  with a byte not its own. So a word is kept only once CONFIRM_WORDS accepted words follow it
  at its alignment: the words before a slip (up to CONFIRM_WORDS) and the first word of the
  new run are dropped, their samples counted in the gap across the resync and their bytes in
  its skipped bytes. A one-byte slip typically costs 4 or 5 samples, a corrupt word 5; the last
  CONFIRM_WORDS words of a feed wait for the next one. What a 6-bit counter still cannot
  prove: a misread run longer than CONFIRM_WORDS before a slip (each misread word passes about
  1 in 100 for random bytes), or, after a slip of several bytes, a misread word at the new
  alignment that passes by the same chance; either keeps its place in time. Nor is a junk
  word between two words a slip when its counter passes (a step of 0 counts as 63 lost).
- `flush()` ends the stream: the words waiting for confirmation are kept if the stream ends
  exactly after them; other undecided bytes (a partial word, or the words after a break that
  could not yet be confirmed, and those waiting before them) are discarded and counted as
  skipped. 4 * samples + skipped_bytes == bytes fed, after flush.

Conversion (agrees with ppk2-api 0.9.2 `_handle_raw_data` / `get_adc_result`): the formula in
`metadata`, the same operations in the same order per sample, so an unfiltered sample is the
same float ppk2-api computes; VDD is the supply the session set (ppk2-api's `current_vdd`).
With `spike_filter=True` (the default, as ppk2-api and nRF Connect) the three samples from a
range change on (the change and the next two) are replaced by exponential moving averages over
all samples so far: alpha 0.18, or alpha 0.06 when the new range is 4; entering range 4, the
first two samples are also left out of both averages. Matched: the rule, the constants, the
state carried across feeds. Not matched: ppk2-api's order of float rounding in the averages
(they are computed here as a vectorised scan in blocks of 256 samples, agreeing to about 1e-15
of the largest current in the block; after a feed with no range change, the averages' state
comes from its last 2048 samples only, the older ones weighing under 1e-55); its filter
state surviving stop/start (make a new decoder per start, as nRF Connect resets it on start);
its decoding of misaligned or lost bytes as samples.

Draining: a session must not feed this decoder bytes from before its own start command; the
package docstring gives the drain rule and `metadata.scan_metadata_reply` sets apart stale
stream bytes read before the metadata reply.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import numpy as np
from numpy.typing import NDArray

from controller.meter.ppk2.metadata import TOP_RANGE, Ppk2Metadata, RangeCalibration
from controller.meter.ppk2.spike_filter import SpikeFilter

SAMPLE_RATE_HZ: Final = 100_000
WORD_BYTES: Final = 4
COUNTER_MODULUS: Final = 64
SYNC_WORDS: Final = 4  # random bytes pass for a run about once in 64**3 / (5/8)**4 ~ 1.7e6
# A word is kept once this many accepted words follow it at its alignment: misread words before
# a slip pass one by one (about 1 in 100 each), so the proof a resync asks for, not one word.
CONFIRM_WORDS: Final = SYNC_WORDS - 1
ADC_MAX: Final = (1 << 14) - 1
ADC_VOLTS_PER_COUNT: Final = 1.8 / 163840  # ppk2-api's adc_mult: per unit of the code times 4
VDD_MIN_MV: Final = 800
VDD_MAX_MV: Final = 5000


U8 = NDArray[np.uint8]
F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class Ppk2Block:
    """Samples completed by one feed, in arrival order, with what was lost before each.

    `index[i]`: the sample's place in the stream counting lost samples (samples received and
    lost before it since the decoder's first sample); `index / SAMPLE_RATE_HZ` is its time in
    seconds from that sample. `gap_at` / `gap_lost`: for each gap, the position in this block
    of the first sample after it and the samples lost. `resync_at` /
    `resync_skipped_bytes`: each realignment after a framing slip, the position of the first
    sample kept after it and the bytes skipped to reach it (the dropped words' included).
    `skipped_bytes` is every byte this feed discarded (resyncs, the first alignment, flush).
    `saturated`: per sample, its code is the top of the top range (ADC_MAX in range 4), where
    the device reads any larger current too.
    """

    current_ua: F64
    logic: U8  # D0 (bit 0, the trial marker line) .. D7
    counter: U8
    meas_range: U8
    saturated: NDArray[np.bool_]
    index: I64
    gap_at: I64
    gap_lost: I64
    resync_at: I64
    resync_skipped_bytes: I64
    skipped_bytes: int

    def __len__(self) -> int:
        return int(self.current_ua.size)

    @property
    def lost_samples(self) -> int:
        return int(self.gap_lost.sum())

    @property
    def resyncs(self) -> int:
        return int(self.resync_at.size)


@dataclass(frozen=True, slots=True)
class Ppk2Totals:
    """Counters since the decoder was made."""

    bytes_in: int = 0
    samples: int = 0
    lost_samples: int = 0
    gaps: int = 0
    resyncs: int = 0
    skipped_bytes: int = 0


@dataclass(frozen=True, slots=True)
class RangeFactors:
    """Per-range factors of the conversion for one supply voltage, each computed as ppk2-api
    computes it (the emulated device inverts the same factors)."""

    offset: F64
    volts_per_ohm: F64
    quadratic: F64
    linear: F64
    constant_a: F64
    user_gain: F64

    @staticmethod
    def of(metadata: Ppk2Metadata, vdd_mv: int) -> RangeFactors:
        cal = metadata.ranges
        return RangeFactors(
            offset=np.array([c.offset_counts for c in cal]),
            volts_per_ohm=np.array([ADC_VOLTS_PER_COUNT / c.resistor_ohm for c in cal]),
            quadratic=np.array([c.gain_quadratic_per_a for c in cal]),
            linear=np.array([c.gain_linear for c in cal]),
            constant_a=np.array(
                [c.supply_slope_a_per_v * (vdd_mv / 1000) + c.offset_a for c in cal]
            ),
            user_gain=np.array([c.user_gain for c in cal]),
        )


def _check_vdd(vdd_mv: int) -> None:
    if not VDD_MIN_MV <= vdd_mv <= VDD_MAX_MV:
        raise ValueError(f"PPK2 supply must be {VDD_MIN_MV}-{VDD_MAX_MV} mV, got {vdd_mv}")


def _amperes(co: RangeFactors, meas_range: NDArray[np.intp], adc: NDArray[np.int64]) -> F64:
    # The same operations in the same order as ppk2-api's get_adc_result, so the same floats.
    x = (adc * 4 - co.offset[meas_range]) * co.volts_per_ohm[meas_range]
    inner = x * (co.quadratic[meas_range] * x + co.linear[meas_range])
    amperes: F64 = co.user_gain[meas_range] * (inner + co.constant_a[meas_range])
    return amperes


def ua_per_code(calibration: RangeCalibration) -> float:
    """One ADC code's step of current in a range, in microamperes (its resolution)."""
    step_a = 4 * ADC_VOLTS_PER_COUNT / calibration.resistor_ohm
    return float(step_a * calibration.gain_linear * calibration.user_gain * 10**6)


def adc_to_ua(
    metadata: Ppk2Metadata,
    vdd_mv: int,
    meas_range: NDArray[np.integer] | int,
    adc: NDArray[np.integer] | int,
) -> F64:
    """Current in microamperes of 14-bit ADC codes in ranges 0-4, without the spike filter."""
    _check_vdd(vdd_mv)
    r = np.asarray(meas_range, dtype=np.intp)
    if r.size and (r.min() < 0 or r.max() > TOP_RANGE):
        raise ValueError(f"PPK2 ranges are 0-{TOP_RANGE}")
    codes = np.asarray(adc, dtype=np.int64)
    ua: F64 = _amperes(RangeFactors.of(metadata, vdd_mv), r, codes) * 10**6
    return ua


def _find_alignment(data: bytes, start: int) -> int | None:
    """First byte position >= start where SYNC_WORDS words in a row could be samples: ranges
    0-4 and consecutive counters (the acceptance rule of `Ppk2Decoder._take_aligned`)."""
    span = SYNC_WORDS * WORD_BYTES
    candidates = len(data) - start - span + 1
    if candidates <= 0:
        return None
    raw = np.frombuffer(data, dtype=np.uint8, offset=start)
    # Bits 14-16 are the top two bits of the second byte and the lowest of the third; bits
    # 18-23 the top six of the third.
    valid = ((raw[1:-2] >> 6) | ((raw[2:-1] & 1) << 2)) <= TOP_RANGE
    counter = raw[2:-1] >> 2
    ok = np.ones(candidates, dtype=np.bool_)
    for j in range(SYNC_WORDS):
        ok &= valid[WORD_BYTES * j : WORD_BYTES * j + candidates]
    for j in range(SYNC_WORDS - 1):
        a = counter[WORD_BYTES * j : WORD_BYTES * j + candidates]
        b = counter[WORD_BYTES * (j + 1) : WORD_BYTES * (j + 1) + candidates]
        ok &= ((b - a) & (COUNTER_MODULUS - 1)) == 1  # uint8 wraps mod 256, a multiple of 64
    hit = int(np.argmax(ok))
    return start + hit if ok[hit] else None


@dataclass(slots=True)
class _Events:
    gap_at: list[int] = field(default_factory=list)
    gap_lost: list[int] = field(default_factory=list)
    resync_at: list[int] = field(default_factory=list)
    resync_skipped: list[int] = field(default_factory=list)
    skipped: int = 0


_EMPTY_I64: Final = np.zeros(0, dtype=np.int64)


class Ppk2Decoder:
    """Decodes one measurement (one start command's stream); see the module docstring."""

    def __init__(self, metadata: Ppk2Metadata, vdd_mv: int, *, spike_filter: bool = True) -> None:
        _check_vdd(vdd_mv)
        self._coefficients = RangeFactors.of(metadata, vdd_mv)
        self._filter = SpikeFilter() if spike_filter else None
        self._pending = b""
        self._last_counter: int | None = None  # of the last sample accepted
        self._last_spanned: int | None = None  # of the last word accepted or dropped at a gap
        self._carry = 0  # samples lost after the last sample kept, in words spanned since
        self._aligned = False  # False at the start and after a slip, until a run is found
        self._skip_run = 0  # bytes skipped since the slip that is being resynchronised
        self._resyncing = False  # after a slip, until a sample at the new alignment is kept
        self._held = 0  # words at the end of `_pending` that only wait for confirmation
        self._fresh = False  # no word kept yet at the current alignment
        self._next_index = 0
        self._totals = Ppk2Totals()

    @property
    def totals(self) -> Ppk2Totals:
        return self._totals

    def feed(self, data: bytes) -> Ppk2Block:
        buf = self._pending + data if self._pending else bytes(data)
        events = _Events()
        segments: list[NDArray[np.uint32]] = []
        accepted = 0
        pos = 0
        while True:
            if not self._aligned:
                found = _find_alignment(buf, pos)
                if found is None:
                    keep_from = max(pos, len(buf) - (SYNC_WORDS * WORD_BYTES - 1))
                    events.skipped += keep_from - pos
                    self._skip_run += keep_from - pos
                    pos = keep_from
                    break
                if self._last_counter is not None:
                    # The new alignment's first word may begin inside the slip: dropped too.
                    found += WORD_BYTES
                    self._resyncing = True
                events.skipped += found - pos
                self._skip_run += found - pos
                if self._last_counter is None:
                    self._skip_run = 0  # the first alignment: no resync to charge them to
                self._aligned = True
                self._fresh = True
                pos = found
            words, spanned, dropped = self._take_aligned(buf, pos, accepted, events)
            if words.size:
                self._end_resync(events, accepted)
            segments.append(words)
            accepted += words.size
            pos += spanned * WORD_BYTES
            if dropped is None:
                break
            # The search starts past the dropped words: a run found among them may be misread.
            events.skipped += dropped * WORD_BYTES
            self._skip_run += dropped * WORD_BYTES
            pos += dropped * WORD_BYTES
            self._aligned = False
        self._pending = buf[pos:]
        return self._block(segments, events, len(data))

    def flush(self) -> Ppk2Block:
        """End of stream: the words waiting for confirmation are kept if the stream ends just
        after them (a slip among them leaves a partial word); other undecided bytes skipped."""
        held = self._held * WORD_BYTES
        events = _Events()
        segments = []
        if self._aligned and held and len(self._pending) == held:
            segments.append(np.frombuffer(self._pending, dtype="<u4"))
            self._end_resync(events, 0)
        else:
            events.skipped = len(self._pending)
        self._pending = b""
        self._held = 0
        return self._block(segments, events, 0)

    def _end_resync(self, events: _Events, accepted: int) -> None:
        """A sample at `accepted` is kept: a resync in progress ends there."""
        if self._resyncing:
            events.resync_at.append(accepted)
            events.resync_skipped.append(self._skip_run)
            self._skip_run = 0
            self._resyncing = False

    def _take_aligned(
        self, buf: bytes, pos: int, accepted: int, events: _Events
    ) -> tuple[NDArray[np.uint32], int, int | None]:
        """The confirmed words from `pos`, the words they span (kept or dropped beside a gap),
        and if a slip ended them, how many words before it are dropped (up to CONFIRM_WORDS;
        None: no slip). The words after an undecidable break or the end of `buf`, and the
        CONFIRM_WORDS before them, wait for more bytes."""
        n = (len(buf) - pos) // WORD_BYTES
        words = np.frombuffer(buf, dtype="<u4", count=n, offset=pos)
        self._held = 0
        if n == 0:
            return words, 0, None
        counter = ((words >> 18) & (COUNTER_MODULUS - 1)).astype(np.uint8)
        valid = ((words >> 14) & 7) <= TOP_RANGE
        step = np.empty(n, dtype=np.uint8)
        last = self._last_spanned
        step[0] = 1 if last is None else (int(counter[0]) - last) % COUNTER_MODULUS
        step[1:] = (counter[1:] - counter[:-1]) & (COUNTER_MODULUS - 1)
        good = (step == 1) & valid
        end, slipped = n, False
        gaps: list[int] = []
        for at in np.flatnonzero(~good).tolist():
            if at + SYNC_WORDS > n:
                end = at  # not enough words yet to tell a gap from a slip: wait for more
                break
            if not (valid[at] and good[at + 1 : at + SYNC_WORDS].all()):
                end, slipped = at, True
                break
            gaps.append(at)
        # The words before a break may be misread ones that passed (module docstring).
        kept = max(0, end - CONFIRM_WORDS)
        if not slipped and end == n:
            self._held = n - kept
        # Beside a gap may be a word of two words' bytes (module docstring); a resync's gap
        # (first after an alignment) has had its neighbours dropped already.
        keep = np.ones(kept, dtype=np.bool_)
        for at in gaps:
            if at or not self._fresh:
                keep[max(0, at - 1) : at + 1] = False
        taken = words[:kept][keep]
        if self._resyncing:  # words dropped before the first kept one belong to the resync
            self._skip_run += WORD_BYTES * (int(np.argmax(keep)) if taken.size else kept)
        events.skipped += WORD_BYTES * (kept - taken.size)
        # Lost before each word: the counter's steps, and each dropped word itself.
        total = self._carry + np.cumsum(
            (step[:kept].astype(np.int64) - 1) % COUNTER_MODULUS + ~keep
        )
        if taken.size:
            self._fresh = False
            lost = np.diff(total[keep], prepend=0)
            for at in np.flatnonzero(lost).tolist():
                events.gap_at.append(accepted + at)
                events.gap_lost.append(int(lost[at]))
            self._last_counter = int(counter[:kept][keep][-1])
        if kept:
            self._carry = int(total[-1] - (total[keep][-1] if taken.size else 0))
            self._last_spanned = int(counter[kept - 1])
        return taken, kept, end - kept if slipped else None

    def _block(self, segments: list[NDArray[np.uint32]], events: _Events, fed: int) -> Ppk2Block:
        words = np.concatenate(segments) if segments else np.zeros(0, dtype=np.uint32)
        adc = (words & ADC_MAX).astype(np.int64)
        meas_range = ((words >> 14) & 7).astype(np.uint8)
        counter = ((words >> 18) & (COUNTER_MODULUS - 1)).astype(np.uint8)
        logic = (words >> 24).astype(np.uint8)
        gap_at = np.array(events.gap_at, dtype=np.int64) if events.gap_at else _EMPTY_I64
        gap_lost = np.array(events.gap_lost, dtype=np.int64) if events.gap_lost else _EMPTY_I64
        lost_before = np.zeros(words.size, dtype=np.int64)
        if gap_at.size:
            np.add.at(lost_before, gap_at, gap_lost)
        index = self._next_index + np.arange(words.size, dtype=np.int64) + np.cumsum(lost_before)
        if words.size:
            self._next_index = int(index[-1]) + 1
        current_ua = self._convert(meas_range, adc)
        t = self._totals
        self._totals = Ppk2Totals(
            bytes_in=t.bytes_in + fed,
            samples=t.samples + int(words.size),
            lost_samples=t.lost_samples + int(gap_lost.sum()),
            gaps=t.gaps + int(gap_at.size),
            resyncs=t.resyncs + len(events.resync_at),
            skipped_bytes=t.skipped_bytes + events.skipped,
        )
        return Ppk2Block(
            current_ua=current_ua,
            logic=logic,
            counter=counter,
            meas_range=meas_range,
            saturated=(meas_range == TOP_RANGE) & (adc == ADC_MAX),
            index=index,
            gap_at=gap_at,
            gap_lost=gap_lost,
            resync_at=np.array(events.resync_at, dtype=np.int64),
            resync_skipped_bytes=np.array(events.resync_skipped, dtype=np.int64),
            skipped_bytes=events.skipped,
        )

    def _convert(self, meas_range: U8, adc: I64) -> F64:
        amperes = _amperes(self._coefficients, meas_range.astype(np.intp), adc)
        if self._filter is not None:
            amperes = self._filter.apply(amperes, meas_range)
        ua: F64 = amperes * 10**6
        return ua
