// The YAML config's gradient compression and parameter averaging keys
//: what each parameter gets, and the file:line: key message for
// each mistake.
#include <doctest/doctest.h>

#include "src/common/config/config.h"
#include "tests/config_test_util.h"

namespace pstrain {
namespace {

using testing::ErrorOf;
using testing::Parse;

TEST_CASE("compression: train's default, a rule's override, and what each parameter gets") {
  const Config c = Parse(R"(train:
  compression: {type: threshold, threshold: 2e-3, adaptive: false,
                target_density: [1e-3, 5e-2], step: 0.25, shake_up_every: 50}
parameters:
  - {match: fc*, ps: false, compression: {type: threshold, threshold: 0.5}}
  - {match: conv1*, compression: {type: none}}
  - {match: emb, init_in_server: true, compression: {type: none}}
)");
  const CompressionConfig& t = c.train.compression;
  CHECK(t.type == CompressionType::kThreshold);
  CHECK(t.threshold == 2e-3f);
  CHECK_FALSE(t.adaptive);
  CHECK(t.min_density == 1e-3);
  CHECK(t.max_density == 5e-2);
  CHECK(t.step == 0.25f);
  CHECK(t.shake_up_every == 50);
  // A rule's compression replaces the default whole: what it leaves out
  // takes CompressionConfig's defaults, not train.compression's.
  const CompressionConfig fc = CompressionFor(c, "fc1.weight");
  CHECK(fc.type == CompressionType::kThreshold);
  CHECK(fc.threshold == 0.5f);
  CHECK(fc.adaptive);
  CHECK(fc.shake_up_every == 0);
  CHECK_FALSE(CompressionFor(c, "conv1.weight").enabled());
  CHECK(CompressionFor(c, "conv2.weight").threshold == 2e-3f);  // no rule: train's
  // The default is none; type alone is enough.
  CHECK_FALSE(Parse("train: {epochs: 1}\n").train.compression.enabled());
  CHECK(Parse("train: {compression: {type: threshold}}\n").train.compression.threshold == 1e-3f);
  CHECK(Parse("train: {compression: {type: threshold, target_density: [0.01, 0.01]}}\n")
            .train.compression.max_density == 0.01);
  // Warm-up: on by default (4 epochs from 2%), 0 turns it off.
  const CompressionConfig plain =
      Parse("train: {compression: {type: threshold}}\n").train.compression;
  CHECK(plain.warmup_epochs == 4);
  CHECK(plain.warmup_density == 0.75);
  const CompressionConfig dgc =
      Parse("train: {compression: {type: threshold, warmup_epochs: 0, warmup_density: 1}}\n")
          .train.compression;
  CHECK(dgc.warmup_epochs == 0);
  CHECK(dgc.warmup_density == 1.0);
}

TEST_CASE("a bad compression value names the key and what was expected") {
  CHECK(ErrorOf("train:\n  compression: {threshold: 1e-3}\n") ==
        "x.yaml:2: train.compression.type: required key is missing");
  CHECK(ErrorOf("train:\n  compression: {type: topk}\n") ==
        "x.yaml:2: train.compression.type: expected one of none|threshold, got 'topk'");
  CHECK(ErrorOf("train:\n  compression: threshold\n") ==
        "x.yaml:2: train.compression: expected a mapping, got 'threshold'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, threshold: 0}\n") ==
        "x.yaml:2: train.compression.threshold: expected a number > 0, got '0'");
  CHECK(ErrorOf("train:\n  compression:\n    type: threshold\n    threshold: -1e-3\n") ==
        "x.yaml:4: train.compression.threshold: expected a number > 0, got '-1e-3'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, adaptive: sometimes}\n") ==
        "x.yaml:2: train.compression.adaptive: expected true or false, got 'sometimes'");
  const std::string kPair = "expected [min, max] with 0 < min <= max <= 1, got ";
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: 0.01}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "'0.01'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: [0.01]}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "a list");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: [1e-4, 1e-2, 1]}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "a list");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: [0.1, 0.01]}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "a list");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: [0, 0.01]}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "a list");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: [0.01, 1.5]}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "a list");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, target_density: [a, 0.01]}\n") ==
        "x.yaml:2: train.compression.target_density: " + kPair + "a list");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, warmup_epochs: -1}\n") ==
        "x.yaml:2: train.compression.warmup_epochs: expected an integer in 0..1000, got '-1'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, warmup_density: 0}\n") ==
        "x.yaml:2: train.compression.warmup_density: expected a number in (0, 1], got '0'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, warmup_density: 1.5}\n") ==
        "x.yaml:2: train.compression.warmup_density: expected a number in (0, 1], got '1.5'");
  CHECK(ErrorOf("train:\n  compression: {type: none, warmup_epochs: 2}\n") ==
        "x.yaml:2: train.compression.warmup_epochs: is only used with type: threshold");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, step: 0}\n") ==
        "x.yaml:2: train.compression.step: expected a number in (0, 1), got '0'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, step: 1}\n") ==
        "x.yaml:2: train.compression.step: expected a number in (0, 1), got '1'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, step: -0.1}\n") ==
        "x.yaml:2: train.compression.step: expected a number in (0, 1), got '-0.1'");
  CHECK(ErrorOf("train:\n  compression: {type: threshold, shake_up_every: -1}\n") ==
        "x.yaml:2: train.compression.shake_up_every: expected an integer >= 0, got '-1'");
  CHECK(ErrorOf("parameters:\n  - match: fc*\n    compression: {type: threshold, step: 2}\n") ==
        "x.yaml:3: parameters[0].compression.step: expected a number in (0, 1), got '2'");
}

