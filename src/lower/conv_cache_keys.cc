// The process's record of convolution keys and their input dilations (conv_cache_keys.h).
#include "lower/conv_cache_keys.h"

#include <map>
#include <mutex>

namespace jaxmlx::lower {

namespace {

using Flat = std::vector<int>;  // every field of a key, each list preceded by its length

Flat flatten(const ConvCacheKey& k) {
  Flat f{static_cast<int>(k.dtype.val()), k.groups, k.flip ? 1 : 0};
  auto add = [&f](const auto& v) {
    f.push_back(static_cast<int>(v.size()));
    f.insert(f.end(), v.begin(), v.end());
  };
  add(k.input), add(k.kernel), add(k.strides), add(k.padding_lo), add(k.padding_hi);
  add(k.kernel_dilation);
  return f;
}

}  // namespace

bool claim_conv_key(const ConvCacheKey& key, const std::vector<int>& input_dilation) {
  static std::mutex mutex;
  // Leaked: compiles may outlive exit.
  static auto* claims = new std::map<Flat, std::vector<int>>();
  std::lock_guard<std::mutex> lock(mutex);
  const auto [it, added] = claims->try_emplace(flatten(key), input_dilation);
  return added || it->second == input_dilation;
}

}  // namespace jaxmlx::lower
