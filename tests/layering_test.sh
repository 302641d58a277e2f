#!/bin/sh
# Layering: which folder (module) may include which, so that nothing includes
# across layers the wrong way. Usage: sh tests/layering_test.sh REPO_DIR
#
# The graph below is the only place the rule lives. A module is one folder's
# own files (roles/server is roles/server/*.h and *.cc; roles is only
# roles/local_job.*). Each line names a module and the modules it builds on
# directly; it may include those, and whatever they may include in turn. A
# module is listed after every module it names, so the graph has no cycles,
# and two modules neither of which reaches the other never include each
# other: roles/server and roles/worker do not, and roles/checkpoint and
# roles/placement, below both, include neither. tests/ may include anything;
# libuv (<uv.h>) stays inside the transport and the HTTP server.
LAYERS='
src/common:
src/common/config: src/common
src/nn: src/common/config
src/data: src/common/config
src/gpu: src/nn
optim: src/common/config
embedding: optim
comm/transport: src/common/config
comm/http: comm/transport
comm/collective: comm/transport
comm/ps: comm/transport optim
roles/placement: src/nn embedding
roles/checkpoint: roles/placement
roles/node: comm/transport
roles/scheduler: roles/node comm/http
roles/server: roles/node roles/checkpoint comm/ps
roles/worker: roles/node roles/checkpoint src/gpu src/data comm/collective comm/ps
roles/offline: roles/checkpoint src/data
roles: roles/scheduler roles/server roles/worker
src/app/plot: src/common
src/app/bench: roles
src/app/launcher: src/common/config
src/app: src/app/bench src/app/plot src/app/launcher roles/offline
'
UV_FOLDERS='comm/transport comm/http'

set -u
cd "$1" || exit 1

# The graph as edges " from>to ", closed under "may include what it may
# include" (each module may include its own), checked on the way: every
# module named on a line must be listed above it.
folders=''
edges=' '
problems=''
while IFS=: read -r folder deps; do
  [ -n "$folder" ] || continue
  reach=" $folder "
  for dep in $deps; do
    case " $folders " in
      *" $dep "*) ;;
      *) problems="$problems
the graph lets $folder include $dep, which is not a module listed above it" ;;
    esac
    for to in $folders; do
      case "$edges" in *" $dep>$to "*) reach="$reach$to " ;; esac
    done
  done
  for to in $reach; do edges="$edges$folder>$to "; done
  folders="$folders $folder"
done << END
$LAYERS
END

# Sets `folder` to the module of a repository path, its folder
# ("src/nn/layer.h": src/nn, "roles/server/shard.h": roles/server), or to ""
# for a bare file name.
folder_of() {
  case "$1" in
    */*) folder=${1%/*} ;;
    *) folder='' ;;
  esac
}

# Every folder that holds sources must be a module of the graph, or its
# files would escape it.
for dir in $(find . -path ./tests -prune -o -path './build*' -prune -o -path ./.git -prune -o \
  -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print |
  sed 's#^\./##; s#/[^/]*$##' | sort -u); do
  case " $folders " in
    *" $dir "*) ;;
    *) problems="$problems
folder $dir holds sources but is not a module of the graph" ;;
  esac
done

# Every include of every source file, one per line: FILE <header> or FILE "path".
includes=$(for f in $folders; do find "$f" -maxdepth 1 -type f; done | grep -E '\.(h|cc|cu|cuh)$' |
  sort | xargs grep -H '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' |
  sed 's/^\([^:]*\):[[:space:]]*#[[:space:]]*include[[:space:]]*\(["<][^">]*[">]\).*/\1 \2/')
while read -r file included; do
  [ -n "$file" ] || continue
  folder_of "$file"
  from=$folder
  case "$included" in
    '<uv.h>')
      case " $UV_FOLDERS " in
        *" $from "*) ;;
        *) problems="$problems
file $file includes <uv.h>: only $UV_FOLDERS may use libuv" ;;
      esac
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
