// EncodingReader (the format's primitives) and small value helpers.
#include <bit>
#include <cstdio>
#include <cstring>

#include "bytecode/reader.h"

namespace jaxmlx::bytecode {

EncodingReader::EncodingReader(std::span<const uint8_t> data, size_t file_offset,
                               std::string what)
    : data_(data), file_offset_(file_offset), what_(std::move(what)) {}

Status EncodingReader::error_at(size_t file_offset, std::string_view message) const {
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%zx", file_offset);
  std::string m = "bytecode: ";
  m += what_.empty() ? std::string_view("input") : std::string_view(what_);
  m += " @0x";
  m += hex;
  m += ": ";
  m += message;
  return invalid_argument(std::move(m));
}

Status EncodingReader::error(std::string_view message) const {
  return error_at(offset(), message);
}

StatusOr<uint8_t> EncodingReader::read_byte() {
  if (empty()) return error("unexpected end of data reading a byte");
  return data_[pos_++];
}

StatusOr<uint64_t> EncodingReader::read_varint() {
  if (empty()) return error("unexpected end of data reading a varint");
  uint8_t first = data_[pos_];
  if (first & 1) {
    ++pos_;
    return uint64_t{first} >> 1;
  }
  // Trailing zero bits of the first byte = number of extra bytes; 0x00 => 8 extra bytes.
  unsigned extra = first == 0 ? 8 : static_cast<unsigned>(std::countr_zero(first));
  if (remaining() < extra + 1) {
    return error("varint needs " + std::to_string(extra + 1) + " bytes, only " +
                 std::to_string(remaining()) + " left");
  }
  uint64_t value = 0;
  if (first == 0) {
    for (unsigned i = 0; i < 8; ++i) value |= uint64_t{data_[pos_ + 1 + i]} << (8 * i);
  } else {
    for (unsigned i = 0; i <= extra; ++i) value |= uint64_t{data_[pos_ + i]} << (8 * i);
    value >>= extra + 1;
  }
  pos_ += extra + 1;
  return value;
}

StatusOr<int64_t> EncodingReader::read_signed_varint() {
  ASSIGN_OR_RETURN(uint64_t v, read_varint());
  return static_cast<int64_t>((v >> 1) ^ (~(v & 1) + 1));
}

StatusOr<std::pair<uint64_t, bool>> EncodingReader::read_varint_with_flag() {
  ASSIGN_OR_RETURN(uint64_t v, read_varint());
  return std::pair<uint64_t, bool>(v >> 1, (v & 1) != 0);
}

StatusOr<uint64_t> EncodingReader::read_count(std::string_view what, size_t min_bytes_each) {
  size_t at = offset();
  ASSIGN_OR_RETURN(uint64_t n, read_varint());
  if (min_bytes_each == 0) min_bytes_each = 1;
  if (n > remaining() / min_bytes_each) {
    return error_at(at, std::string(what) + " count " + std::to_string(n) + " exceeds the " +
                            std::to_string(remaining()) + " bytes left");
  }
  return n;
}

StatusOr<std::span<const uint8_t>> EncodingReader::read_bytes(uint64_t n) {
  if (n > remaining()) {
    return error("need " + std::to_string(n) + " bytes, only " + std::to_string(remaining()) +
                 " left");
  }
  auto out = data_.subspan(pos_, static_cast<size_t>(n));
  pos_ += static_cast<size_t>(n);
  return out;
}

StatusOr<std::string_view> EncodingReader::read_cstring() {
  const uint8_t* begin = data_.data() + pos_;
  const void* nul = std::memchr(begin, 0, remaining());
  if (nul == nullptr) return error("unterminated string");
  size_t len = static_cast<size_t>(static_cast<const uint8_t*>(nul) - begin);
  pos_ += len + 1;
  return std::string_view(reinterpret_cast<const char*>(begin), len);
}

Status EncodingReader::align_to(uint64_t alignment, uint64_t max_alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return error("alignment " + std::to_string(alignment) + " is not a power of two");
  }
  if (alignment > max_alignment) {
    return error("alignment " + std::to_string(alignment) + " exceeds the limit " +
                 std::to_string(max_alignment));
  }
  while (offset() & (alignment - 1)) {
    ASSIGN_OR_RETURN(uint8_t pad, read_byte());
    if (pad != 0xCB) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "%02x", pad);
      return error_at(offset() - 1, std::string("expected alignment byte 0xcb, got 0x") + hex);
    }
  }
  return Status();
}

StatusOr<std::span<const uint8_t>> EncodingReader::read_sized_bytes() {
  ASSIGN_OR_RETURN(uint64_t n, read_varint());
  return read_bytes(n);
}

Status EncodingReader::skip(uint64_t n) {
  ASSIGN_OR_RETURN(auto ignored, read_bytes(n));
  (void)ignored;
  return Status();
}

int64_t ApInt::as_signed() const {
  uint64_t v = low();
  if (width == 0) return 0;
  if (width >= 64) return static_cast<int64_t>(v);
  uint64_t sign = uint64_t{1} << (width - 1);
  v &= (sign << 1) - 1;
  return static_cast<int64_t>((v ^ sign) - sign);
}

bool dense_i1_is_packed(std::span<const uint8_t> blob, uint64_t num_elements) {
  if (blob.size() == 1 && blob[0] == 0xFF) return false;  // splat true
  return blob.size() == (num_elements + 7) / 8 && blob.size() != num_elements;
}

namespace {
struct FloatInfo {
  FloatKind kind;
  std::string_view name;
  uint32_t bits;
};
constexpr FloatInfo kFloats[] = {
    {FloatKind::kBF16, "bf16", 16},
    {FloatKind::kF16, "f16", 16},
    {FloatKind::kF32, "f32", 32},
    {FloatKind::kF64, "f64", 64},
    {FloatKind::kF80, "f80", 80},
    {FloatKind::kF128, "f128", 128},
    {FloatKind::kTF32, "tf32", 19},
    {FloatKind::kF8E5M2, "f8E5M2", 8},
    {FloatKind::kF8E4M3, "f8E4M3", 8},
    {FloatKind::kF8E4M3FN, "f8E4M3FN", 8},
    {FloatKind::kF8E5M2FNUZ, "f8E5M2FNUZ", 8},
    {FloatKind::kF8E4M3FNUZ, "f8E4M3FNUZ", 8},
    {FloatKind::kF8E4M3B11FNUZ, "f8E4M3B11FNUZ", 8},
    {FloatKind::kF8E3M4, "f8E3M4", 8},
    {FloatKind::kF8E8M0FNU, "f8E8M0FNU", 8},
    {FloatKind::kF4E2M1FN, "f4E2M1FN", 4},
    {FloatKind::kF6E2M3FN, "f6E2M3FN", 6},
    {FloatKind::kF6E3M2FN, "f6E3M2FN", 6},
};
}  // namespace

uint32_t float_bit_width(FloatKind kind) {
  for (const auto& f : kFloats)
    if (f.kind == kind) return f.bits;
  return 0;
}

std::string_view float_kind_name(FloatKind kind) {
  for (const auto& f : kFloats)
    if (f.kind == kind) return f.name;
  return "?";
}

std::optional<FloatKind> float_kind_from_name(std::string_view name) {
  for (const auto& f : kFloats)
    if (f.name == name) return f.kind;
  return std::nullopt;
}

}  // namespace jaxmlx::bytecode
