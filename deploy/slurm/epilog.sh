#!/bin/sh
# fleetscope Slurm epilog: undo what prolog.sh recorded for this job. Install next to it:
#   Epilog=/etc/slurm/epilog.d/*    (or Epilog=/opt/fleetscope/deploy/slurm/epilog.sh)
# Removes the job's line from each of its GPUs' dcgm-exporter mapping files (a file left empty
# is removed: the GPU is free), the jobstats files that name this job, and the owner record.
# Always exits 0 (a failing epilog drains the node); problems go to stderr (slurmd's log).
map_dir=${FLEETSCOPE_JOB_MAP_DIR-/run/dcgm-job-map}
gpustat_dir=${FLEETSCOPE_GPUSTAT_DIR-/run/gpustat}
owner_dir=${FLEETSCOPE_SLURM_JOB_DIR-/run/fleetscope/slurm-jobs}
job=${SLURM_JOB_ID:-}

warn() { echo "fleetscope epilog: job ${job:-?}: $*" >&2; }

case "$job" in
  '' | *[!0-9_]*) warn "SLURM_JOB_ID missing or not a job id; nothing removed"; exit 0 ;;
esac

[ -z "$owner_dir" ] || rm -f "$owner_dir/$job.env"

unmap() {
  # Every GPU file, not only the job's GPUs: a requeued or resized job leaves nothing behind.
  for file in "$map_dir"/*; do
    case "${file##*/}" in *[!0-9.]* | '') continue ;; esac
    grep -Fqx "$job" "$file" 2>/dev/null || continue
    rest=$(grep -Fvx "$job" "$file")
    if [ -z "$rest" ]; then
      rm -f "$file"
    else
      tmp="$file.tmp.$$"
      { printf '%s\n' "$rest" >"$tmp" && mv -f "$tmp" "$file"; } || { rm -f "$tmp"; warn "cannot rewrite $file"; }
    fi
  done
}
if [ -d "$map_dir" ]; then
  ( command -v flock >/dev/null && flock -w 10 9; unmap ) 9>>"$map_dir/.lock" \
    || warn "cannot lock $map_dir/.lock"
fi
if [ -n "$gpustat_dir" ] && [ -d "$gpustat_dir" ]; then
  for file in "$gpustat_dir"/*; do
    [ -f "$file" ] || continue
    read -r first _ <"$file" 2>/dev/null || continue
    [ "$first" = "$job" ] && rm -f "$file"
  done
fi
exit 0
