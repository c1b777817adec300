"""The words every page, the CLI and the weekly report use for GPU-hours, defined once.

Four words used to stand for two ideas (used, allocated, wasted, recoverable; issue 31). Now there
are three measures and one difference, and nothing else: **allocated** (a job held the GPU),
**active** (allocated hours weighted by how busy the GPU was), **idle while allocated** (allocated
minus active), and **recoverable** (what a finding's fix would give back). The definitions follow
`analyzers.accounting.sql` (the accounting every rule and page shares) and docs/analyzers.md
("Words"). No Streamlit here: the sidebar calls `show` with its own container.
"""

from __future__ import annotations

from typing import Any

TERMS: tuple[tuple[str, str], ...] = (
    (
        "allocated GPU-hours",
        "hours a GPU was held by a job: every sample carrying a job id counts the time to the "
        "next one (gaps up to analyzers.max_gap_s still count: the scheduler still held it)",
    ),
    (
        "active GPU-hours",
        "allocated hours times how busy the GPU was (GR_ENGINE_ACTIVE, else GPU_UTIL / 100): "
        "4 allocated hours at 25 % are 1 active hour",
    ),
    ("idle while allocated", "allocated minus active GPU-hours"),
    (
        "SM-active GPU-hours",
        "allocated hours times SM_ACTIVE, where the exporter reports it",
    ),
    (
        "recoverable GPU-hours",
        "what a finding's fix would give back inside the window, by the rule's stated estimate; a "
        "job flagged by several rules is counted once. Only GPU hours: a process without GPUs "
        "has none",
    ),
    (
        "GPU-h/week",
        "a projection, shown only with its basis: a trace's what-if saving x the job's GPUs x "
        "168 h, or a sharing plan's freed GPUs x 168 h",
    ),
    ("capacity seen", "hours of every GPU that reported, allocated or not"),
    ("partial bucket", "a time bucket the window or the data covers only in part (drawn hollow)"),
)


def markdown() -> str:
    """The glossary as a Markdown list (the sidebar's expander, docs)."""
    return "\n".join(f"- **{term}**: {meaning}" for term, meaning in TERMS)


def show(container: Any) -> None:
    """The glossary in an expander of `container` (`st.sidebar` on every page)."""
    container.expander("Words used here", icon=":material/menu_book:").markdown(markdown())
