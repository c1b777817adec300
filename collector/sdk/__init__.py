"""Training-process SDK: step metrics and on-demand profiling from inside a training script.

Two lines opt a script in:

    from collector import sdk
    loader = sdk.instrument(loader)          # every batch drawn from it marks a training step

or, with no code change, start the script with `FLEETSCOPE_SDK=1` and the folder of
`collector/sdk/autostart` on PYTHONPATH (its sitecustomize instruments every DataLoader).

Per step it records step time, time blocked on the DataLoader, host-to-device copy time where the
script marks it (`with sdk.h2d_copy(): ...`), batch size and samples/s, the model FLOPs of a step
where the script reports them (`sdk.report_flops(flops.step_flops(one_step), "bf16")`: measured
MFU), and sends them to the local
agent as one datagram. It never blocks or crashes training: a missing agent, a full socket buffer or
any SDK fault drops the sample and counts it. It also listens for on-demand profiling requests
from the agent and runs torch.profiler for the requested steps.

Must never import anything outside the standard library at import time (torch is imported only
when a profile is requested or a DataLoader is instrumented).
"""

from collector.sdk.monitor import StepMonitor, get_monitor, h2d_copy, instrument, report_flops

__all__ = ["StepMonitor", "get_monitor", "h2d_copy", "instrument", "report_flops"]
