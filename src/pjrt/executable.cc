// PJRT entry points of compilation and executables: Client_Compile, the executable queries jax
// makes, and LoadedExecutable_Execute with input validation and donation.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/element_types.h"
#include "pjrt/entry_points.h"
#include "pjrt/errors.h"
#include "pjrt/objects.h"
#include "pjrt/op_log.h"
#include "runtime/executable.h"
#include "runtime/graph_stats.h"
#include "vhlo/read.h"

namespace jaxmlx::pjrt {

// What the queries hand out, computed once per compiled program; shared by the loaded
// executable and every PJRT_Executable view of it.
struct ExecutableInfo {
  std::shared_ptr<runtime::Executable> exec;
  std::string compile_options;  // the serialized CompileOptionsProto we were given
  std::vector<PJRT_Buffer_Type> output_types;
  std::vector<int64_t> output_dims;
  std::vector<size_t> output_ranks;
  std::vector<const char*> output_kinds;
  std::vector<size_t> output_kind_sizes;
  std::vector<const char*> input_kinds;
  std::vector<size_t> input_kind_sizes;
  std::vector<bool> donated;  // per input: jax marked it donated (aliased to an output)
  std::vector<PJRT_NamedValue> cost;  // PJRT_Executable_GetCostAnalysis's properties
};

}  // namespace jaxmlx::pjrt

struct PJRT_Executable {
  std::shared_ptr<jaxmlx::pjrt::ExecutableInfo> info;
};

struct PJRT_LoadedExecutable {
  PJRT_Client* client = nullptr;  // valid while *client_alive
  std::shared_ptr<const std::atomic<bool>> client_alive;
  PJRT_Executable executable;
  std::atomic<bool> deleted{false};
  PJRT_LogicalDeviceIds logical_ids{0, 0};
};

