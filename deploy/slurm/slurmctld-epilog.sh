#!/bin/sh
# fleetscope slurmctld epilog: store the finished job's fleetscope summary in its AdminComment,
# as jobstats does with its own, so `sacct -j JOBID -o AdminComment%-2000` (and any tool reading
# it) finds the job's recoverable GPU-hours and findings after the job is gone. Install on the
# controller (slurm.conf):
#   EpilogSlurmctld=/opt/fleetscope/deploy/slurm/slurmctld-epilog.sh
# slurmctld runs it as SlurmUser, who may update AdminComment, with SLURM_JOB_ID set.
#
# It asks the fleetscope read API for GET /v1/jobs/<id>/summary with a read token
# (server.read_tokens) and stores "FS1:" + base64(gzip(the JSON)) (analyzers/read_api/summary.py
# documents the summary; jobstats' own prefix is "JS1:", so the two never read each other's, but
# both write AdminComment: run one of them, or set FLEETSCOPE_COMMENT_FIELD=Comment).
# Settings, from the environment slurmctld gives it (or /etc/default/fleetscope-slurmctld):
#   FLEETSCOPE_URL              the server or a gateway, e.g. https://fleetscope.example:8470
#   FLEETSCOPE_READ_TOKEN_FILE  a file holding one read token (default /etc/fleetscope/read-token)
#   FLEETSCOPE_CA_FILE          CA bundle of the server's certificate (optional)
# A job fleetscope has no record of (no GPU) is left alone. Always exits 0: a failing
# EpilogSlurmctld delays the job's completion; problems go to stderr (slurmctld's log).
defaults=${FLEETSCOPE_DEFAULTS-/etc/default/fleetscope-slurmctld}
# shellcheck disable=SC1090
[ -n "$defaults" ] && [ -r "$defaults" ] && . "$defaults"
url=${FLEETSCOPE_URL:-}
token_file=${FLEETSCOPE_READ_TOKEN_FILE:-/etc/fleetscope/read-token}
field=${FLEETSCOPE_COMMENT_FIELD:-AdminComment}
job=${SLURM_JOB_ID:-}

warn() { echo "fleetscope slurmctld epilog: job ${job:-?}: $*" >&2; }

case "$job" in
  '' | *[!0-9_]*) warn "SLURM_JOB_ID missing or not a job id; nothing stored"; exit 0 ;;
esac
case "$field" in
  AdminComment | Comment) ;;
  *) warn "FLEETSCOPE_COMMENT_FIELD must be AdminComment or Comment, not '$field'"; exit 0 ;;
esac
[ -n "$url" ] || { warn "FLEETSCOPE_URL is not set; nothing stored"; exit 0; }
token=$(cat "$token_file" 2>/dev/null) || { warn "cannot read $token_file"; exit 0; }

set -- --silent --show-error --fail --max-time 10 \
  --header "Authorization: Bearer $token" "$url/v1/jobs/$job/summary"
[ -z "${FLEETSCOPE_CA_FILE:-}" ] || set -- --cacert "$FLEETSCOPE_CA_FILE" "$@"
if ! answer=$(curl "$@" 2>&1); then
  case "$answer" in
    *"error: 404"*) exit 0 ;;  # fleetscope never saw the job: no summary to store
  esac
  warn "GET $url/v1/jobs/$job/summary failed: $answer"
  exit 0
fi
encoded=$(printf '%s' "$answer" | gzip -9n | base64 | tr -d '\n') || {
  warn "cannot encode the summary"
  exit 0
}
scontrol update "JobId=$job" "$field=FS1:$encoded" || warn "scontrol update failed"
exit 0
