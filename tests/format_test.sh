#!/bin/sh
# Every C++ file follows .clang-format. Usage: sh tests/format_test.sh REPO_DIR
# Exits 77 (CTest: skipped) when clang-format is not installed.
set -u
cd "$1" || exit 1
if ! command -v clang-format > /dev/null 2>&1; then
  echo "skipped: clang-format is not installed"
  exit 77
fi
files=$(find src comm roles optim embedding tests -name '*.cc' -o -name '*.h' | sort)
# One clang-format for every file (one process per file took most of a
# minute on a busy 2-core machine); only on failure, one per file to name them.
# shellcheck disable=SC2086
if clang-format --dry-run -Werror $files > /dev/null 2>&1; then
  echo "format: all files formatted"
  exit 0
fi
for f in $files; do
  clang-format --dry-run -Werror "$f" > /dev/null 2>&1 ||
    echo "not formatted: $f (run: clang-format -i $f)"
done
exit 1
