// Eigen views over Tensor storage, so layers compute in place on their own
// buffers (no copies, no allocation). Tensors are row-major; a row-major
// [rows, cols] block is the same memory as a column-major [cols, rows] one,
// which lets a layer pick whichever view makes its GEMM transpose-free.
#pragma once

#include <Eigen/Core>

namespace pstrain {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMap = Eigen::Map<RowMatrix>;
using ConstRowMap = Eigen::Map<const RowMatrix>;
using ColMap = Eigen::Map<Eigen::MatrixXf>;
using ConstColMap = Eigen::Map<const Eigen::MatrixXf>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace pstrain
