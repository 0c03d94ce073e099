// The plugin's PJRT surface driven through GetPjrtApi, as jaxlib drives it.
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "base/fault_injection.h"
#include "gtest/gtest.h"
#include "pjrt/abi.h"
#include "pjrt/errors.h"

extern "C" const PJRT_Api* GetPjrtApi();

namespace jaxmlx::pjrt {
namespace {

template <typename Args>
Args make_args() {
  Args a;
  std::memset(&a, 0xAB, sizeof(a));  // callers do not zero argument structs
  a.struct_size = sizeof(Args);
  a.extension_start = nullptr;
  return a;
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = GetPjrtApi();
    client_ = new_client();
    ASSERT_NE(client_, nullptr);
    device_ = device_of(client_);
  }
  void TearDown() override { destroy_client(client_); }

  PJRT_Client* new_client() {
    auto args = make_args<PJRT_Client_Create_Args>();
    args.create_options = nullptr;
    args.num_options = 0;
    args.kv_get_callback = nullptr;
    args.kv_put_callback = nullptr;
    args.kv_try_get_callback = nullptr;
    EXPECT_EQ(api_->PJRT_Client_Create(&args), nullptr);
    return args.client;
  }

  PJRT_Device* device_of(PJRT_Client* client) {
    auto dargs = make_args<PJRT_Client_Devices_Args>();
    dargs.client = client;
    EXPECT_EQ(api_->PJRT_Client_Devices(&dargs), nullptr);
    EXPECT_EQ(dargs.num_devices, 1u);
    return dargs.num_devices == 1 ? dargs.devices[0] : nullptr;
  }

  void destroy_client(PJRT_Client* client) {
    auto args = make_args<PJRT_Client_Destroy_Args>();
    args.client = client;
    EXPECT_EQ(api_->PJRT_Client_Destroy(&args), nullptr);
  }

  // Returns the error's message and code, destroying it.
  std::pair<Code, std::string> consume(PJRT_Error* e) {
    Status st = take_status(e);
    return {st.code(), st.message()};
  }

  PJRT_Buffer* put(const void* data, PJRT_Buffer_Type type, std::vector<int64_t> dims,
                   std::vector<int64_t> strides = {}, PJRT_Error** error = nullptr,
                   PJRT_Client* client = nullptr) {
    auto args = make_args<PJRT_Client_BufferFromHostBuffer_Args>();
    args.client = client ? client : client_;
    args.data = data;
    args.type = type;
    args.dims = dims.data();
    args.num_dims = dims.size();
    args.byte_strides = strides.empty() ? nullptr : strides.data();
    args.num_byte_strides = strides.size();
    args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
    args.device = client ? nullptr : device_;
    args.memory = nullptr;
    args.device_layout = nullptr;
    PJRT_Error* e = api_->PJRT_Client_BufferFromHostBuffer(&args);
    if (error) *error = e;
    if (e) return nullptr;
    EXPECT_TRUE(await_and_destroy(args.done_with_host_buffer).ok());
    return args.buffer;
  }

  Status await_and_destroy(PJRT_Event* event) {
    auto a = make_args<PJRT_Event_Await_Args>();
    a.event = event;
    Status st = take_status(api_->PJRT_Event_Await(&a));
    auto d = make_args<PJRT_Event_Destroy_Args>();
    d.event = event;
    EXPECT_EQ(api_->PJRT_Event_Destroy(&d), nullptr);
    return st;
  }

  Status get(PJRT_Buffer* b, void* dst, size_t size) {
    auto args = make_args<PJRT_Buffer_ToHostBuffer_Args>();
    args.src = b;
    args.host_layout = nullptr;
    args.dst = dst;
    args.dst_size = size;
    PJRT_Error* e = api_->PJRT_Buffer_ToHostBuffer(&args);
    if (e) return take_status(e);
    return await_and_destroy(args.event);
  }

