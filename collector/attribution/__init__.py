"""Attribution: which job owns which GPU, even when nothing runs on it.

One small protocol (`AttributionSource` in base.py), one module per source, and a resolver with a
fixed, documented precedence (resolver.py). Every attributed row says which source named its job
in the `attribution` column, so an attribution can be proven, not just asserted.

Must never: guess a job from activity. A GPU with a job and no process is a held-but-idle
allocation, the case that matters most; a GPU with no source naming a job stays unattributed.
"""

from collector.attribution.resolver import build_resolver
from fleetscope.attribution.base import AttributionSource

__all__ = ["AttributionSource", "build_resolver"]
