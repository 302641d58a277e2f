// What the src/nn tests share (tests/nn_test.cc, tests/nn_layers_test.cc):
// random inputs, a layer built from its config, and the check of a layer's
// gradients against central finite differences.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "src/nn/layers.h"

namespace pstrain {
namespace nn_testing {

inline constexpr uint64_t kSeed = 42;

inline FloatBuffer Uniform(size_t count, std::mt19937* rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  FloatBuffer v(count);
  for (float& x : v) x = dist(*rng);
  return v;
}

// Distinct values spaced 4 / count apart in (-2, 2), none near 0: a step of
// eps < 2 / count never crosses a kink of relu or changes a max's winner.
inline FloatBuffer Distinct(size_t count, std::mt19937* rng) {
  FloatBuffer v(count);
  for (size_t i = 0; i < count; ++i) v[i] = -2.0f + (i + 0.5f) * 4.0f / count;
  std::shuffle(v.begin(), v.end(), *rng);
  return v;
}

inline Shape WithBatch(int64_t n, const Shape& sample) {
  Shape s{n};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

// A loss in which every output matters: sum(out * w), summed in double so
// that rounding hardly blurs the finite differences.
inline double WeightedSum(const Tensor& out, const FloatBuffer& w) {
  double sum = 0.0;
  for (size_t i = 0; i < w.size(); ++i) sum += static_cast<double>(out.data[i]) * w[i];
  return sum;
}

// |a - b| / max(|a| + |b|, 1e-2): relative where gradients are large, and
// an absolute 1e-5 bound where they are near zero (where a relative error
// would only measure float noise).
inline double RelativeError(double a, double b) {
  return std::fabs(a - b) / std::max(std::fabs(a) + std::fabs(b), 1e-2);
}

// Compares `analytic` with central differences of `loss` in each element of *x.
inline void CheckAgainstDifferences(FloatBuffer* x, const FloatBuffer& analytic,
                                    const std::function<double()>& loss, float eps,
                                    const std::string& what) {
  REQUIRE(x->size() == analytic.size());
  double worst = 0.0;
  size_t worst_at = 0;
  double worst_numeric = 0.0;
  for (size_t i = 0; i < x->size(); ++i) {
    const float saved = (*x)[i];
    const float up = saved + eps, down = saved - eps;
    (*x)[i] = up;
    const double loss_up = loss();
    (*x)[i] = down;
    const double loss_down = loss();
    (*x)[i] = saved;
    const double numeric = (loss_up - loss_down) / (static_cast<double>(up) - down);
    const double error = RelativeError(numeric, analytic[i]);
    if (error > worst) {
      worst = error;
      worst_at = i;
      worst_numeric = numeric;
    }
  }
  INFO(what << ": worst element " << worst_at << " analytic " << analytic[worst_at] << " numeric "
            << worst_numeric);
  CHECK(worst < 1e-3);
}

struct GradCase {
  LayerConfig config;
  Shape sample;           // one sample's input shape
  int64_t n = 2;          // batch size
  float eps = 1e-2f;      // linear layers are exact at any step; curved ones need less
  bool distinct = false;  // inputs from Distinct(): no kink crossed
  Shape dense;            // concat: the model's dense input
  // dropout: the mask changes with every Forward, so each evaluation uses a
  // fresh layer, whose first Forward draws the same mask as the one checked.
  bool fresh_layer = false;

  GradCase Eps(float e) const { return With(&GradCase::eps, e); }
  GradCase DistinctInputs() const { return With(&GradCase::distinct, true); }
  GradCase Dense(Shape d) const { return With(&GradCase::dense, std::move(d)); }
  GradCase FreshLayer() const { return With(&GradCase::fresh_layer, true); }

 private:
  template <typename T>
  GradCase With(T GradCase::*field, T value) const {
    GradCase c = *this;
    c.*field = std::move(value);
    return c;
  }
};

inline GradCase Case(const LayerConfig& config, const Shape& sample, int64_t n = 2) {
  GradCase c;
  c.config = config;
  c.sample = sample;
  c.n = n;
  return c;
}

inline LayerConfig Spec(LayerType type) {
  LayerConfig c;
  c.type = type;
  c.name = LayerTypeName(type);
  return c;
}

inline std::unique_ptr<Layer> BuildLayer(const GradCase& c) {
  auto layer = CreateLayer(c.config, LayerContext{c.dense});
  REQUIRE(layer.ok());
  auto shape = (*layer)->Build(c.sample, kSeed);
  INFO(shape.status().ToString());
  REQUIRE(shape.ok());
  return std::move(*layer);
}

// Three samples of three ids each, every sample repeating an id.
inline Batch SparseBatch() {
  Batch b;
  b.fields = 3;
  b.sparse = {2, 2, 5, 0, 3, 3, 1, 1, 1};
  b.labels = {0, 1, 0};
  return b;
}

inline void CheckLayerGradients(const GradCase& c) {
  INFO("layer " << LayerTypeName(c.config.type) << " " << c.config.name);
  std::mt19937 rng(7);
  auto layer = BuildLayer(c);
  const bool ids = c.config.type == LayerType::kEmbeddingBag;
  Batch batch = ids ? SparseBatch() : Batch{};
  const int64_t n = ids ? 3 : c.n;
  batch.dense = Tensor(WithBatch(n, c.dense));
  batch.dense.data = Uniform(batch.dense.data.size(), &rng);
  Tensor in(WithBatch(n, c.sample));
  in.data = c.distinct ? Distinct(in.data.size(), &rng) : Uniform(in.data.size(), &rng);

  Tensor out;
  layer->Forward(batch, in, &out, true);
  const FloatBuffer w = Uniform(out.data.size(), &rng);
  Tensor dout(out.shape);
  dout.data = w;
  Tensor din;
  layer->Backward(batch, in, out, dout, &din);

  auto loss = [&] {
    Tensor o;
    if (c.fresh_layer) {
      BuildLayer(c)->Forward(batch, in, &o, true);
    } else {
      layer->Forward(batch, in, &o, true);
    }
    return WeightedSum(o, w);
  };
  if (!ids) {  // an embedding_bag's input is the ids
    CheckAgainstDifferences(&in.data, din.data, loss, c.eps, "input");
  }
  for (Param* p : layer->Params()) {
    const FloatBuffer analytic = p->grad.data;
    CheckAgainstDifferences(&p->value.data, analytic, loss, c.eps, p->name);
  }
}

}  // namespace nn_testing
}  // namespace pstrain
