#include "runtime/device_scalars.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "lower/util.h"
#include "mlx/ops.h"
#include "mlx/transforms.h"

namespace mx = mlx::core;

namespace jaxmlx::runtime {

namespace {

// MLX's CUDA allocator takes every request of at most this many bytes from its small-buffer pool.
constexpr size_t kPoolBytes = 8;
// What a copy takes instead: more than the pool's size.
constexpr size_t kCopyBytes = 16;

std::string value_key(const mx::array& a) {
  std::string key;
  const auto kind = a.dtype().val();
  key.append(reinterpret_cast<const char*>(&kind), sizeof(kind));
  key.append(a.data<char>(), a.nbytes());
  return key;
}

// Device copies of rank-1 [1] values by value, shared by every graph of the process (never freed:
// a few bytes each, and MLX's allocator may be gone when static objects are destroyed).
class CopyCache {
 public:
  mx::array get(const mx::array& scalar) {
    std::string key = value_key(scalar);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = copies_.find(key);
    if (it == copies_.end())
      it = copies_.emplace(std::move(key), device_copy(mx::reshape(scalar, {1}))).first;
    return it->second;
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, mx::array> copies_;
};

CopyCache& copy_cache() {
  static CopyCache* cache = new CopyCache();
  return *cache;
}

}  // namespace

bool device_scalars_enabled() {
  const char* v = std::getenv("JAXMLX_DEVICE_SCALARS");
  if (v != nullptr && *v != '\0') return std::string_view(v) == "1";
  return lower::on_cuda_gpu();
}

bool in_small_buffer(const mx::array& a) {
  return !a.has_primitive() && !a.is_tracer() && a.is_available() && a.size() > 0 &&
         a.nbytes() <= kPoolBytes && a.flags().row_contiguous && a.buffer_size() <= kPoolBytes;
}

mx::array device_copy(const mx::array& a) {
  const int size = static_cast<int>(a.size());
  const int wide = std::max<int>(size + 1, static_cast<int>(kCopyBytes / a.itemsize()));
  // Concatenate is a kernel: its output is memory of the GPU's own.
  mx::array buffer = mx::concatenate({mx::reshape(a, {size}), mx::zeros({wide - size}, a.dtype())});
  mx::array view = mx::reshape(mx::slice(buffer, {0}, {size}), a.shape());
  mx::eval(view);
  return view;
}

int place_scalars_on_device(std::vector<mx::array>& outputs) {
  std::unordered_map<std::string, mx::array> nodes;  // this graph's view of each value
  std::unordered_set<std::uintptr_t> seen;
  std::vector<mx::array> stack(outputs.begin(), outputs.end());
  int placed = 0;
  while (!stack.empty()) {
    mx::array a = std::move(stack.back());
    stack.pop_back();
    if (!a.has_primitive() || !seen.insert(a.id()).second) continue;
    for (size_t k = 0; k < a.inputs().size(); ++k) {
      const mx::array& in = a.inputs()[k];
      if (in.ndim() != 0 || !in_small_buffer(in)) {
        stack.push_back(in);
        continue;
      }
      std::string key = value_key(in);
      auto it = nodes.find(key);
      if (it == nodes.end())
        it = nodes.emplace(std::move(key), mx::reshape(copy_cache().get(in), {})).first;
      // MLX evaluates a primitive from whichever of its outputs the graph reaches: each output
      // holds its own list of inputs.
      a.inputs()[k] = it->second;
      for (mx::array& s : a.siblings()) s.inputs()[k] = it->second;
      ++placed;
    }
  }
  return placed;
}

}  // namespace jaxmlx::runtime
