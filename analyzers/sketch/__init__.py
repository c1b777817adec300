"""The quantile sketch: value to bucket key (mapping), integer bucket counts (counts), the byte
codec (codec), the sketch itself (core) and its scalar fast path (the C `_sketch_scalar`, else
`scalar` in Python). Knows nothing of telemetry, windows or storage.
"""
