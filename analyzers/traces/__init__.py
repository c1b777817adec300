"""PyTorch profiler (Kineto) trace loading and analyses, HTA-compatible on request.

    from analyzers.traces.api import analyze_trace
    report = analyze_trace("trace_dir_or_file", hta_compatible=False)
    report.results["temporal_breakdown"].table("temporal_breakdown").records()
    report.findings  # analyzers.findings.Finding, rules T1-T13

Layers: `load` (stream-parse a file into columns) -> `hta_rules` or `native` (prepare a
`TraceSet`) -> `analyses` (one module per analysis, a registry) -> `findings` (rules) ->
`render` / `document` (output, the stored analysis). See docs/traces.md and shared/trace-semantics.md.
The package itself imports nothing: `fleetscope trace`'s registration (`cli`) loads no numpy.
"""
