"""PyTorch profiler (Kineto) trace loading and analyses, HTA-compatible on request.

    from analyzers.traces.api import analyze_trace
    report = analyze_trace("trace_dir_or_file", hta_compatible=False)
    report.results["temporal_breakdown"].table("temporal_breakdown").records()
    report.findings  # analyzers.findings.Finding, rules T1-T13

Layers: `load` (a file into columns) -> `hta_rules` or `native` (a `TraceSet`) -> `analyses` ->
`findings` -> `render` / `document`; see docs/traces.md and shared/trace-semantics.md. No module
imports pandas; the package itself imports nothing (`fleetscope trace` loads no numpy).
"""
