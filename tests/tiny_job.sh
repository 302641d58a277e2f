# Sourced by the tests that need a job to train but not what it learns
# (launchers, the command line, a node under load): a tiny click-data job
# that needs no data set installed. POSIX sh (dash and bash).
#
# tiny_job BIN DIR [PLACE]: writes generated Criteo-format data and
# DIR/tiny.yaml, a linear model over it trained for a few steps, and prints
# the config's path. BIN is the pstrain binary. PLACE: "ps" (default, every
# weight on the servers) or "allreduce" (every weight on the workers: a job
# of no servers). One training file, split among any number of workers.
tiny_job() {
  "$1" gen criteo --rows 512 --test-rows 64 --out "$2" > /dev/null || return 1
  if [ "${3:-ps}" = ps ]; then ps=true; else ps=false; fi
  cat > "$2/tiny.yaml" << EOF
model:
  input: [13]
  sparse_fields: 26
  loss: bce_with_logits
  wide:
    - {name: wide, type: embedding_bag, vocab: 4096, dim: 1, mode: sum, init: zeros}
  deep:
    - {name: dense, type: linear, out: 1}
data:
  format: criteo
  train: [train.txt-00000]
  test: [test.txt]
  vocab: 4096
train:
  steps: 4
  batch_size: 32
  log_every: 1
  optimizer: {type: adagrad, lr: 0.5}
parameters:
  - {match: "*", ps: $ps}
EOF
  echo "$2/tiny.yaml"
}