  void destroy(PJRT_Buffer* b) {
    auto args = make_args<PJRT_Buffer_Destroy_Args>();
    args.buffer = b;
    EXPECT_EQ(api_->PJRT_Buffer_Destroy(&args), nullptr);
  }

  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  PJRT_Device* device_ = nullptr;
};

TEST_F(ClientTest, PlatformNameAndDeviceKind) {
  auto args = make_args<PJRT_Client_PlatformName_Args>();
  args.client = client_;
  ASSERT_EQ(api_->PJRT_Client_PlatformName(&args), nullptr);
  std::string name(args.platform_name, args.platform_name_size);
#if defined(__APPLE__)
  EXPECT_EQ(name, "metal");
#else
  EXPECT_EQ(name, "mlx");
#endif
  auto g = make_args<PJRT_Device_GetDescription_Args>();
  g.device = device_;
  ASSERT_EQ(api_->PJRT_Device_GetDescription(&g), nullptr);
  auto k = make_args<PJRT_DeviceDescription_Kind_Args>();
  k.device_description = g.device_description;
  ASSERT_EQ(api_->PJRT_DeviceDescription_Kind(&k), nullptr);
  EXPECT_NE(std::string(k.device_kind, k.device_kind_size).find("MLX"), std::string::npos);
}

TEST_F(ClientTest, PluginAttributesAdvertiseStableHloVersion) {
  auto args = make_args<PJRT_Plugin_Attributes_Args>();
  ASSERT_EQ(api_->PJRT_Plugin_Attributes(&args), nullptr);
  bool found = false;
  for (size_t i = 0; i < args.num_attributes; ++i) {
    const PJRT_NamedValue& v = args.attributes[i];
    if (std::string(v.name, v.name_size) != "stablehlo_current_version") continue;
    found = true;
    ASSERT_EQ(v.type, PJRT_NamedValue_kInt64List);
    ASSERT_EQ(v.value_size, 3u);
    EXPECT_EQ(v.int64_array_value[0], 1);
    EXPECT_EQ(v.int64_array_value[1], 20);
    EXPECT_EQ(v.int64_array_value[2], 0);
  }
  EXPECT_TRUE(found);
}

TEST_F(ClientTest, OneDeviceMemoryWithUserData) {
  auto args = make_args<PJRT_Device_DefaultMemory_Args>();
  args.device = device_;
  ASSERT_EQ(api_->PJRT_Device_DefaultMemory(&args), nullptr);
  PJRT_Memory* m = args.memory;
  auto k = make_args<PJRT_Memory_Kind_Args>();
  k.memory = m;
  ASSERT_EQ(api_->PJRT_Memory_Kind(&k), nullptr);
  EXPECT_EQ(std::string(k.kind, k.kind_size), "device");
  // jaxlib's per-memory storage goes through the function-table prefix.
  static int key;
  static int destroyed = 0;
  int* value = new int(7);
  m->vtable->set_user_data(m, &key, value, [](void* p) {
    delete static_cast<int*>(p);
    ++destroyed;
  });
  EXPECT_EQ(m->vtable->get_user_data(m, &key), value);
  m->vtable->set_user_data(m, &key, nullptr, nullptr);
  EXPECT_EQ(destroyed, 1);
}

TEST_F(ClientTest, RoundTripWithStridesAndQueries) {
  std::vector<int32_t> host = {0, 1, 2, 3, 4, 5};
  // Transposed view of a 3x2 array: dims (2,3), strides (4, 8).
  PJRT_Buffer* b = put(host.data(), PJRT_Buffer_Type_S32, {2, 3}, {4, 8});
  ASSERT_NE(b, nullptr);
  auto dims = make_args<PJRT_Buffer_Dimensions_Args>();
  dims.buffer = b;
  ASSERT_EQ(api_->PJRT_Buffer_Dimensions(&dims), nullptr);
  ASSERT_EQ(dims.num_dims, 2u);
  EXPECT_EQ(dims.dims[0], 2);
  EXPECT_EQ(dims.dims[1], 3);
  auto size = make_args<PJRT_Buffer_ToHostBuffer_Args>();
  size.src = b;
  size.host_layout = nullptr;
  size.dst = nullptr;
  ASSERT_EQ(api_->PJRT_Buffer_ToHostBuffer(&size), nullptr);
  EXPECT_EQ(size.dst_size, 24u);
  std::vector<int32_t> out(6, -1);
  ASSERT_TRUE(get(b, out.data(), 24).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{0, 2, 4, 1, 3, 5}));
  destroy(b);
}

