"""The closed loop: a telemetry finding on an SDK-attached job requests a short profile, the
trace's analysis refines the finding (kernels, data-loader stall and its stack, the what-if price
of the fix); a low-rate periodic sampler profiles every SDK-attached job once a day. Budgeted
(`policy`), run by the server plug-in `plugin`, evidence extracted by `refine`.
"""
