#!/bin/sh
# Starts the scheduler of a pstrain job in the background; its log is
# scheduler.log. Usage: sh launch/Scheduler.sh
# Every MS_* variable below may be set by the caller; these are defaults.
. "$(dirname "$0")/common.sh"

export MS_ROLE=MS_SCHED
unset MS_NODE_RANK  # the scheduler takes no rank (one left from a node's shell)
start_node scheduler