TEST_F(ClientTest, ReadyEventOnReadyCallbackFires) {
  float x = 3.f;
  PJRT_Buffer* b = put(&x, PJRT_Buffer_Type_F32, {});
  ASSERT_NE(b, nullptr);
  auto r = make_args<PJRT_Buffer_ReadyEvent_Args>();
  r.buffer = b;
  ASSERT_EQ(api_->PJRT_Buffer_ReadyEvent(&r), nullptr);
  struct Seen {
    bool called = false;
    bool error = true;
  } seen;
  auto on = make_args<PJRT_Event_OnReady_Args>();
  on.event = r.event;
  on.callback = [](PJRT_Error* error, void* user) {
    auto* s = static_cast<Seen*>(user);
    s->called = true;
    s->error = error != nullptr;
    if (error) (void)take_status(error);
  };
  on.user_arg = &seen;
  ASSERT_EQ(api_->PJRT_Event_OnReady(&on), nullptr);
  ASSERT_TRUE(await_and_destroy(r.event).ok());
  EXPECT_TRUE(seen.called);
  EXPECT_FALSE(seen.error);
  destroy(b);
}

TEST_F(ClientTest, CopyToDeviceSharesContents) {
  std::vector<uint8_t> host = {1, 2, 3};
  PJRT_Buffer* b = put(host.data(), PJRT_Buffer_Type_U8, {3});
  auto c = make_args<PJRT_Buffer_CopyToDevice_Args>();
  c.buffer = b;
  c.dst_device = device_;
  ASSERT_EQ(api_->PJRT_Buffer_CopyToDevice(&c), nullptr);
  destroy(b);  // the copy outlives its source
  std::vector<uint8_t> out(3);
  ASSERT_TRUE(get(c.dst_buffer, out.data(), 3).ok());
  EXPECT_EQ(out, host);
  destroy(c.dst_buffer);
}

TEST_F(ClientTest, BadArgumentsAreErrorsNotCrashes) {
  float x = 1.f;
  PJRT_Error* e = nullptr;
  EXPECT_EQ(put(&x, static_cast<PJRT_Buffer_Type>(99), {}, {}, &e), nullptr);
  auto [code, msg] = consume(e);
  EXPECT_EQ(code, Code::kInvalidArgument);
  EXPECT_NE(msg.find("type code 99"), std::string::npos) << msg;

  EXPECT_EQ(put(&x, PJRT_Buffer_Type_TOKEN, {}, {}, &e), nullptr);
  EXPECT_EQ(consume(e).first, Code::kInvalidArgument);

  EXPECT_EQ(put(&x, PJRT_Buffer_Type_F32, {-1}, {}, &e), nullptr);
  EXPECT_NE(consume(e).second.find("negative"), std::string::npos);

  EXPECT_EQ(put(nullptr, PJRT_Buffer_Type_F32, {4}, {}, &e), nullptr);
  EXPECT_NE(consume(e).second.find("null"), std::string::npos);

  EXPECT_EQ(put(&x, PJRT_Buffer_Type_F32, {1, 1}, {4}, &e), nullptr);
  EXPECT_NE(consume(e).second.find("rank"), std::string::npos);

  // Null args struct and too-small struct_size.
  EXPECT_EQ(consume(api_->PJRT_Buffer_Delete(nullptr)).first, Code::kInvalidArgument);
  auto small = make_args<PJRT_Buffer_Delete_Args>();
  small.struct_size = 8;
  auto [c2, m2] = consume(api_->PJRT_Buffer_Delete(&small));
  EXPECT_EQ(c2, Code::kInvalidArgument);
  EXPECT_NE(m2.find("struct_size"), std::string::npos);

  auto del = make_args<PJRT_Buffer_Delete_Args>();
  del.buffer = nullptr;
  EXPECT_EQ(consume(api_->PJRT_Buffer_Delete(&del)).first, Code::kInvalidArgument);
}

TEST_F(ClientTest, UseAfterDeleteIsAnError) {
  float x = 1.f;
  PJRT_Buffer* b = put(&x, PJRT_Buffer_Type_F32, {});
  auto del = make_args<PJRT_Buffer_Delete_Args>();
  del.buffer = b;
  ASSERT_EQ(api_->PJRT_Buffer_Delete(&del), nullptr);
  auto is = make_args<PJRT_Buffer_IsDeleted_Args>();
  is.buffer = b;
  ASSERT_EQ(api_->PJRT_Buffer_IsDeleted(&is), nullptr);
  EXPECT_TRUE(is.is_deleted);
  float out;
  Status st = get(b, &out, 4);
  EXPECT_EQ(st.code(), Code::kFailedPrecondition);
  EXPECT_NE(st.message().find("deleted"), std::string::npos);
  auto c = make_args<PJRT_Buffer_CopyToDevice_Args>();
  c.buffer = b;
  c.dst_device = device_;
  EXPECT_EQ(consume(api_->PJRT_Buffer_CopyToDevice(&c)).first, Code::kFailedPrecondition);
  destroy(b);
}

