// An MLX array's elements in row-major order, for the CPU primitives whose loops read dense
// operands (lower/fma.cc, lower/threefry.cc). Call inside the primitive's task, once the array's
// data exists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mlx/array.h"

namespace jaxmlx::lower {

// The array's own memory when it is row-contiguous and dense, else its elements copied into
// `tmp` by walking its strides (broadcasts, transposes, slices).
template <typename T>
const T* row_major(const mlx::core::array& a, std::vector<T>& tmp) {
  const T* src = a.data<T>();
  const size_t n = a.size();
  if (a.flags().row_contiguous && a.data_size() == n) return src;
  tmp.resize(n);
  const mlx::core::Shape& shape = a.shape();
  const int nd = static_cast<int>(shape.size());
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  int64_t off = 0;
  for (size_t k = 0; k < n; ++k) {
    tmp[k] = src[off];
    for (int d = nd - 1; d >= 0; --d) {
      off += a.strides()[d];
      if (++idx[d] < shape[d]) break;
      off -= a.strides()[d] * shape[d];
      idx[d] = 0;
    }
  }
  return tmp.data();
}

}  // namespace jaxmlx::lower
