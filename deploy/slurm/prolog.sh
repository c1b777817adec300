#!/bin/sh
# fleetscope Slurm prolog: record which job holds which GPU on this node, for the agent,
# dcgm-exporter's HPC mode and Princeton's jobstats. Install (slurm.conf on every GPU node):
#   Prolog=/etc/slurm/prolog.d/*    (or Prolog=/opt/fleetscope/deploy/slurm/prolog.sh)
#   PrologFlags=Alloc               (run at allocation, so held-but-idle GPUs are attributed too)
# slurmd runs it as root with the job's environment: SLURM_JOB_ID, SLURM_JOB_USER,
# SLURM_JOB_UID, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION, SLURM_JOB_NAME and SLURM_JOB_GPUS (the
# allocated GPU indices, "0,1"; older Slurm: GPU_DEVICE_ORDINAL or CUDA_VISIBLE_DEVICES).
#
# Writes, each atomically (a temporary file renamed into place):
#   $FLEETSCOPE_JOB_MAP_DIR/<gpu index>   dcgm-exporter --hpc-job-mapping-dir format: one job id
#                                         per line (a GPU shared by jobs lists each; default
#                                         /run/dcgm-job-map, the agent's agent.job_mapping_dir)
#   $FLEETSCOPE_GPUSTAT_DIR/<gpu index>   jobstats format: "<job id> <uid>" (default /run/gpustat;
#                                         set it empty to skip)
#   $FLEETSCOPE_SLURM_JOB_DIR/<job id>.env  the owner record: KEY=VALUE lines (default
#                                         /run/fleetscope/slurm-jobs; the agent's agent.slurm_job_dir)
# A prolog that fails drains the node, so this script reports problems on stderr (slurmd's log)
# and always exits 0.
umask 022
map_dir=${FLEETSCOPE_JOB_MAP_DIR-/run/dcgm-job-map}
gpustat_dir=${FLEETSCOPE_GPUSTAT_DIR-/run/gpustat}
owner_dir=${FLEETSCOPE_SLURM_JOB_DIR-/run/fleetscope/slurm-jobs}
job=${SLURM_JOB_ID:-}
gpus=${SLURM_JOB_GPUS:-${GPU_DEVICE_ORDINAL:-${CUDA_VISIBLE_DEVICES:-}}}

warn() { echo "fleetscope prolog: job ${job:-?}: $*" >&2; }

# One line of a KEY=VALUE record: newlines and carriage returns in a value become spaces.
value() { printf '%s' "$1" | tr '\r\n' '  '; }

# Replace $1 with stdin, atomically.
replace() {
  tmp="$1.tmp.$$"
  if cat >"$tmp" && mv -f "$tmp" "$1"; then return 0; fi
  rm -f "$tmp"
  warn "cannot write $1"
  return 1
}

case "$job" in
  '' | *[!0-9_]*) warn "SLURM_JOB_ID missing or not a job id; nothing recorded"; exit 0 ;;
esac

if [ -n "$owner_dir" ] && mkdir -p "$owner_dir"; then
  {
    echo "SLURM_JOB_ID=$job"
    echo "SLURM_JOB_USER=$(value "${SLURM_JOB_USER:-}")"
    echo "SLURM_JOB_ACCOUNT=$(value "${SLURM_JOB_ACCOUNT:-}")"
    echo "SLURM_JOB_PARTITION=$(value "${SLURM_JOB_PARTITION:-}")"
    echo "SLURM_JOB_NAME=$(value "${SLURM_JOB_NAME:-}")"
    echo "SLURM_JOB_GPUS=$(value "$gpus")"
  } | replace "$owner_dir/$job.env"
fi

[ -n "$gpus" ] || exit 0  # a job without GPUs: nothing to map
for dir in "$map_dir" "$gpustat_dir"; do
  [ -z "$dir" ] || mkdir -p "$dir" || warn "cannot create $dir"
done
map_gpus() {
  for gpu in $(echo "$gpus" | tr ',' ' '); do
    case "$gpu" in
      '' | *[!0-9]*) warn "GPU '$gpu' is not an index; skipped"; continue ;;
    esac
    if [ -d "$map_dir" ]; then
      { grep -Fvx "$job" "$map_dir/$gpu" 2>/dev/null; echo "$job"; } | replace "$map_dir/$gpu"
    fi
    if [ -n "$gpustat_dir" ] && [ -d "$gpustat_dir" ]; then
      echo "$job ${SLURM_JOB_UID:-}" | replace "$gpustat_dir/$gpu"
    fi
  done
}
# Jobs sharing a GPU (sharding, --overlap) rewrite the same file: serialise them on a lock.
if [ -d "$map_dir" ]; then
  ( command -v flock >/dev/null && flock -w 10 9; map_gpus ) 9>>"$map_dir/.lock" \
    || warn "cannot lock $map_dir/.lock"
else
  map_gpus
fi
exit 0
