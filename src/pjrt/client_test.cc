// The plugin's PJRT surface driven through GetPjrtApi, as jaxlib drives it.
#include <cstring>
#include <string>
#include <vector>

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
    auto args = make_args<PJRT_Client_Create_Args>();
    args.create_options = nullptr;
    args.num_options = 0;
    ASSERT_EQ(api_->PJRT_Client_Create(&args), nullptr);
    client_ = args.client;
    auto dargs = make_args<PJRT_Client_Devices_Args>();
    dargs.client = client_;
    ASSERT_EQ(api_->PJRT_Client_Devices(&dargs), nullptr);
    ASSERT_EQ(dargs.num_devices, 1u);
    device_ = dargs.devices[0];
  }
  void TearDown() override {
    auto args = make_args<PJRT_Client_Destroy_Args>();
    args.client = client_;
    EXPECT_EQ(api_->PJRT_Client_Destroy(&args), nullptr);
  }

  // Returns the error's message and code, destroying it.
  std::pair<Code, std::string> consume(PJRT_Error* e) {
    Status st = take_status(e);
    return {st.code(), st.message()};
  }

  PJRT_Buffer* put(const void* data, PJRT_Buffer_Type type, std::vector<int64_t> dims,
                   std::vector<int64_t> strides = {}, PJRT_Error** error = nullptr) {
    auto args = make_args<PJRT_Client_BufferFromHostBuffer_Args>();
    args.client = client_;
    args.data = data;
    args.type = type;
    args.dims = dims.data();
    args.num_dims = dims.size();
    args.byte_strides = strides.empty() ? nullptr : strides.data();
    args.num_byte_strides = strides.size();
    args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes;
    args.device = device_;
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
  auto args = make_args<PJRT_Buffer_UnsafePointer_Args>();
  args.buffer = nullptr;
  auto [code, msg] = consume(api_->PJRT_Buffer_UnsafePointer(&args));
  EXPECT_EQ(code, Code::kUnimplemented);
  EXPECT_NE(msg.find("PJRT_Buffer_UnsafePointer"), std::string::npos);
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

}  // namespace
}  // namespace jaxmlx::pjrt