namespace jaxmlx::pjrt {
namespace {

constexpr const char kDeviceKind[] = "device";
constexpr char kBytecodeMagic[] = {'M', 'L', '\xef', 'R'};

std::string shape_string(int type, const std::vector<int64_t>& dims) {
  std::string s = element_type_name(type) + "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Inputs jax donates carry tf.aliasing_output (or jax.buffer_donor) in main's arg attributes.
std::vector<bool> donated_inputs(const ir::Module& module, size_t num_inputs) {
  std::vector<bool> donated(num_inputs, false);
  const ir::Func* main = module.find_func("main");
  if (main == nullptr) return donated;
  for (size_t i = 0; i < main->arg_attrs.size() && i < num_inputs; ++i) {
    const ir::DictAttr& attrs = main->arg_attrs[i];
    donated[i] = attrs.find("tf.aliasing_output") != nullptr ||
                 attrs.find("jax.buffer_donor") != nullptr;
  }
  return donated;
}

// The properties XLA's cost analysis reports, under its names (ir/cost.h counts them).
std::vector<PJRT_NamedValue> cost_properties(const ir::Cost& cost) {
  std::vector<PJRT_NamedValue> props;
  auto add = [&](std::string_view name, double value) {
    PJRT_NamedValue v{};
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = name.data();  // string literals: process lifetime
    v.name_size = name.size();
    v.type = PJRT_NamedValue_kFloat;
    v.float_value = static_cast<float>(value);
    v.value_size = 1;
    props.push_back(v);
  };
  add("flops", cost.flops);
  add("transcendentals", cost.transcendentals);
  add("bytes accessed", cost.bytes_accessed);
  return props;
}

StatusOr<std::shared_ptr<ExecutableInfo>> make_info(std::shared_ptr<runtime::Executable> exec,
                                                    std::vector<bool> donated,
                                                    std::string compile_options) {
  auto info = std::make_shared<ExecutableInfo>();
  info->cost = cost_properties(exec->cost());
  for (const runtime::TensorSpec& out : exec->outputs()) {
    PJRT_Buffer_Type t = pjrt_type_for(out.dtype);
    if (t == PJRT_Buffer_Type_INVALID) {
      return unimplemented(std::string("program output of type ") +
                           std::string(ir::element_type_name(out.dtype)) +
                           " cannot be returned by the mlx platform");
    }
    info->output_types.push_back(t);
    info->output_ranks.push_back(out.dims.size());
    info->output_dims.insert(info->output_dims.end(), out.dims.begin(), out.dims.end());
    info->output_kinds.push_back(kDeviceKind);
    info->output_kind_sizes.push_back(sizeof(kDeviceKind) - 1);
  }
  for (size_t i = 0; i < exec->inputs().size(); ++i) {
    info->input_kinds.push_back(kDeviceKind);
    info->input_kind_sizes.push_back(sizeof(kDeviceKind) - 1);
  }
  info->donated = std::move(donated);
  info->compile_options = std::move(compile_options);
  info->exec = std::move(exec);
  return info;
}

StatusOr<std::shared_ptr<ExecutableInfo>> compile_program(PJRT_Client* client,
                                                          const PJRT_Program* program,
                                                          std::string compile_options) {
  if (program == nullptr) return invalid_argument("Compile: program is null");
  std::string_view format = program->format ? std::string_view(program->format, program->format_size)
                                             : std::string_view();
  if (format != "mlir") {
    return invalid_argument("Compile: program format '" + std::string(format) +
                            "' is not supported; the mlx platform compiles StableHLO ('mlir')");
  }
  if (program->code == nullptr && program->code_size > 0) {
    return invalid_argument("Compile: program code is null");
  }
  if (program->code_size < sizeof(kBytecodeMagic) ||
      std::memcmp(program->code, kBytecodeMagic, sizeof(kBytecodeMagic)) != 0) {
    return invalid_argument(
        "Compile: the program is not MLIR bytecode; the mlx platform reads StableHLO portable "
        "artifacts (jaxlib sends one when the plugin advertises stablehlo_current_version)");
  }
  auto bytes = std::make_shared<std::vector<uint8_t>>(
      reinterpret_cast<const uint8_t*>(program->code),
      reinterpret_cast<const uint8_t*>(program->code) + program->code_size);
  ASSIGN_OR_RETURN(ir::Module module, vhlo::read_portable_artifact(std::move(bytes)));
  log_ops_if_requested(module);
  size_t num_inputs = 0;
  if (const ir::Func* main = module.find_func("main")) num_inputs = main->arg_types.size();
  std::vector<bool> donated = donated_inputs(module, num_inputs);
  ASSIGN_OR_RETURN(auto exec, runtime::Executable::compile(client->worker, std::move(module)));
  return make_info(std::move(exec), std::move(donated), std::move(compile_options));
}

StatusOr<const ExecutableInfo*> info_of(const PJRT_Executable* e) {
  if (e == nullptr || !e->info) return invalid_argument("executable is null");
  return e->info.get();
}

StatusOr<PJRT_LoadedExecutable*> loaded(PJRT_LoadedExecutable* e) {
  if (e == nullptr) return invalid_argument("loaded executable is null");
  return e;
}

// The executable's client, unless it has been destroyed.
StatusOr<PJRT_Client*> client_of(const PJRT_LoadedExecutable* e, std::string_view what) {
  RETURN_IF_ERROR(check_client_alive(e->client_alive, what));
  return e->client;
}

// Checks one argument against the program's input spec.
Status check_argument(PJRT_Client* client, PJRT_Buffer* b, size_t i,
                      const runtime::TensorSpec& spec) {
  auto which = [i] { return "argument " + std::to_string(i); };  // for errors only
  if (b == nullptr) return invalid_argument(which() + " is null");
  // Compared by the clients' flags: a destroyed client's address may be reused by a new one.
  if (b->client_alive != client->alive) {
    RETURN_IF_ERROR(check_client_alive(b->client_alive, which()));
    return invalid_argument(which() + " belongs to another client");
  }
  if (b->buffer->is_deleted()) {
    return invalid_argument(which() + " has been deleted or donated");
  }
  int want_type = pjrt_type_for(spec.dtype);
  if (b->buffer->type() != want_type || b->buffer->dims() != spec.dims) {
    return invalid_argument(which() + " is " + shape_string(b->buffer->type(), b->buffer->dims()) +
                            " but the program expects " + shape_string(want_type, spec.dims));
  }
  return Status();
}

// A buffer passed twice cannot also be donated (the other use would read a consumed buffer):
// an error, as XLA's clients give (jax's test_double_donation expects it). Found by sorting, not
// by comparing every pair: a training step passes hundreds of donated buffers on every call.
Status check_donated_once(const std::vector<std::shared_ptr<runtime::Buffer>>& inputs,
                          const std::vector<bool>& donate) {
  if (std::find(donate.begin(), donate.end(), true) == donate.end()) return Status();
  std::vector<std::pair<const runtime::Buffer*, size_t>> order;
  order.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) order.emplace_back(inputs[i].get(), i);
  std::sort(order.begin(), order.end());
  for (size_t k = 1; k < order.size(); ++k) {
    if (order[k].first != order[k - 1].first) continue;
    const size_t a = order[k - 1].second, b = order[k].second;
    if (!donate[a] && !donate[b]) continue;
    const size_t i = donate[a] ? a : b, j = i == a ? b : a;
    return invalid_argument("Execute: argument " + std::to_string(i) +
                            " is donated and also passed as argument " + std::to_string(j) +
                            "; a donated buffer can be used only once per call");
  }
  return Status();
}

Status execute(PJRT_LoadedExecutable_Execute_Args* args) {
  ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->executable));
  if (le->deleted.load()) return failed_precondition("Execute: the executable has been deleted");
  const ExecutableInfo& info = *le->executable.info;
  ASSIGN_OR_RETURN(PJRT_Client * client, client_of(le, "Execute"));
  if (args->num_devices != 1) {
    return invalid_argument("Execute: the mlx platform runs on one device, got " +
                            std::to_string(args->num_devices));
  }
  if (args->execute_device != nullptr && args->execute_device != &client->device) {
    return invalid_argument("Execute: execute_device does not belong to this client");
  }
  const auto& specs = info.exec->inputs();
  if (args->num_args != specs.size()) {
    return invalid_argument("Execute: the program takes " + std::to_string(specs.size()) +
                            " arguments, got " + std::to_string(args->num_args));
  }
  if (specs.size() > 0 && (args->argument_lists == nullptr || args->argument_lists[0] == nullptr)) {
    return invalid_argument("Execute: argument_lists is null");
  }
  // jaxlib passes no output list for a program without outputs (e.g. one run for its effects).
  const size_t num_outputs = info.exec->outputs().size();
  if (num_outputs > 0 && (args->output_lists == nullptr || args->output_lists[0] == nullptr)) {
    return invalid_argument("Execute: output_lists is null");
  }
  std::vector<bool> donate = info.donated;
  if (const PJRT_ExecuteOptions* o = args->options) {
    if (o->struct_size >= jaxmlx_pjrt_field_end(PJRT_ExecuteOptions,
                                                num_non_donatable_input_indices)) {
      if (o->num_non_donatable_input_indices > 0 && o->non_donatable_input_indices == nullptr)
        return invalid_argument("Execute: non_donatable_input_indices is null");
      for (size_t k = 0; k < o->num_non_donatable_input_indices; ++k) {
        int64_t idx = o->non_donatable_input_indices[k];
        if (idx >= 0 && static_cast<size_t>(idx) < donate.size()) donate[idx] = false;
      }
    }
  }

