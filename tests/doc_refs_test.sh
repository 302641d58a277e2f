#!/bin/sh
# Citations in the docs and the code's comments point at what a reader can
# open. Every tracked text file (the Markdown docs, C++ and CUDA sources, the
# shell scripts, the CMake files, YAML, the wire schema, the Dockerfile) is
# read, and each of these is an offence, printed as FILE:LINE: what:
#   - a repository path that does not exist: a word that starts with one of
#     the repository's top-level folders ("roles/", "docs/", "tests/", ...)
#     and names no file or folder of the checkout. Globs and placeholders
#     end the path where they start ("roles/server/*.h" cites roles/server/);
#     a path inside another (after "/", "$", "}") is not a citation. A
#     module may be named by its stem (the .h, .cc or .sh exists), a
#     generated header by its schema (NAME_generated.h: NAME.fbs), and an
#     example may use a one-letter name ("configs/x.yaml"). Files not yet
#     committed count (git's untracked, not ignored ones);
#   - an issue number ("issue" or "issues", an optional "#", digits): the
#     tracker is not part of the repository;
#   - the design notes or the shared folder outside the repository
#     (DESIGN + ".md", ".." + "/shared/"): cite the docs/ file that holds it.
# The fuzzers' corpora (tests/fuzz/corpus/) are inputs, not prose: skipped.
# Usage: doc_refs_test.sh REPO
REPO=$1
cd "$REPO" || exit 1
if ! git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  echo "skip: $REPO is not a git checkout (the files to read are the tracked ones)"
  exit 77
fi

# The tracked text files, and the top-level folders a citation starts with.
files=$(git ls-files | grep -E '(\.(md|h|cc|cu|cuh|sh|cmake|yaml|yml|fbs|py)|(^|/)CMakeLists\.txt|(^|/)Dockerfile|^\.ci/run)$' |
  grep -v '^tests/fuzz/corpus/')
folders=$(git ls-files | sed -n 's#^\([^/]*\)/.*#\1#p' | sort -u | sed 's/\./\\./g' | paste -sd '|' -)
[ -n "$files" ] && [ -n "$folders" ] || { echo "FAIL: no tracked files under $REPO"; exit 1; }

report=$(mktemp /tmp/pstrain-doc-refs-XXXXXX)
trap 'rm -f "$report"' EXIT

# Paths: grep prints FILE:LINE:MATCH, the match with the character before
# it (none at the start of a line), which must not be part of a longer path
# or word. awk strips that character and a sentence's full stop, and looks
# the path up among the tracked files and their folders.
{
  { git ls-files; git ls-files --others --exclude-standard; } |
    awk '{ print "have " $0; while (sub("/[^/]*$", "")) print "have " $0 "/" }'
  printf '%s\n' "$files" | tr '\n' '\0' |
    xargs -0 grep -nHoE "(^|[^A-Za-z0-9_./\$}@~-])($folders)/[A-Za-z0-9_.+/-]*" |
    sed 's/^/hit /'
} | awk '
  $1 == "have" { have[substr($0, 6)] = 1; next }
  {
    hit = substr($0, 5)
    file = hit; sub(/:.*/, "", file)
    rest = substr(hit, length(file) + 2)
    line = rest; sub(/:.*/, "", line)
    path = substr(rest, length(line) + 2)
    if (path !~ /^[A-Za-z.]/ || path ~ /^\.[^c]/) path = substr(path, 2)
    sub(/[.+-]+$/, "", path)
    if (path in have || (path "/") in have) next
    # A module named by its stem ("embedding/row_store": its .h and .cc).
    if ((path ".h") in have || (path ".cc") in have || (path ".sh") in have) next
    # Code flatc generates from a schema in the repository.
    stem = path; if (sub(/_generated\.h$/, ".fbs", stem) && stem in have) next
    # A one-letter placeholder in an example ("configs/x.yaml:7: ...").
    base = path; sub(/.*\//, "", base); if (base ~ /^[A-Za-z](\.[a-z]+)?$/) next
    printf "%s:%s: cites %s, which does not exist\n", file, line, path
  }' >> "$report"

grep -nHiE '(^|[^A-Za-z])issues? #?[0-9]+' $files |
  sed -E 's/^([^:]*:[0-9]+):.*/\1: cites an issue number (the tracker is not in the repository)/' >> "$report"
# The two names are spelt in pieces here, so that this file cites neither.
notes="DESIGN"".md"
outside="..""/shared/"
grep -nHF "$notes" $files |
  sed -E "s#^([^:]*:[0-9]+):.*#\1: cites $notes, which is not in the repository (cite its docs/ file)#" >> "$report"
grep -nHF "$outside" $files |
  sed -E "s#^([^:]*:[0-9]+):.*#\1: cites $outside, outside the repository#" >> "$report"

if [ -s "$report" ]; then
  sort -t: -k1,1 -k2,2n "$report" | uniq
  echo "doc_refs: $(sort -u "$report" | wc -l) citation(s) of what a reader cannot open"
  exit 1
fi
echo "doc_refs: every cited path exists in $(printf '%s\n' "$files" | wc -l) files; no issue numbers, no $notes"
