// jaxmlx-dump FILE [--json] [--locations] [--no-verify] [--passes=cpu|gpu]
// Reads a StableHLO portable artifact with our reader and prints our IR as MLIR-like text, or as
// the normalized JSON that tests/reader/compare.py compares with jaxlib's reading. --passes: after
// the rewrites a compile for that device makes (passes/pipeline.h; JAXMLX_RECOGNIZE and
// JAXMLX_FAST_KERNELS apply as they do there).
// Exit status: 0 ok, 1 read/verify error (message on stderr, e.g. "INVALID_ARGUMENT: ..."), 2 usage.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "ir/json.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pipeline.h"
#include "vhlo/read.h"

constexpr char kUsage[] =
    "usage: jaxmlx-dump FILE [--json] [--locations] [--no-verify] [--passes=cpu|gpu]\n";

int main(int argc, char** argv) {
  std::string path;
  bool json = false, locations = false, verify = true, passes = false, gpu = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--json") json = true;
    else if (a == "--locations") locations = true;
    else if (a == "--no-verify") verify = false;
    else if (a == "--passes=cpu" || a == "--passes=gpu") passes = true, gpu = a.back() == 'u';
    else if (!a.empty() && a[0] != '-' && path.empty()) path = a;
    else {
      std::fputs(kUsage, stderr);
      return 2;
    }
  }
  if (path.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "NOT_FOUND: cannot open %s\n", path.c_str());
    return 1;
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(std::istreambuf_iterator<char>(in),
                                                      std::istreambuf_iterator<char>());
  auto module = jaxmlx::vhlo::read_portable_artifact(bytes);
  if (!module.ok()) {
    std::fprintf(stderr, "%s\n", module.status().to_string().c_str());
    return 1;
  }
  if (verify) {
    jaxmlx::Status st = jaxmlx::ir::verify(*module);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
  }
  if (passes) {
    jaxmlx::Status st = jaxmlx::passes::prepare_for_lowering(*module, gpu);
    if (st.ok()) st = jaxmlx::ir::verify(*module);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.to_string().c_str());
      return 1;
    }
  }
  if (json) {
    std::cout << jaxmlx::ir::to_json(*module) << "\n";
  } else {
    jaxmlx::ir::PrintOptions opts;
    opts.locations = locations;
    std::cout << jaxmlx::ir::print_module(*module, opts);
  }
  return 0;
}
