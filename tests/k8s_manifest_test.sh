#!/bin/sh
# launch/k8s/pstrain-job.yaml against the Kubernetes API's schemas, offline:
# tests/tools/validate_k8s.js with the npm module kubernetes-models (types,
# enums, required keys, and no key the schema does not know). Then the same
# manifest with a misspelt key and a bad value must be refused, so the check
# can fail. Skips (77) without node, PyYAML or the module; tests/run.sh
# installs the module into build/node_modules when npm is there.
# Usage: sh tests/k8s_manifest_test.sh [NODE_MODULES_DIR]
repo=$(cd "$(dirname "$0")/.." && pwd)
modules="${1:-$repo/build/node_modules}"
export NODE_PATH="$modules${NODE_PATH:+:$NODE_PATH}"
command -v node > /dev/null 2>&1 || { echo "skipped: no node"; exit 77; }
python3 -c "import yaml" > /dev/null 2>&1 || { echo "skipped: no PyYAML"; exit 77; }
node -e "require.resolve('kubernetes-models/package.json')" > /dev/null 2>&1 ||
  { echo "skipped: no npm module kubernetes-models in NODE_PATH=$NODE_PATH"; exit 77; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
to_json() {  # YAML on stdin -> a JSON array of its documents (YAML 1.1, as kubectl)
  python3 -c 'import json, sys, yaml; json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)'
}
validate() { timeout 60 node "$repo/tests/tools/validate_k8s.js"; }

failed=0
to_json < "$repo/launch/k8s/pstrain-job.yaml" | validate > "$tmp/good.out" 2>&1
status=$?
cat "$tmp/good.out"
if [ "$status" -ne 0 ]; then failed=1; echo "FAILED: the manifest does not validate (exit $status)"; fi

sed -e 's/^  podFailurePolicy:/  podFailurePolicyy:/' -e 's/imagePullPolicy: IfNotPresent/imagePullPolicy: Sometimes/' \
  "$repo/launch/k8s/pstrain-job.yaml" | to_json | validate > "$tmp/bad.out" 2>&1
status=$?
if [ "$status" -eq 1 ] && grep -q "/spec/podFailurePolicyy: unknown key" "$tmp/bad.out" &&
   grep -q "imagePullPolicy enum" "$tmp/bad.out"; then
  echo "ok: a misspelt key and a bad enum value are refused"
else
  failed=1; echo "FAILED: the broken manifest was not refused (exit $status):"; cat "$tmp/bad.out"
fi
[ "$failed" -eq 0 ]
