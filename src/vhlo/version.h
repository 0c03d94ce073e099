// The StableHLO versions this reader accepts. An artifact states its target version in the
// bytecode producer string ("StableHLO_v1.20.0"); newer ones are refused, older ones (down to
// 0.9.0, StableHLO's compatibility floor) are upgraded op by op while reading.
#pragma once

#include <array>
#include <string>

namespace jaxmlx::vhlo {

inline constexpr std::array<int, 3> kMaxStableHloVersion = {1, 20, 0};
inline constexpr std::array<int, 3> kMinStableHloVersion = {0, 9, 0};

inline std::string version_string(const std::array<int, 3>& v) {
  return std::to_string(v[0]) + "." + std::to_string(v[1]) + "." + std::to_string(v[2]);
}

}  // namespace jaxmlx::vhlo
