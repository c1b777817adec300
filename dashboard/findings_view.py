"""One finding on a page, in the words `fleetscope job` and the weekly report use
(`analyzers.plain`): rule name, problem, fix, recoverable GPU-hours, the evidence as a small table,
and the raw JSON only behind an expander."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from analyzers.plain import PlainFinding, number


def show_finding(
    p: PlainFinding,
    follow_up: Callable[[], None] | None = None,
    *,
    gpu_hours_unit: str = "GPU-h",
    no_gpus: bool = False,
) -> None:
    """`follow_up` draws what the finding led to (the job page: the automatic profile's chain,
    analyzers.autoprofile) inside the finding's box, open, above the raw JSON.
    `gpu_hours_unit`: a trace's own findings hold a weekly rate (their what-if saving for a week
    of the job's GPUs), every stored finding the GPU-hours of its window. `no_gpus`: the process
    holds no GPU (a CPU-only trace), so the heading says so instead of "0 GPU-h recoverable"."""
    with st.container(border=True):
        gain = (
            "no GPU held: no GPU-hours to recover"
            if no_gpus
            else f"**{number(p.gpu_hours)} {gpu_hours_unit}** recoverable"
        )
        st.markdown(f"**{p.rule_id} · {p.rule}** · {p.severity} · {gain}")
        st.markdown(f"**Problem:** {p.problem}  \n**Fix:** {p.fix}")
        st.caption(", ".join(x for x in (p.where, p.when, f"estimate: {p.estimate}") if x))
        if p.evidence:
            st.table(pd.DataFrame(p.evidence, columns=["evidence", "value"]).set_index("evidence"))
        if follow_up is not None:
            with st.expander("what happened next: automatic profile", expanded=True):
                follow_up()
        with st.expander("raw evidence (JSON)"):
            st.json(p.raw, expanded=False)
