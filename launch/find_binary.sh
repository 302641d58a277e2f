# Sourced by the launch scripts (POSIX sh): sets PSTRAIN_BIN to the pstrain
# binary, or exits 2 naming what to do. Looks at $PSTRAIN_BIN, then this
# checkout's build, then the bin/ of an install (cmake --install puts the
# scripts in <prefix>/share/pstrain/launch, so REPO_DIR is
# <prefix>/share/pstrain and the binary <prefix>/bin/pstrain), then PATH.
# Needs REPO_DIR (the checkout's root) to be set.
if [ -z "${PSTRAIN_BIN:-}" ]; then
  for candidate in "$REPO_DIR/build/src/app/pstrain" "$REPO_DIR/bin/pstrain" \
    "$REPO_DIR/../../bin/pstrain"; do
    if [ -x "$candidate" ]; then PSTRAIN_BIN="$candidate"; break; fi
  done
fi
if [ -z "${PSTRAIN_BIN:-}" ]; then PSTRAIN_BIN=$(command -v pstrain || true); fi
if [ -z "${PSTRAIN_BIN:-}" ] || [ ! -x "$PSTRAIN_BIN" ]; then
  echo "$(basename "$0"): cannot find the pstrain binary: build it (sh launch/build.sh) or set PSTRAIN_BIN" >&2
  exit 2
fi
