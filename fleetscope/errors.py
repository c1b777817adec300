"""The project's exception tree, in one place.

Library code raises these; only the edges (the CLI, HTTP handlers) turn them into messages, exit
codes and status codes. A user mistake never ends in a traceback.

    FleetscopeError
    ├── ConfigError              a setting is unknown, mistyped or missing
    ├── ContractError            data does not follow the shared contract (wire format, schema)
    │   ├── SchemaVersionError   a batch's schema version is not one this build reads
    │   ├── DecodeBudgetError    a body would decode past its size or row budget
    │   └── MetricsParseError    exposition text that cannot be parsed (names the line)
    ├── TraceError               a profiler trace cannot be read
    │   ├── CorruptTraceError    not JSON / not gzip / not a Kineto trace
    │   │   ├── TraceNestingError    JSON nested deeper than a decoder goes (exit 11)
    │   │   └── NonFiniteTraceError  NaN or Infinity as an event's `ts` or `dur` (exit 12)
    │   ├── TruncatedTraceError  the file ends early
    │   ├── TraceBudgetError     a gzip file inflates past the decompression budget (exit 10)
    │   └── NotRegularFileError  a path that is not a regular file: a FIFO, a device (exit 13)
    ├── IngestError              ingest refused a batch (carries the HTTP status and message)
    │   ├── AuthError            missing or wrong bearer token
    │   └── PayloadTooLargeError the body is over the configured limit
    ├── NotFoundError            an unknown job, host, trace or request
    ├── SketchError              a quantile sketch refused a value, blob or merge (also a ValueError)
    ├── ProfileFailedError       an on-demand profile ended without a result (no process matched,
    │                            the profiler, upload or analysis failed, it expired or timed out)
    └── SourceUnavailableError   an exporter, NVML or ingest cannot be reached right now
"""

from __future__ import annotations


class FleetscopeError(Exception):
    """Base of every error fleetscope raises on purpose."""

    exit_code = 1


class ConfigError(FleetscopeError):
    exit_code = 2


class ContractError(FleetscopeError):
    exit_code = 3


class SchemaVersionError(ContractError):
    pass


class DecodeBudgetError(ContractError):
    """A body would decode to more bytes or rows than allowed (checked before decoding)."""


class MetricsParseError(ContractError):
    """Exposition text that cannot be parsed; `line_no` is 1-based."""

    def __init__(self, message: str, *, line_no: int, line: str) -> None:
        super().__init__(f"line {line_no}: {message}: {line[:200]!r}")
        self.line_no = line_no
        self.line = line


class TraceError(FleetscopeError):
    exit_code = 4


class CorruptTraceError(TraceError):
    pass


class TruncatedTraceError(TraceError):
    pass


# The refusals of issue 28 ("the trace command fails fast and clearly"), each with an exit code
# of its own so that a script can tell a hostile or broken input from an unreadable one.
class TraceBudgetError(TraceError):
    """A gzip trace inflates past its ratio or absolute budget (a decompression bomb)."""

    exit_code = 10


class TraceNestingError(CorruptTraceError):
    """JSON nested deeper than the decoders go (a Kineto event nests 3 levels)."""

    exit_code = 11


class NonFiniteTraceError(CorruptTraceError):
    """An event's `ts` or `dur` is NaN or an infinity (the literal, or a number past float)."""

    exit_code = 12


class NotRegularFileError(TraceError):
    """A path that exists but is no regular file (a FIFO would block, a device never ends)."""

    exit_code = 13


class IngestError(FleetscopeError):
    """Ingest refused a request; `status` is the HTTP status it answered with."""

    exit_code = 5

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class AuthError(IngestError):
    def __init__(self, message: str = "missing or invalid bearer token") -> None:
        super().__init__(message, status=401)


class PayloadTooLargeError(IngestError):
    def __init__(self, message: str) -> None:
        super().__init__(message, status=413)


class NotFoundError(FleetscopeError):
    exit_code = 6


class SourceUnavailableError(FleetscopeError):
    exit_code = 7


class ProfileFailedError(FleetscopeError):
    exit_code = 9


class SketchError(FleetscopeError, ValueError):
    """A quantile sketch refused its input: an infinite value, a corrupt blob, a merge of sketches
    built with different accuracies, a quantile outside [0, 1]. A ValueError too, so numeric code
    that catches ValueError keeps working."""

    exit_code = 8
