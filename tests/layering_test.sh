#!/bin/sh
# Layering: which folder (module) may include which, so that nothing includes
# across layers the wrong way. Usage: sh tests/layering_test.sh REPO_DIR
#
# The graph below is the only place the rule lives. Each line names a folder
# and the folders its files may include besides its own: the libraries it
# links in its CMakeLists.txt (target_link_libraries), with what those link in
# turn. A folder is listed after every folder it may include, so the graph
# has no cycles. tests/ may include anything; libuv (<uv.h>) stays inside
# comm/, the transport.
LAYERS='
src/common:
src/nn: src/common
src/data: src/common
src/gpu: src/common src/nn
comm: src/common
optim: src/common
embedding: src/common optim
roles: src/common src/nn src/gpu src/data comm optim embedding
src/app: src/common src/nn src/gpu src/data comm optim embedding roles
'
UV_FOLDER=comm

set -u
cd "$1" || exit 1

# The graph as edges " from>to " (each folder may include its own), checked
# on the way: every folder named on a line must be listed above it.
folders=''
edges=' '
problems=''
while IFS=: read -r folder deps; do
  [ -n "$folder" ] || continue
  for dep in $deps; do
    case " $folders " in
      *" $dep "*) ;;
      *) problems="$problems
the graph lets $folder include $dep, which is not a folder listed above it" ;;
    esac
    edges="$edges$folder>$dep "
  done
  folders="$folders $folder"
  edges="$edges$folder>$folder "
done << END
$LAYERS
END

# Sets `folder` to the module of a repository path ("src/nn/layer.h": src/nn,
# "comm/timer.h": comm), or to "" for a bare file name.
folder_of() {
  case "$1" in
    src/*/*)
      rest=${1#src/}
      folder=src/${rest%%/*}
      ;;
    */*) folder=${1%%/*} ;;
    *) folder='' ;;
  esac
}

# Every include of every source file, one per line: FILE <header> or FILE "path".
includes=$(find $folders -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) |
  sort | xargs grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' |
  sed 's/^\([^:]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*\(["<][^">]*[">]\).*/\1 \2/')

while read -r file included; do
  [ -n "$file" ] || continue
  folder_of "$file"
  from=$folder
  case "$included" in
    '<uv.h>')
      [ "$from" = "$UV_FOLDER" ] || problems="$problems
file $file includes <uv.h>: only folder $UV_FOLDER may use libuv"
      continue
      ;;
    '<'*) continue ;;
  esac
  path=${included#\"}
  path=${path%\"}
  folder_of "$path"
  if [ -z "$folder" ]; then
    problems="$problems
file $file includes $path: name includes from the repository root (folder/file.h)"
    continue
  fi
  case "$edges" in
    *" $from>$folder "*) ;;
    *) problems="$problems
file $file includes $path: folder $from may not include folder $folder" ;;
  esac
done << END
$includes
END

problems=$(printf '%s\n' "$problems" | sed '/^$/d')
if [ -n "$problems" ]; then
  printf '%s\n' "$problems"
  echo "layering: $(printf '%s\n' "$problems" | wc -l) problem(s) (the allowed graph is at the top of $0)"
  exit 1
fi
echo "layering: $(printf '%s\n' "$includes" | wc -l) includes in$folders keep the layers"
