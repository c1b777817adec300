#!/bin/sh
# fleetscope Slurm prolog: record which job holds which GPU on this node, for the agent,
# dcgm-exporter's HPC mode and Princeton's jobstats. Install (slurm.conf on every GPU node):
#   Prolog=/etc/slurm/prolog.d/*    (or Prolog=/opt/fleetscope/deploy/slurm/prolog.sh)
#   PrologFlags=Alloc               (run at allocation, so held-but-idle GPUs are attributed too)
# slurmd runs it as root with the job's environment: SLURM_JOB_ID, SLURM_JOB_USER,
# SLURM_JOB_UID, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION, and, where the Slurm build passes them,
# SLURM_JOB_NAME, SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID (array jobs) and SLURM_JOB_GPUS (the
# allocated GPUs, "0,1"; older Slurm: GPU_DEVICE_ORDINAL or CUDA_VISIBLE_DEVICES, which may also
# list GPU-/MIG- UUIDs). Slurm 22.05 (Debian 12) passes none of the last five to the prolog
# (recorded: tests/data/slurm/recorded/prolog-*.env); then the prolog asks slurmctld once,
# `scontrol show job -d <id>`, for this node's GPU ids (the `Nodes=... GRES=gpu:2(IDX:0-1)` line
# naming SLURMD_NODENAME), the job name and the array ids. FLEETSCOPE_SCONTROL names the
# command (default scontrol; empty: never ask).
#
# Slurm's GPU ids are not NVML's indices. Slurm numbers a node's GPUs as its gres.conf lists them
# (File=/dev/nvidia[0-7], or AutoDetect=nvml: by device minor number), while NVML and
# dcgm-exporter's `gpu` label number them in PCI bus order; on many servers the two differ. The
# driver's /proc/driver/nvidia/gpus/<bus id>/information gives each GPU's "Device Minor", "GPU
# UUID" and "Bus Location", so the prolog maps Slurm id (= minor) -> UUID and NVML index (the
# GPU's rank in bus order), and records the map. Without that folder (no driver on the host
# running the script) each Slurm id is taken as the NVML index, as before.
#
# Writes, each atomically (a temporary file renamed into place):
#   $FLEETSCOPE_JOB_MAP_DIR/<NVML index>  dcgm-exporter --hpc-job-mapping-dir format: one job id
#                                         per line (a GPU shared by jobs lists each; default
#                                         /run/dcgm-job-map, the agent's agent.job_mapping_dir)
#   $FLEETSCOPE_GPUSTAT_DIR/<minor>       jobstats format: "<job id> <uid>" (default /run/gpustat;
#   $FLEETSCOPE_GPUSTAT_DIR/<GPU-uuid>    set it empty to skip), keyed by device minor (jobstats'
#   $FLEETSCOPE_GPUSTAT_DIR/<MIG-uuid>    GPU exporter) and by GPU and MIG UUID
#   $FLEETSCOPE_SLURM_JOB_DIR/<job id>.env  the owner record: KEY=VALUE lines (default
#                                         /run/fleetscope/slurm-jobs; the agent's agent.slurm_job_dir),
#                                         with SLURM_GPU_MAP=<slurm id>:<NVML index>:<UUID>,...
# A prolog that fails drains the node, so this script reports problems on stderr (slurmd's log)
# and always exits 0.
umask 022
map_dir=${FLEETSCOPE_JOB_MAP_DIR-/run/dcgm-job-map}
gpustat_dir=${FLEETSCOPE_GPUSTAT_DIR-/run/gpustat}
owner_dir=${FLEETSCOPE_SLURM_JOB_DIR-/run/fleetscope/slurm-jobs}
job=${SLURM_JOB_ID:-}
gpus=${SLURM_JOB_GPUS:-${GPU_DEVICE_ORDINAL:-${CUDA_VISIBLE_DEVICES:-}}}
nvidia_proc=${FLEETSCOPE_NVIDIA_PROC-/proc/driver/nvidia}
scontrol=${FLEETSCOPE_SCONTROL-scontrol}
job_name=${SLURM_JOB_NAME:-}
array_job=${SLURM_ARRAY_JOB_ID:-}
array_task=${SLURM_ARRAY_TASK_ID:-}

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

# "0-1,3" -> "0,1,3"
expand_ids() {
  printf '%s\n' "$1" | tr ',' '\n' | awk -F- 'NF == 2 {for (i = $1; i <= $2; i++) print i; next}
                                            NF == 1 && $1 != "" {print $1}' | paste -sd, -
}

