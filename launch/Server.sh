#!/bin/sh
# Starts the servers of a pstrain job in the background, one process per
# server, logs server_<i>.log. Usage: sh launch/Server.sh
# By default this host starts all MS_SERVER_NUM servers; set
# PSTRAIN_LOCAL_SERVERS to start fewer (the rest run on other hosts).
. "$(dirname "$0")/common.sh"

export MS_ROLE=MS_PSERVER
count="${PSTRAIN_LOCAL_SERVERS:-$MS_SERVER_NUM}"
check_count PSTRAIN_LOCAL_SERVERS "$count"
start_nodes server "$count"
