#!/bin/sh
# Every C++ file follows .clang-format. Usage: sh tests/format_test.sh REPO_DIR
# Exits 77 (CTest: skipped) when clang-format is not installed.
set -u
cd "$1" || exit 1
if ! command -v clang-format > /dev/null 2>&1; then
  echo "skipped: clang-format is not installed"
  exit 77
fi
bad=0
for f in $(find src comm roles optim embedding tests -name '*.cc' -o -name '*.h' | sort); do
  if ! clang-format --dry-run -Werror "$f" > /dev/null 2>&1; then
    echo "not formatted: $f (run: clang-format -i $f)"
    bad=$((bad + 1))
  fi
done
[ "$bad" = 0 ] && echo "format: all files formatted"
[ "$bad" = 0 ]