TEST_F(ClientTest, UnimplementedSlotNamesItself) {
  auto args = make_args<PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args>();
  args.buffer = nullptr;
  auto [code, msg] = consume(api_->PJRT_Buffer_OpaqueDeviceMemoryDataPointer(&args));
  EXPECT_EQ(code, Code::kUnimplemented);
  EXPECT_NE(msg.find("PJRT_Buffer_OpaqueDeviceMemoryDataPointer"), std::string::npos);
}

// Compiles `code` in `format`; returns the error (null on success, destroying the executable).
PJRT_Error* compile(const PJRT_Api* api, PJRT_Client* client, std::string code,
                    std::string format) {
  PJRT_Program program;
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.extension_start = nullptr;
  program.code = code.data();
  program.code_size = code.size();
  program.format = format.c_str();
  program.format_size = format.size();
  auto args = make_args<PJRT_Client_Compile_Args>();
  args.client = client;
  args.program = &program;
  args.compile_options = nullptr;
  args.compile_options_size = 0;
  PJRT_Error* e = api->PJRT_Client_Compile(&args);
  if (!e) {
    auto d = make_args<PJRT_LoadedExecutable_Destroy_Args>();
    d.executable = args.executable;
    EXPECT_EQ(api->PJRT_LoadedExecutable_Destroy(&d), nullptr);
  }
  return e;
}

TEST_F(ClientTest, CompileRejectsBadProgramsWithClearErrors) {
  auto [c1, m1] = consume(compile(api_, client_, "module {}", "mlir"));
  EXPECT_EQ(c1, Code::kInvalidArgument);
  EXPECT_NE(m1.find("not MLIR bytecode"), std::string::npos) << m1;
  auto [c2, m2] = consume(compile(api_, client_, "HloModule m", "hlo"));
  EXPECT_EQ(c2, Code::kInvalidArgument);
  EXPECT_NE(m2.find("'hlo'"), std::string::npos) << m2;
  // A truncated artifact: the magic, then garbage.
  auto [c3, m3] = consume(compile(api_, client_, std::string("ML\xefR\x06\xff", 6), "mlir"));
  EXPECT_NE(c3, Code::kOk);
  EXPECT_FALSE(m3.empty());
}