  std::vector<std::shared_ptr<runtime::Buffer>> inputs;
  inputs.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    PJRT_Buffer* b = args->argument_lists[0][i];
    RETURN_IF_ERROR(check_argument(client, b, i, specs[i]));
    inputs.push_back(b->buffer);
  }
  RETURN_IF_ERROR(check_donated_once(inputs, donate));

  const auto& out_specs = info.exec->outputs();
  std::vector<std::shared_ptr<runtime::Buffer>> outputs;
  outputs.reserve(out_specs.size());
  for (size_t j = 0; j < out_specs.size(); ++j) {
    int type = info.output_types[j];
    auto storage = type == PJRT_Buffer_Type_TOKEN ? runtime::Storage{mlx::core::bool_, 1, 0}
                                                  : storage_for(type).value();
    outputs.push_back(runtime::Buffer::pending(*client->worker, type, out_specs[j].dims, storage));
  }
  runtime::Event done;
  info.exec->execute(inputs, outputs, done, donate);
  // Donated inputs are consumed; the queued run still holds their arrays.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (donate[i]) inputs[i]->mark_deleted();
  }
  for (size_t j = 0; j < outputs.size(); ++j)
    args->output_lists[0][j] = new_buffer(client, outputs[j]);
  if (args->device_complete_events != nullptr) args->device_complete_events[0] = new_event(done);
  return Status();
}

