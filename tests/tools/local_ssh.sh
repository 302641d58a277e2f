#!/bin/sh
# A stand-in for ssh in tests: `local_ssh.sh [-o OPT]... HOST COMMAND` runs
# COMMAND here with sh, as sshd would run it on HOST. A host ending in
# .invalid cannot be reached: exit 255 with ssh's message, as ssh does.
# LOCAL_SSH_ARGS_LOG: a file each call appends its arguments to.
[ -n "${LOCAL_SSH_ARGS_LOG:-}" ] && echo "$*" >> "$LOCAL_SSH_ARGS_LOG"
while [ $# -gt 0 ]; do
  case "$1" in
  -o) shift 2 ;;
  -*) shift ;;
  *) break ;;
  esac
done
host="$1"
shift
case "$host" in
*.invalid)
  echo "ssh: Could not resolve hostname $host: Name or service not known" >&2
  exit 255
  ;;
esac
exec sh -c "$*"
