#!/bin/sh
# Starts the workers of a pstrain job in the background, one process per
# worker, logs worker_<i>.log. Usage: sh launch/Worker.sh
# By default this host starts all MS_WORKER_NUM workers; set
# PSTRAIN_LOCAL_WORKERS to start fewer (the rest run on other hosts).
. "$(dirname "$0")/common.sh"

export MS_ROLE=MS_WORKER
count="${PSTRAIN_LOCAL_WORKERS:-$MS_WORKER_NUM}"
check_count PSTRAIN_LOCAL_WORKERS "$count"
start_nodes worker "$count"
