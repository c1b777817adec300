"""The GPU-sharing planner: which under-used GPUs can share one GPU (MPS, time-slicing or MIG),
how many whole GPUs that frees per week, and what it costs each job (docs/sharing.md).

Modules: `mig` (the MIG profile tables of NVIDIA's MIG user guide), `usage` (each job GPU's
measured profile from the warehouse), `plan` (candidates, packing, interference), `cli`
(`fleetscope plan sharing`), `stored` (the plan the scheduled pass stores, and which one a page
shows). Pure planning: it never changes a GPU's configuration.
"""