// A 9-byte xla.DeviceAssignmentProto: 1 replica, 1 computation, device 0.
constexpr char kDeviceAssignment[] = {0x08, 0x01, 0x10, 0x01, 0x1a, 0x03, 0x0a, 0x01, 0x00};

}  // namespace

PJRT_Error* Client_Compile(PJRT_Client_Compile_Args* args) {
  return guarded(args, [&]() -> Status {
    if (args->client == nullptr) return invalid_argument("Compile: client is null");
    std::string options;
    if (args->compile_options && args->compile_options_size) {
      options.assign(args->compile_options, args->compile_options_size);
    }
    ASSIGN_OR_RETURN(auto info, compile_program(args->client, args->program, std::move(options)));
    auto* le = new PJRT_LoadedExecutable;
    le->client = args->client;
    le->client_alive = args->client->alive;
    le->executable.info = std::move(info);
    args->executable = le;
    return Status();
  });
}

PJRT_Error* Executable_Destroy(PJRT_Executable_Destroy_Args* args) {
  return guarded(args, [&] { delete args->executable; });
}

PJRT_Error* Executable_Name(PJRT_Executable_Name_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->executable_name = info->exec->name().c_str();
    args->executable_name_size = info->exec->name().size();
    return Status();
  });
}

PJRT_Error* Executable_NumReplicas(PJRT_Executable_NumReplicas_Args* args) {
  return guarded(args, [&] { args->num_replicas = 1; });
}

PJRT_Error* Executable_NumPartitions(PJRT_Executable_NumPartitions_Args* args) {
  return guarded(args, [&] { args->num_partitions = 1; });
}

PJRT_Error* Executable_NumOutputs(PJRT_Executable_NumOutputs_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->num_outputs = info->output_types.size();
    return Status();
  });
}

PJRT_Error* Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  return guarded(args, [&] { args->size_in_bytes = 0; });
}

PJRT_Error* Executable_Fingerprint(PJRT_Executable_Fingerprint_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->executable_fingerprint = info->exec->fingerprint().c_str();
    args->executable_fingerprint_size = info->exec->fingerprint().size();
    return Status();
  });
}

PJRT_Error* Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->num_properties = info->cost.size();
    args->properties = info->cost.data();
    return Status();
  });
}

PJRT_Error* Executable_GetCompiledMemoryStats(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    auto bytes = [](const std::vector<runtime::TensorSpec>& specs) {
      int64_t total = 0;
      for (const auto& s : specs) {
        int64_t n = ir::element_storage_bytes(s.dtype);
        for (int64_t d : s.dims) n *= d;
        total += n;
      }
      return total;
    };
    args->generated_code_size_in_bytes = 0;
    args->argument_size_in_bytes = bytes(info->exec->inputs());
    args->output_size_in_bytes = bytes(info->exec->outputs());
    args->alias_size_in_bytes = 0;
    args->temp_size_in_bytes = 0;
    args->host_generated_code_size_in_bytes = 0;
    args->host_argument_size_in_bytes = 0;
    args->host_output_size_in_bytes = 0;
    args->host_alias_size_in_bytes = 0;
    args->host_temp_size_in_bytes = 0;
    args->peak_memory_in_bytes = args->argument_size_in_bytes + args->output_size_in_bytes;
    args->total_size_in_bytes = args->peak_memory_in_bytes;
    args->total_allocation_bytes = args->peak_memory_in_bytes;
    args->indefinite_allocations = 0;
    args->peak_unpadded_heap_bytes = 0;
    return Status();
  });
}

