// Layer: one step of a network, with its forward and backward pass on a
// batch, and its parameters. Single-threaded: a layer belongs to one model,
// which belongs to one worker thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "src/common/batch.h"
#include "src/common/config/model_config.h"
#include "src/common/status.h"
#include "src/common/tensor.h"

namespace pstrain {

// A trainable tensor and the gradient of the loss with respect to it.
struct Param {
  std::string name;  // "<layer>.weight" / "<layer>.bias"
  Tensor value;
  Tensor grad;  // same shape; Backward() overwrites it
  // False: a statistic the layer keeps itself (batch_norm's running mean and
  // variance): no gradient, no optimizer, never on the servers; each worker
  // holds its own (roles/worker/allreduced_weights.h).
  bool trainable = true;
  // A statistic averaged among the workers every step (batch_norm's
  // sync_stats), not only at checkpoints and epoch ends.
  bool synced_each_step = false;
};

class Layer {
 public:
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }

  // Called once, before anything else: given one sample's input shape,
  // creates and initializes the parameters (seeded by `seed` and the
  // parameter's name, so values do not depend on build order) and returns
  // one sample's output shape. An error says what does not fit.
  virtual StatusOr<Shape> Build(const Shape& input, uint64_t seed) = 0;
  // in: [N, input...] -> out: [N, output...]. `batch` gives layers that read
  // the sparse ids or the dense features (embedding_bag, concat) their input.
  virtual void Forward(const Batch& batch, const Tensor& in, Tensor* out, bool training) = 0;
  // Given dL/dout, sets every parameter's grad and, when din is not null,
  // dL/din. `in` and `out` are the tensors of the last Forward.
  virtual void Backward(const Batch& batch, const Tensor& in, const Tensor& out, const Tensor& dout,
                        Tensor* din) = 0;
  virtual std::vector<Param*> Params() { return {}; }
  // A layer that draws random numbers (dropout) draws them as a function of
  // how many training Forwards came before; a resumed run sets that count to
  // where the checkpoint left it, so it draws what an uninterrupted run would.
  virtual void SetTrainingForwards(uint64_t /*done*/) {}

 protected:
  explicit Layer(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Makes a layer from its config; an unknown type or a missing field is an
// error naming the layer.
StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerConfig& config);

}  // namespace pstrain
