"""One finding on a page, in the words `fleetscope job` and the weekly report use
(`analyzers.plain`): rule name, problem, fix, recoverable GPU-hours, the evidence as a small table,
and the raw JSON only behind an expander (`show_finding`); on the fleet page, the same words and
evidence as one Markdown block and a link to the job's page, where the raw JSON is (`show_brief`)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from analyzers.plain import NOT_ESTIMATED, UNPRICED, PlainFinding, number
from dashboard.headline_tiles import escaped


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
        if no_gpus:
            gain = "no GPU held: no GPU-hours to recover"
        elif not p.estimated:
            gain = UNPRICED
        else:
            gain = f"**{number(p.gpu_hours)} {gpu_hours_unit}** recoverable"
        st.markdown(f"**{p.rule_id} · {p.rule}** · {p.severity} · {gain}")
        st.markdown(f"**Problem:** {p.problem}  \n**Fix:** {p.fix}")
        st.caption(_where_when_how(p))
        if p.evidence:
            st.table(pd.DataFrame(p.evidence, columns=["evidence", "value"]).set_index("evidence"))
        if follow_up is not None:
            with st.expander("what happened next: automatic profile", expanded=True):
                follow_up()
        with st.expander("raw evidence (JSON)"):
            st.json(p.raw, expanded=False)


def show_brief(p: PlainFinding) -> None:
    """The finding as one Markdown block (heading, problem, fix, where and when, the evidence as a
    Markdown table) and a link to its job's page (its raw JSON and what followed). Why not
    `show_finding`: its seven elements per finding (a `st.table`, a `st.json` viewer) were most of
    the fleet page's elements, and the browser drew them all before the headline tiles
    (bench/RESULTS.md, "Dashboard first meaningful paint, wave 8"); Markdown needs no code the
    browser loads on first use."""
    with st.container(border=True):
        st.markdown(brief_markdown(p))
        if p.job_id:
            st.page_link(
                "views/job.py",
                label=f"job {p.job_id}: raw evidence and what followed",
                query_params={"job_id": p.job_id},
            )


def brief_markdown(p: PlainFinding) -> str:
    """`show_brief`'s text, every value from the finding escaped for Markdown."""
    gain = f"**{number(p.gpu_hours)} GPU-h** recoverable" if p.estimated else UNPRICED
    lines = [
        f"**{escaped(p.rule_id)} · {escaped(p.rule)}** · {escaped(p.severity)} · {gain}",
        "",
        f"**Problem:** {escaped(p.problem)}  ",
        f"**Fix:** {escaped(p.fix)}  ",
    ]
    if caption := _where_when_how(p):
        lines.append(f":gray[{escaped(caption)}]")
    if p.evidence:
        lines += ["", "| evidence | value |", "|---|---|"]
        lines += [f"| {escaped(what)} | {escaped(value)} |" for what, value in p.evidence]
    return "\n".join(lines)


def _where_when_how(p: PlainFinding) -> str:
    """The caption: where, when, and how the hours were estimated (a bare "not estimated" says
    no more than the heading's "recoverable GPU-hours not estimated")."""
    how = f"estimate: {p.estimate}" if p.estimate not in ("", NOT_ESTIMATED) else ""
    return ", ".join(x for x in (p.where, p.when, how) if x)