TEST_F(ClientTest, HostLayoutsReachingOutsideTheDestinationAreRefused) {
  std::vector<int32_t> host = {0, 1, 2, 3, 4, 5};
  PJRT_Buffer* b = put(host.data(), PJRT_Buffer_Type_S32, {2, 3});
  auto read = [&](std::vector<int64_t> strides, size_t dst_size, int64_t* null_strides = nullptr) {
    std::vector<int32_t> out(64, -1);
    PJRT_Buffer_MemoryLayout layout{};
    layout.struct_size = sizeof(layout);
    layout.type = PJRT_Buffer_MemoryLayout_Type_Strides;
    layout.strides.struct_size = sizeof(layout.strides);
    layout.strides.byte_strides = null_strides ? nullptr : strides.data();
    layout.strides.num_byte_strides = strides.size();
    auto args = make_args<PJRT_Buffer_ToHostBuffer_Args>();
    args.src = b;
    args.host_layout = &layout;
    args.dst = out.data() + 8;  // room before and after: a bad layout must not touch it
    args.dst_size = dst_size;
    PJRT_Error* e = api_->PJRT_Buffer_ToHostBuffer(&args);
    Status st = e ? take_status(e) : await_and_destroy(args.event);
    for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], -1) << "wrote before the destination";
    return std::make_pair(st, out);
  };
  // Column-major into exactly 24 bytes works.
  auto [ok, out] = read({4, 8}, 24);
  ASSERT_TRUE(ok.ok()) << ok.to_string();
  EXPECT_EQ(std::vector<int32_t>(out.begin() + 8, out.begin() + 14),
            (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
  for (auto [strides, size] : std::vector<std::pair<std::vector<int64_t>, size_t>>{
           {{12, 4}, 20},          // one element past the end
           {{4, 1000}, 24},        // far past the end
           {{-12, 4}, 24},         // before the start
           {{int64_t{1} << 62, 4}, 24}}) {  // overflowing
    Status st = read(strides, size).first;
    EXPECT_EQ(st.code(), Code::kInvalidArgument) << st.to_string();
  }
  int64_t dummy = 0;
  EXPECT_EQ(read({4, 8}, 24, &dummy).first.code(), Code::kInvalidArgument);
  destroy(b);
}

TEST_F(ClientTest, CompileWithANullFormatIsAnError) {
  PJRT_Program program;
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.extension_start = nullptr;
  program.code = const_cast<char*>("ML\xefR");
  program.code_size = 4;
  program.format = nullptr;
  program.format_size = 1 << 20;  // must not be read through a null pointer
  auto args = make_args<PJRT_Client_Compile_Args>();
  args.client = client_;
  args.program = &program;
  args.compile_options = nullptr;
  args.compile_options_size = 0;
  auto [code, msg] = consume(api_->PJRT_Client_Compile(&args));
  EXPECT_EQ(code, Code::kInvalidArgument) << msg;
  args.program = nullptr;
  EXPECT_EQ(consume(api_->PJRT_Client_Compile(&args)).first, Code::kInvalidArgument);
  args.client = nullptr;
  EXPECT_EQ(consume(api_->PJRT_Client_Compile(&args)).first, Code::kInvalidArgument);
}

// ---- a 1 TB request, sizes that overflow --------------------------------------------------------

TEST_F(ClientTest, OneTerabyteTransferIsRefusedBeforeAnythingIsRead) {
  float x = 1.f;  // far smaller than the claimed array: it must never be read
  PJRT_Error* e = nullptr;
  EXPECT_EQ(put(&x, PJRT_Buffer_Type_F32, {int64_t{1} << 20, int64_t{1} << 18}, {}, &e), nullptr);
  auto [code, msg] = consume(e);
  EXPECT_EQ(code, Code::kResourceExhausted) << msg;
  EXPECT_NE(msg.find("requested 1.00 TiB"), std::string::npos) << msg;
  EXPECT_NE(msg.find("limit"), std::string::npos) << msg;
  // The client still works.
  PJRT_Buffer* b = put(&x, PJRT_Buffer_Type_F32, {});
  float out = 0;
  EXPECT_TRUE(get(b, &out, 4).ok());
  EXPECT_EQ(out, 1.f);
  destroy(b);
}

TEST_F(ClientTest, SizesThatOverflowAreRefused) {
  float x = 1.f;
  PJRT_Error* e = nullptr;
  const int64_t big = (int64_t{1} << 31) - 1;  // each dimension is valid for MLX on its own
  EXPECT_EQ(put(&x, PJRT_Buffer_Type_F32, {big, big, big}, {}, &e), nullptr);
  auto [code, msg] = consume(e);
  EXPECT_EQ(code, Code::kInvalidArgument) << msg;
  EXPECT_NE(msg.find("too large"), std::string::npos) << msg;
}

// ---- executions through the C ABI: bad input, faults, other and destroyed clients --------------

// Runs the testdata program mlp (jit_f: f32[4,8], f32[8,16] -> f32[], f32[4,16]); its first output
// is sum(tanh(x @ w)^2).
class ExecuteTest : public ClientTest {
 protected:
  struct Run {
    Status call;  // what Execute itself returned
    std::vector<PJRT_Buffer*> outputs;
    PJRT_Event* done = nullptr;
  };

  void SetUp() override {
    ClientTest::SetUp();
    const char* dir = std::getenv("JAXMLX_TESTDATA");
    if (dir == nullptr) GTEST_SKIP() << "JAXMLX_TESTDATA is not set";
    std::ifstream in(std::string(dir) + "/jax-0.11.2/mlp_current.mlirbc", std::ios::binary);
    if (!in) GTEST_SKIP() << "mlp_current.mlirbc missing";
    program_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    exe_ = load(client_);
    ASSERT_NE(exe_, nullptr);
    for (int i = 0; i < 32; ++i) x_.push_back(std::sin(0.3f * i));
    for (int i = 0; i < 128; ++i) w_.push_back(std::cos(0.17f * i) * 0.5f);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 16; ++c) {
        double acc = 0;
        for (int k = 0; k < 8; ++k) acc += double(x_[r * 8 + k]) * w_[k * 16 + c];
        expected_ += std::tanh(acc) * std::tanh(acc);
      }
  }

  void TearDown() override {
    EXPECT_TRUE(fault::install("").ok());
    if (exe_ != nullptr) destroy_exe(exe_);
    ClientTest::TearDown();
  }

  PJRT_LoadedExecutable* load(PJRT_Client* client) {
    PJRT_Program program;
    program.struct_size = PJRT_Program_STRUCT_SIZE;
    program.extension_start = nullptr;
    program.code = program_.data();
    program.code_size = program_.size();
    program.format = "mlir";
    program.format_size = 4;
    auto args = make_args<PJRT_Client_Compile_Args>();
    args.client = client;
    args.program = &program;
    args.compile_options = nullptr;
    args.compile_options_size = 0;
    Status st = take_status(api_->PJRT_Client_Compile(&args));
    EXPECT_TRUE(st.ok()) << st.to_string();
    return st.ok() ? args.executable : nullptr;
  }

  void destroy_exe(PJRT_LoadedExecutable* e) {
    auto d = make_args<PJRT_LoadedExecutable_Destroy_Args>();
    d.executable = e;
    EXPECT_EQ(api_->PJRT_LoadedExecutable_Destroy(&d), nullptr);
  }

  Run execute(PJRT_LoadedExecutable* e, std::vector<PJRT_Buffer*> in,
              PJRT_ExecuteOptions* options = nullptr, size_t num_devices = 1,
              bool null_arguments = false) {
    Run run;
    run.outputs.assign(2, nullptr);
    PJRT_Buffer* const* arg_list = in.data();
    PJRT_Buffer** out_list = run.outputs.data();
    auto args = make_args<PJRT_LoadedExecutable_Execute_Args>();
    args.executable = e;
    args.options = options;
    args.argument_lists = null_arguments ? nullptr : &arg_list;
    args.num_devices = num_devices;
    args.num_args = in.size();
    args.output_lists = &out_list;
    args.device_complete_events = &run.done;
    args.execute_device = nullptr;
    run.call = take_status(api_->PJRT_LoadedExecutable_Execute(&args));
    if (!run.call.ok()) {
      run.outputs.clear();
      run.done = nullptr;
    }
    return run;
  }

  // Awaits the run; returns its status and the first output's value (NaN if it failed).
  std::pair<Status, float> finish(Run& run) {
    EXPECT_TRUE(run.call.ok()) << run.call.to_string();
    if (!run.call.ok()) return {run.call, NAN};
    Status st = await_and_destroy(run.done);
    float sum = NAN;
    Status read = get(run.outputs[0], &sum, 4);
    std::vector<float> softmax(64);
    Status read1 = get(run.outputs[1], softmax.data(), softmax.size() * 4);
    // Every output carries the run's error, never garbage.
    EXPECT_EQ(read.code(), st.code()) << read.to_string();
    EXPECT_EQ(read1.code(), st.code()) << read1.to_string();
    for (PJRT_Buffer* b : run.outputs) destroy(b);
    return {st, read.ok() ? sum : NAN};
  }

  std::pair<PJRT_Buffer*, PJRT_Buffer*> inputs(PJRT_Client* client = nullptr) {
    return {put(x_.data(), PJRT_Buffer_Type_F32, {4, 8}, {}, nullptr, client),
            put(w_.data(), PJRT_Buffer_Type_F32, {8, 16}, {}, nullptr, client)};
  }

  void expect_good_run(PJRT_LoadedExecutable* e, PJRT_Buffer* x, PJRT_Buffer* w) {
    Run run = execute(e, {x, w});
    auto [st, sum] = finish(run);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_NEAR(sum, expected_, 1e-4);
  }

  std::string program_;
  PJRT_LoadedExecutable* exe_ = nullptr;
  std::vector<float> x_, w_;
  double expected_ = 0;
};