PJRT_Error* Executable_OutputElementTypes(PJRT_Executable_OutputElementTypes_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->output_types = const_cast<PJRT_Buffer_Type*>(info->output_types.data());
    args->num_output_types = info->output_types.size();
    return Status();
  });
}

PJRT_Error* Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->num_outputs = info->output_ranks.size();
    args->dims = info->output_dims.data();
    args->dim_sizes = info->output_ranks.data();
    return Status();
  });
}

PJRT_Error* Executable_ParameterMemoryKinds(PJRT_Executable_ParameterMemoryKinds_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->num_parameters = info->input_kinds.size();
    args->memory_kinds = info->input_kinds.data();
    args->memory_kind_sizes = info->input_kind_sizes.data();
    return Status();
  });
}

PJRT_Error* Executable_OutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    args->num_outputs = info->output_kinds.size();
    args->memory_kinds = info->output_kinds.data();
    args->memory_kind_sizes = info->output_kind_sizes.data();
    return Status();
  });
}

PJRT_Error* Executable_GetCompileOptions(PJRT_Executable_GetCompileOptions_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(const ExecutableInfo* info, info_of(args->executable));
    auto* copy = new std::string(info->compile_options);
    args->serialized_bytes = copy->data();
    args->serialized_bytes_size = copy->size();
    args->serialized_compile_options = reinterpret_cast<PJRT_SerializedCompileOptions*>(copy);
    args->serialized_compile_options_deleter = [](PJRT_SerializedCompileOptions* p) {
      delete reinterpret_cast<std::string*>(p);
    };
    return Status();
  });
}

PJRT_Error* LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  return guarded(args, [&] { delete args->executable; });
}

PJRT_Error* LoadedExecutable_GetExecutable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->loaded_executable));
    args->executable = new PJRT_Executable{le->executable.info};
    return Status();
  });
}

PJRT_Error* LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->executable));
    ASSIGN_OR_RETURN(PJRT_Client * client, client_of(le, "AddressableDevices"));
    args->addressable_devices = client->devices.data();
    args->num_addressable_devices = client->devices.size();
    return Status();
  });
}

PJRT_Error* LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->executable));
    args->addressable_device_logical_ids = &le->logical_ids;
    args->num_addressable_device_logical_ids = 1;
    return Status();
  });
}

PJRT_Error* LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  return guarded(args, [&]() -> Status {
    RETURN_IF_ERROR(loaded(args->executable).status());
    args->serialized_bytes = kDeviceAssignment;
    args->serialized_bytes_size = sizeof(kDeviceAssignment);
    args->serialized_device_assignment = nullptr;  // static storage: nothing to free
    args->serialized_device_assignment_deleter = [](PJRT_DeviceAssignmentSerialized*) {};
    return Status();
  });
}

PJRT_Error* LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->executable));
    le->deleted = true;
    return Status();
  });
}

PJRT_Error* LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->executable));
    args->is_deleted = le->deleted.load();
    return Status();
  });
}

PJRT_Error* LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args* args) {
  runtime::HostTimer timer(runtime::HostPhase::kExecute);  // JAXMLX_HOST_TIMES
  return guarded(args, [&] { return execute(args); });
}

PJRT_Error* LoadedExecutable_Fingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  return guarded(args, [&]() -> Status {
    ASSIGN_OR_RETURN(PJRT_LoadedExecutable * le, loaded(args->executable));
    const std::string& fp = le->executable.info->exec->fingerprint();
    args->executable_fingerprint = fp.c_str();
    args->executable_fingerprint_size = fp.size();
    return Status();
  });
}

}  // namespace jaxmlx::pjrt