TEST_CASE("compression settings that would be ignored are errors") {
  CHECK(ErrorOf("train:\n  compression:\n    type: none\n    threshold: 1e-3\n") ==
        "x.yaml:4: train.compression.threshold: is only used with type: threshold");
  CHECK(ErrorOf("parameters:\n  - {match: a, compression: {type: none, shake_up_every: 5}}\n") ==
        "x.yaml:2: parameters[0].compression.shake_up_every: is only used with type: threshold");
  CHECK(ErrorOf("parameters:\n  - match: emb\n    init_in_server: true\n"
                "    compression: {type: threshold}\n") ==
        "x.yaml:4: parameters[0].compression: is for dense weights; init_in_server tables send "
        "only the rows a batch touched");
  // Averaging sends weights every N steps, not gradients: nothing to encode.
  CHECK(
      ErrorOf("train:\n  mode: average\n  average_every: 4\n  compression: {type: threshold}\n") ==
      "x.yaml:4: train.compression: is not used with mode: average");
  CHECK(ErrorOf("train: {mode: average, average_every: 4}\n"
                "parameters:\n  - {match: fc*, compression: {type: threshold}}\n") ==
        "x.yaml:3: parameters[0].compression: is not used with mode: average");
  CHECK(ErrorOf("parameters:\n  - {match: fc*, compression: {type: threshold}}\n"
                "train: {mode: average, average_every: 4}\n") ==
        "x.yaml:2: parameters[0].compression: is not used with mode: average");
  CHECK(Parse("train: {mode: average, average_every: 4, compression: {type: none}}\n")
            .train.average_every == 4);
}

TEST_CASE("mode: average takes average_every, and only it does") {
  const Config c = Parse("train: {mode: average, average_every: 16}\n");
  CHECK(c.train.mode == UpdateMode::kAverage);
  CHECK(c.train.average_every == 16);
  CHECK(Parse("train: {mode: sync}\n").train.average_every == 0);
  CHECK(ErrorOf("train:\n  epochs: 1\n  mode: average\n") ==
        "x.yaml:3: train.mode: average needs train.average_every (steps, >= 1)");
  CHECK(ErrorOf("train:\n  mode: sync\n  average_every: 4\n") ==
        "x.yaml:3: train.average_every: 4 is only used with mode: average");
  CHECK(ErrorOf("train:\n  average_every: 4\n") ==
        "x.yaml:2: train.average_every: 4 is only used with mode: average");
  CHECK(ErrorOf("train:\n  mode: average\n  average_every: 0\n") ==
        "x.yaml:3: train.average_every: expected an integer >= 1, got '0'");
}

TEST_CASE("clip_norm: a number > 0, in sync mode, on the paths that hold a step's whole gradient") {
  CHECK(Parse("train: {clip_norm: 1.5}\n").train.clip_norm == 1.5f);
  CHECK(Parse("train: {epochs: 1}\n").train.clip_norm == 0);
  CHECK(ErrorOf("train:\n  clip_norm: 0\n") ==
        "x.yaml:2: train.clip_norm: expected a number > 0, got '0'");
  CHECK(ErrorOf("train:\n  mode: async\n  clip_norm: 1\n") ==
        "x.yaml:3: train.clip_norm: needs train.mode: sync: the global norm is of one step's "
        "gradient from every worker, which the other modes never hold at once");
  CHECK(ErrorOf("train:\n  clip_norm: 1\n  compression: {type: threshold}\n") ==
        "x.yaml:2: train.clip_norm: does not work with train.compression: the encoders delay "
        "part of each gradient, so no step holds its whole gradient");
  CHECK(ErrorOf("train:\n  clip_norm: 1e-50\n") ==
        "x.yaml:2: train.clip_norm: expected a number > 0, got '1e-50'");
  CHECK(ErrorOf("train:\n  clip_norm: 1\n  checkpoint: {dir: c, every_steps: 5}\n"
                "  elastic: {workers: [1, 2]}\n") ==
        "x.yaml:2: train.clip_norm: does not work with train.elastic yet");
  CHECK(ErrorOf("train:\n  clip_norm: 1\n  replication: {replicas: 1}\n") ==
        "x.yaml:2: train.clip_norm: does not work with train.replication yet");
  CHECK(Parse("train: {clip_norm: 1}\nparameters:\n  - {match: emb, init_in_server: true}\n")
            .train.clip_norm == 1);
  CHECK(ErrorOf("train: {clip_norm: 1}\nparameters:\n  - match: fc*\n    ps: false\n"
                "    compression: {type: threshold}\n") ==
        "x.yaml:5: parameters[0].compression: does not work with train.clip_norm: the encoders "
        "delay part of each gradient, so no step holds its whole gradient");
  CHECK(ErrorOf("model:\n  device: gpu\n  input: [4]\n  layers: [{type: linear, out: 2}]\n"
                "train: {clip_norm: 1}\n") ==
        "x.yaml:2: model.device: gpu does not clip gradients yet (train.clip_norm); use "
        "device: cpu");
}

}  // namespace
}  // namespace pstrain