TEST_F(ExecuteTest, WrongArgumentsAreClearErrors) {
  auto [x, w] = inputs();
  std::vector<int32_t> ints(32, 1);
  PJRT_Buffer* wrong_type = put(ints.data(), PJRT_Buffer_Type_S32, {4, 8});
  PJRT_Buffer* wrong_shape = put(x_.data(), PJRT_Buffer_Type_F32, {8, 4});
  auto expect = [&](Run run, Code code, const std::string& text) {
    EXPECT_EQ(run.call.code(), code) << run.call.to_string();
    EXPECT_NE(run.call.message().find(text), std::string::npos) << run.call.message();
  };
  expect(execute(exe_, {x}), Code::kInvalidArgument, "takes 2 arguments, got 1");
  expect(execute(exe_, {x, w, x}), Code::kInvalidArgument, "takes 2 arguments, got 3");
  expect(execute(exe_, {wrong_type, w}), Code::kInvalidArgument,
         "argument 0 is s32[4,8] but the program expects f32[4,8]");
  expect(execute(exe_, {x, wrong_shape}), Code::kInvalidArgument,
         "argument 1 is f32[8,4] but the program expects f32[8,16]");
  expect(execute(exe_, {x, nullptr}), Code::kInvalidArgument, "argument 1 is null");
  expect(execute(exe_, {x, w}, nullptr, 2), Code::kInvalidArgument, "one device, got 2");
  expect(execute(exe_, {x, w}, nullptr, 1, /*null_arguments=*/true), Code::kInvalidArgument,
         "argument_lists is null");
  PJRT_ExecuteOptions options{};
  options.struct_size = sizeof(options);
  options.num_non_donatable_input_indices = 1;
  options.non_donatable_input_indices = nullptr;
  expect(execute(exe_, {x, w}, &options), Code::kInvalidArgument, "non_donatable_input_indices");
  expect(execute(nullptr, {x, w}), Code::kInvalidArgument, "null");
  // Nothing above ran or consumed its inputs: a good run still works.
  expect_good_run(exe_, x, w);
  for (PJRT_Buffer* b : {x, w, wrong_type, wrong_shape}) destroy(b);
}

