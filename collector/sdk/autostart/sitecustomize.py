"""No-code opt-in: with FLEETSCOPE_SDK=1 and this folder on PYTHONPATH, every DataLoader is measured.

Python imports `sitecustomize` at start-up; this one patches `torch.utils.data.DataLoader.__iter__`
so that each pass over any loader reports step metrics to the local agent. It does nothing unless
FLEETSCOPE_SDK=1, and any failure leaves the program exactly as it was.
"""

import os

if os.environ.get("FLEETSCOPE_SDK") == "1":
    try:
        from collector.sdk.autostart_patch import install

        install()
    except Exception:  # never break the training program for the sake of telemetry
        pass