# From `scontrol show job -d` ($1): "KEY VALUE" lines for this node's GPU ids (GPUS), the job
# name (NAME) and the array ids (ARRAY_JOB, ARRAY_TASK).
from_slurmctld() {
  printf '%s\n' "$1" | awk '
    NR > 1 && NF == 0 { exit }  # the other tasks of a job array follow its first record
    NR == 1 { for (i = 1; i <= NF; i++) {
                split($i, kv, "=")
                if (kv[1] == "ArrayJobId") print "ARRAY_JOB", kv[2]
                if (kv[1] == "ArrayTaskId") print "ARRAY_TASK", kv[2]
                if (kv[1] == "JobName") { name = $0; sub(/.*JobName=/, "", name); print "NAME", name }
              } }
    /^[ \t]+Nodes=/ && /GRES=/ { nodes = $1; sub(/^Nodes=/, "", nodes)
                                 gres = $0; sub(/.*GRES=/, "", gres); sub(/[ \t].*/, "", gres)
                                 if (match(gres, /gpu[^(,]*\(IDX:[^)]*\)/)) {
                                   ids = substr(gres, RSTART, RLENGTH)
                                   sub(/.*IDX:/, "", ids); sub(/\)$/, "", ids)
                                   print "NODES", nodes, ids } }'
}
if [ -n "$scontrol" ] && { [ -z "$gpus" ] || [ -z "$job_name" ]; } \
  && command -v "$scontrol" >/dev/null 2>&1; then
  if view=$("$scontrol" show job -d "$job" 2>&1); then
    facts=$(from_slurmctld "$view")
    [ -n "$job_name" ] || job_name=$(printf '%s\n' "$facts" | sed -n 's/^NAME //p')
    [ -n "$array_job" ] || array_job=$(printf '%s\n' "$facts" | sed -n 's/^ARRAY_JOB //p')
    [ -n "$array_task" ] || array_task=$(printf '%s\n' "$facts" | sed -n 's/^ARRAY_TASK //p')
    if [ -z "$gpus" ]; then
      node=${SLURMD_NODENAME:-$(hostname -s)}
      gpus=$(printf '%s\n' "$facts" | while read -r key nodes ids; do
        [ "$key" = NODES ] || continue
        "$scontrol" show hostnames "$nodes" 2>/dev/null | grep -Fqx "$node" && expand_ids "$ids"
      done | head -n 1)
    fi
  else
    warn "$scontrol show job -d $job failed: $view"
  fi
fi

# "<minor> <bus location> <uuid>" per GPU the driver lists, in bus order (NVML's index order).
driver_gpus() {
  for info in "$nvidia_proc"/gpus/*/information; do
    [ -f "$info" ] || continue
    awk '{key = $0; sub(/:.*/, "", key); value = $0; sub(/^[^:]*:[ \t]*/, "", value)}
         key == "Device Minor" {m = value} key == "Bus Location" {b = value}
         key == "GPU UUID" {u = value} END {if (m != "") print m, b, u}' "$info"
  done | LC_ALL=C sort -k2,2
}
inventory=$(driver_gpus)

# "<NVML index> <uuid>" of Slurm's GPU id $1 (its device minor); the id itself without a driver.
device_of() {
  if [ -z "$inventory" ]; then echo "$1 -"; return 0; fi
  printf '%s\n' "$inventory" | awk -v m="$1" '$1 == m {print NR - 1, $3; found = 1}
                                              END {exit !found}'
}

# The Slurm id -> NVML index -> UUID map of this job's GPUs, and its MIG devices.
gpu_map=""
for gpu in $(echo "$gpus" | tr ',' ' '); do
  case "$gpu" in
    MIG-*) gpu_map="${gpu_map:+$gpu_map,}-:-:$gpu"; continue ;;
    '' | *[!0-9]*) continue ;;
  esac
  device=$(device_of "$gpu") || continue  # warned about below, where it is skipped
  gpu_map="${gpu_map:+$gpu_map,}$gpu:${device%% *}:${device#* }"
done

if [ -n "$owner_dir" ] && mkdir -p "$owner_dir"; then
  {
    echo "SLURM_JOB_ID=$job"
    echo "SLURM_JOB_USER=$(value "${SLURM_JOB_USER:-}")"
    echo "SLURM_JOB_ACCOUNT=$(value "${SLURM_JOB_ACCOUNT:-}")"
    echo "SLURM_JOB_PARTITION=$(value "${SLURM_JOB_PARTITION:-}")"
    echo "SLURM_JOB_NAME=$(value "$job_name")"
    echo "SLURM_ARRAY_JOB_ID=$(value "$array_job")"
    echo "SLURM_ARRAY_TASK_ID=$(value "$array_task")"
    echo "SLURM_JOB_GPUS=$(value "$gpus")"
    echo "SLURM_GPU_MAP=$gpu_map"
  } | replace "$owner_dir/$job.env"
fi

[ -n "$gpus" ] || exit 0  # a job without GPUs: nothing to map
for dir in "$map_dir" "$gpustat_dir"; do
  [ -z "$dir" ] || mkdir -p "$dir" || warn "cannot create $dir"
done
gpustat() {  # jobstats' "<job id> <uid>" under the name $1
  if [ -n "$gpustat_dir" ] && [ -d "$gpustat_dir" ]; then
    echo "$job ${SLURM_JOB_UID:-}" | replace "$gpustat_dir/$1"
  fi
}
map_gpus() {
  for gpu in $(echo "$gpus" | tr ',' ' '); do
    case "$gpu" in
      MIG-*) gpustat "$gpu"; continue ;;  # a MIG device named by its UUID: jobstats only
      '' | *[!0-9]*) warn "GPU '$gpu' is not an index; skipped"; continue ;;
    esac
    if ! device=$(device_of "$gpu"); then
      warn "GPU $gpu: no device minor $gpu in $nvidia_proc/gpus; skipped"
      continue
    fi
    index=${device%% *}
    uuid=${device#* }
    if [ -d "$map_dir" ]; then
      { grep -Fvx "$job" "$map_dir/$index" 2>/dev/null; echo "$job"; } | replace "$map_dir/$index"
    fi
    gpustat "$gpu"
    [ "$uuid" = "-" ] || gpustat "$uuid"
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
