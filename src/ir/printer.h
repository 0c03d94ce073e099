// MLIR-like text for our IR, for dumps, tests and error messages. Not meant to be parsed back.
//
//   func.func public @main(%0: tensor<4xf32>) -> (tensor<4xf32>) {
//     %1 = stablehlo.add(%0, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
//     func.return(%1) : (tensor<4xf32>) -> ()
//   }
#pragma once

#include <string>

#include "ir/module.h"

namespace jaxmlx::ir {

struct PrintOptions {
  bool locations = false;  // append "loc(...)" to ops
  int indent = 2;
};

std::string print_module(const Module& m, const PrintOptions& opts = {});
std::string print_func(const Func& f, const PrintOptions& opts = {});
// One op with its regions; `depth` is the starting indentation level.
std::string print_op(const Op& op, const PrintOptions& opts = {}, int depth = 0);
// One line naming an op for errors: "stablehlo.fft (fft_type=IRFFT) at jit(f)/irfft f.py:4:2".
std::string describe_op(const Op& op);

}  // namespace jaxmlx::ir
