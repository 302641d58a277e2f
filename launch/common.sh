# Sourced by Scheduler.sh, Server.sh and Worker.sh (POSIX sh: dash and bash).
#
# Defaults for the job's variables and its config (the caller's environment
# wins), where to write logs, and how to find the pstrain binary without the
# user naming it.

LAUNCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO_DIR=$(dirname "$LAUNCH_DIR")

. "$LAUNCH_DIR/defaults.sh"
export MS_SERVER_NUM="${MS_SERVER_NUM:-$PSTRAIN_DEFAULT_SERVERS}"
export MS_WORKER_NUM="${MS_WORKER_NUM:-$PSTRAIN_DEFAULT_WORKERS}"
export MS_SCHED_HOST="${MS_SCHED_HOST:-127.0.0.1}"
export MS_SCHED_PORT="${MS_SCHED_PORT:-$PSTRAIN_DEFAULT_SCHED_PORT}"
# Every node of the job reads the same config.
export PSTRAIN_CONFIG="${PSTRAIN_CONFIG:-$REPO_DIR/$PSTRAIN_DEFAULT_CONFIG}"

# Logs go to the current directory, as with MindSpore's scripts.
PSTRAIN_LOG_DIR="${PSTRAIN_LOG_DIR:-.}"
mkdir -p "$PSTRAIN_LOG_DIR"

. "$LAUNCH_DIR/find_binary.sh"

# How many processes this host starts: all of the job's by default; on a
# multi-machine job, set PSTRAIN_LOCAL_SERVERS / PSTRAIN_LOCAL_WORKERS and
# PSTRAIN_FIRST_INDEX (the first rank this host's processes ask for) per host.
check_count() {  # name value
  case "$2" in
    ''|*[!0-9]*) echo "$(basename "$0"): $1 is '$2': expected a whole number" >&2; exit 2 ;;
  esac
}

# start_node NAME: runs pstrain in the background with output in NAME.log;
# NAME.pid holds its process id and NAME.exit, once it ends, its exit status.
start_node() {
  name="$1"
  rm -f "$PSTRAIN_LOG_DIR/$name.exit" "$PSTRAIN_LOG_DIR/$name.pid"
  (
    "$PSTRAIN_BIN" > "$PSTRAIN_LOG_DIR/$name.log" 2>&1 &
    pid=$!
    echo "$pid" > "$PSTRAIN_LOG_DIR/$name.pid"
    wait "$pid"
    echo $? > "$PSTRAIN_LOG_DIR/$name.exit"
  ) &
  echo "started $name (log: $PSTRAIN_LOG_DIR/$name.log, config: $PSTRAIN_CONFIG)"
}

# start_nodes ROLE_WORD COUNT: COUNT processes named ROLE_WORD_<i>, i from
# PSTRAIN_FIRST_INDEX. Process i asks for rank i (MS_NODE_RANK), so that
# ROLE_WORD_<i>.log holds rank i; a rank another node holds is refused. A
# given MS_NODE_ID becomes MS_NODE_ID-ROLE_WORD-<i>: distinct per process, and
# a server's never equal to a worker's.
start_nodes() {
  word="$1"
  count="$2"
  first="${PSTRAIN_FIRST_INDEX:-0}"
  check_count PSTRAIN_FIRST_INDEX "$first"
  base_id="${MS_NODE_ID:-}"
  i=0
  while [ "$i" -lt "$count" ]; do
    index=$((first + i))
    export MS_NODE_RANK="$index"
    if [ -n "$base_id" ]; then export MS_NODE_ID="$base_id-$word-$index"; fi
    start_node "${word}_$index"
    i=$((i + 1))
  done
}