TEST_F(ExecuteTest, DeletedInputsAndExecutablesAreErrors) {
  auto [x, w] = inputs();
  auto del = make_args<PJRT_Buffer_Delete_Args>();
  del.buffer = w;
  ASSERT_EQ(api_->PJRT_Buffer_Delete(&del), nullptr);
  Run run = execute(exe_, {x, w});
  EXPECT_EQ(run.call.code(), Code::kInvalidArgument);
  EXPECT_NE(run.call.message().find("argument 1 has been deleted or donated"), std::string::npos)
      << run.call.message();
  // Deleting an input right after Execute returned is fine: the queued run holds its array.
  PJRT_Buffer* w2 = put(w_.data(), PJRT_Buffer_Type_F32, {8, 16});
  Run queued = execute(exe_, {x, w2});
  del.buffer = w2;
  ASSERT_EQ(api_->PJRT_Buffer_Delete(&del), nullptr);
  auto [st, sum] = finish(queued);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_NEAR(sum, expected_, 1e-4);

  auto d = make_args<PJRT_LoadedExecutable_Delete_Args>();
  d.executable = exe_;
  ASSERT_EQ(api_->PJRT_LoadedExecutable_Delete(&d), nullptr);
  PJRT_Buffer* w3 = put(w_.data(), PJRT_Buffer_Type_F32, {8, 16});
  Run gone = execute(exe_, {x, w3});
  EXPECT_EQ(gone.call.code(), Code::kFailedPrecondition) << gone.call.to_string();
  for (PJRT_Buffer* b : {x, w, w2, w3}) destroy(b);
}

TEST_F(ExecuteTest, InputOfAnotherClientIsAnError) {
  PJRT_Client* other = new_client();
  ASSERT_NE(other, nullptr);
  auto [x, w] = inputs();
  auto [ox, ow] = inputs(other);
  Run run = execute(exe_, {x, ow});
  EXPECT_EQ(run.call.code(), Code::kInvalidArgument);
  EXPECT_NE(run.call.message().find("argument 1 belongs to another client"), std::string::npos)
      << run.call.message();
  // Both clients alive at once share the one MLX thread and both work.
  PJRT_LoadedExecutable* other_exe = load(other);
  expect_good_run(other_exe, ox, ow);
  expect_good_run(exe_, x, w);
  destroy_exe(other_exe);
  for (PJRT_Buffer* b : {x, w, ox, ow}) destroy(b);
  destroy_client(other);
}

