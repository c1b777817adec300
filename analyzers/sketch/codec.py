"""Byte encoding of bucket counts for the quantile sketch: LEB128 varints and zero-run tokens.

A sketch's counts are a dense run of keys with a few gaps (the sparse far tail); each count becomes
one unsigned LEB128 varint (the encoding of protobuf and of DDSketch's protobuf form), and each run
of empty buckets becomes the token 0 followed by the run length. Counts are never 0, run lengths
never 0, so a 0 token is always a run marker and decoding needs no lookahead beyond one token. On the
three test streams of `../shared/sketches.md` this gives 0.2-3.5 KiB, under the 8 KiB target.

Encoding and decoding are vectorized (one numpy pass per varint byte position), never a Python loop
per count. Decoding checks every structural rule and raises SketchError on the first violation, so
a corrupt blob never becomes a plausible-looking sketch.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from fleetscope.errors import SketchError

__all__ = [
    "decode_counts",
    "decode_varints",
    "encode_counts",
    "encode_varints",
    "unzigzag",
    "zigzag",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


def zigzag(value: int) -> int:
    """Signed to unsigned so that small magnitudes stay small varints (protobuf sint64)."""
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_varints(values: npt.ArrayLike) -> bytes:
    """Unsigned LEB128 of each value, concatenated."""
    arr = np.asarray(values, dtype=np.uint64)
    if arr.size == 0:
        return b""
    lengths = np.ones(arr.size, dtype=np.int64)
    for bits in range(7, 64, 7):
        lengths += arr >= np.uint64(1 << bits)
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out = np.zeros(int(ends[-1]), dtype=np.uint8)
    for pos in range(int(lengths.max())):
        has = lengths > pos
        chunk = (arr[has] >> np.uint64(7 * pos)) & np.uint64(0x7F)
        more = (lengths[has] > pos + 1).astype(np.uint64) << np.uint64(7)
        out[starts[has] + pos] = (chunk | more).astype(np.uint8)
    return out.tobytes()


def decode_varints(data: bytes | memoryview) -> U64:
    """The values of a concatenation of unsigned LEB128 varints (at most 10 bytes each)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if raw.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if raw[-1] & 0x80:
        raise SketchError("corrupt sketch: the last varint is unterminated")
    ends = np.flatnonzero(raw < 0x80)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if int(lengths.max()) > 10:
        raise SketchError("corrupt sketch: a varint is longer than 10 bytes")
    values = np.zeros(ends.size, dtype=np.uint64)
    for pos in range(int(lengths.max())):
        has = lengths > pos
        values[has] |= (raw[starts[has] + pos].astype(np.uint64) & np.uint64(0x7F)) << np.uint64(
            7 * pos
        )
    return values


def encode_counts(counts: I64) -> U64:
    """Tokens for a trimmed count run: each count, with every run of zeros as (0, run length)."""
    zero = counts == 0
    if not zero.any():
        return counts.astype(np.uint64)
    edges = np.diff(np.concatenate(([0], zero.view(np.int8), [0])))
    run_starts = np.flatnonzero(edges == 1)
    run_lengths = np.flatnonzero(edges == -1) - run_starts
    kept = counts[~zero]
    zeros_before = np.concatenate(([0], np.cumsum(run_lengths)[:-1]))
    at = np.repeat(run_starts - zeros_before, 2)
    pairs = np.column_stack((np.zeros_like(run_lengths), run_lengths)).ravel()
    return np.insert(kept, at, pairs).astype(np.uint64)


def decode_counts(tokens: U64) -> I64:
    """Inverse of `encode_counts`; rejects a marker without a positive run length."""
    if tokens.size == 0:
        return np.zeros(0, dtype=np.int64)
    if int(tokens.max()) >= 1 << 62:
        raise SketchError("corrupt sketch: a bucket count is out of range")
    signed = tokens.astype(np.int64)
    markers = np.flatnonzero(signed == 0)
    if markers.size:
        if markers[-1] == signed.size - 1 or (np.diff(markers) == 1).any():
            raise SketchError("corrupt sketch: an empty-bucket run has no length")
        repeat = np.ones(signed.size, dtype=np.int64)
        repeat[markers] = signed[markers + 1]
        repeat[markers + 1] = 0
        return np.repeat(signed, repeat)
    return signed