TEST_F(ExecuteTest, CallsThroughADestroyedClientAreErrors) {
  PJRT_Client* other = new_client();
  ASSERT_NE(other, nullptr);
  PJRT_LoadedExecutable* other_exe = load(other);
  auto [ox, ow] = inputs(other);
  expect_good_run(other_exe, ox, ow);
  destroy_client(other);

  Run run = execute(other_exe, {ox, ow});
  EXPECT_EQ(run.call.code(), Code::kFailedPrecondition) << run.call.to_string();
  EXPECT_NE(run.call.message().find("destroyed"), std::string::npos) << run.call.message();
  auto [x, w] = inputs();
  Run mixed = execute(exe_, {x, ow});
  EXPECT_EQ(mixed.call.code(), Code::kFailedPrecondition) << mixed.call.to_string();
  EXPECT_NE(mixed.call.message().find("argument 1"), std::string::npos) << mixed.call.message();

  auto dev = make_args<PJRT_Buffer_Device_Args>();
  dev.buffer = ox;
  EXPECT_EQ(consume(api_->PJRT_Buffer_Device(&dev)).first, Code::kFailedPrecondition);
  auto mem = make_args<PJRT_Buffer_Memory_Args>();
  mem.buffer = ox;
  EXPECT_EQ(consume(api_->PJRT_Buffer_Memory(&mem)).first, Code::kFailedPrecondition);
  auto copy = make_args<PJRT_Buffer_CopyToDevice_Args>();
  copy.buffer = ox;
  copy.dst_device = device_;
  EXPECT_EQ(consume(api_->PJRT_Buffer_CopyToDevice(&copy)).first, Code::kFailedPrecondition);
  auto devices = make_args<PJRT_LoadedExecutable_AddressableDevices_Args>();
  devices.executable = other_exe;
  EXPECT_EQ(consume(api_->PJRT_LoadedExecutable_AddressableDevices(&devices)).first,
            Code::kFailedPrecondition);
  // The data of a buffer that outlived its client can still be read, and everything frees.
  std::vector<float> back(32);
  EXPECT_TRUE(get(ox, back.data(), back.size() * 4).ok());
  EXPECT_EQ(back, x_);
  destroy_exe(other_exe);
  for (PJRT_Buffer* b : {x, w, ox, ow}) destroy(b);
}

TEST_F(ExecuteTest, InjectedRunFaultFailsThatRunsOutputsOnly) {
  auto [x, w] = inputs();
  ASSERT_TRUE(fault::install("execute:2").ok());
  expect_good_run(exe_, x, w);
  Run failing = execute(exe_, {x, w});
  ASSERT_TRUE(failing.call.ok()) << "the error is asynchronous: Execute itself succeeds";
  auto [st, sum] = finish(failing);
  EXPECT_EQ(st.code(), Code::kInternal) << st.to_string();
  EXPECT_NE(st.message().find("while running jit_f"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("execute #2"), std::string::npos) << st.message();
  expect_good_run(exe_, x, w);
  for (PJRT_Buffer* b : {x, w}) destroy(b);
}

TEST_F(ExecuteTest, InjectedAllocationFaultsAreResourceExhausted) {
  auto [x, w] = inputs();
  // A run's outputs.
  ASSERT_TRUE(fault::install("alloc:1").ok());
  Run run = execute(exe_, {x, w});
  auto [st, sum] = finish(run);
  EXPECT_EQ(st.code(), Code::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("while running jit_f"), std::string::npos) << st.message();
  // A transfer: its buffer fails, and so does a run that reads it.
  ASSERT_TRUE(fault::install("alloc:1").ok());
  PJRT_Buffer* bad = put(w_.data(), PJRT_Buffer_Type_F32, {8, 16});
  ASSERT_NE(bad, nullptr);
  std::vector<float> back(128);
  Status read = get(bad, back.data(), back.size() * 4);
  EXPECT_EQ(read.code(), Code::kResourceExhausted) << read.to_string();
  EXPECT_NE(read.message().find("alloc #1"), std::string::npos) << read.message();
  Run downstream = execute(exe_, {x, bad});
  EXPECT_EQ(finish(downstream).first.code(), Code::kResourceExhausted);
  expect_good_run(exe_, x, w);
  for (PJRT_Buffer* b : {x, w, bad}) destroy(b);
}

TEST_F(ExecuteTest, ConcurrentRunsTransfersAndDeletes) {
  // Threads each upload, run, delete the inputs while the run is queued, and read the result.
  auto worker = [this](int id) {
    for (int i = 0; i < 15; ++i) {
      auto [x, w] = inputs();
      Run run = execute(exe_, {x, w});
      destroy(id % 2 ? x : w);  // racing the queued run
      auto [st, sum] = finish(run);
      EXPECT_TRUE(st.ok()) << st.to_string();
      EXPECT_NEAR(sum, expected_, 1e-4);
      destroy(id % 2 ? w : x);
    }
  };
  std::vector<std::future<void>> done;
  for (int t = 0; t < 4; ++t) done.push_back(std::async(std::launch::async, worker, t));
  for (auto& f : done) {
    if (f.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
      ADD_FAILURE() << "deadlock: a thread did not finish in 120 s";
      std::_Exit(1);  // never hang the test run
    }
  }
}

}  // namespace
}  // namespace jaxmlx::pjrt
