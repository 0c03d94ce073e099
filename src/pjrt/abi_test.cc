// ABI conformance of our PJRT declarations and the error plumbing: struct sizes and slot offsets
// pinned to the numbers in /work/shared/PJRT_NOTES.md, the UNIMPLEMENTED stubs, and error round
// trips through both the Error_* slots and the error function table.

#include "pjrt/abi.h"

#include <gtest/gtest.h>

#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pjrt/entry_points.h"
#include "pjrt/errors.h"

extern "C" const PJRT_Api* GetPjrtApi();

namespace jaxmlx::pjrt {
namespace {

constexpr size_t slot_offset(int i) { return 40 + 8 * static_cast<size_t>(i); }

// ------------------------------------------------------------------ layout

TEST(AbiLayout, ApiTableSizeAndVersionOffsets) {
  static_assert(sizeof(PJRT_Api) == 1144);
  static_assert(PJRT_Api_STRUCT_SIZE == 1144);
  static_assert(offsetof(PJRT_Api, pjrt_api_version) == 16);
  static_assert(offsetof(PJRT_Api, pjrt_api_version) + offsetof(PJRT_Api_Version, major_version) ==
                32);
  static_assert(offsetof(PJRT_Api, pjrt_api_version) + offsetof(PJRT_Api_Version, minor_version) ==
                36);
  static_assert(kSlotCount == 138);
}

// Slots whose positions were confirmed by a probe table loaded into jaxlib 0.11.2.
TEST(AbiLayout, NamedSlotOffsets) {
  static_assert(kSlot_Client_LookupDevice == 17);
  static_assert(kSlot_Client_TopologyDescription == 95);
  static_assert(kSlot_Device_GetAttributes == 128);
  static_assert(kSlot_Error_ForEachPayload == 132);
  static_assert(kSlot_TopologyDescription_GetMemorySpaceKindIds == 137);
  static_assert(offsetof(PJRT_Api, PJRT_Client_LookupDevice) == slot_offset(17));
  static_assert(offsetof(PJRT_Api, PJRT_Client_TopologyDescription) == slot_offset(95));
  static_assert(offsetof(PJRT_Api, PJRT_Device_GetAttributes) == slot_offset(128));
  static_assert(offsetof(PJRT_Api, PJRT_Error_ForEachPayload) == slot_offset(132));
  static_assert(offsetof(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds) ==
                slot_offset(137));
  static_assert(offsetof(PJRT_Api, PJRT_Compile) == slot_offset(89));
  EXPECT_EQ(slot_name(17), "PJRT_Client_LookupDevice");
  EXPECT_EQ(slot_name(132), "PJRT_Error_ForEachPayload");
  EXPECT_EQ(slot_name(138), "");
}

// jaxlib 0.11.2 (PJRT 0.115) passes these sizes. None of these structs changed between 0.110
// and 0.115, so our 0.110 constants are the same numbers.
TEST(AbiLayout, ArgsSizesMatchJaxlib) {
  static_assert(PJRT_Client_Create_Args_STRUCT_SIZE == 88);
  static_assert(PJRT_Device_GetAttributes_Args_STRUCT_SIZE == 56);
  static_assert(PJRT_Device_IsAddressable_Args_STRUCT_SIZE == 25);
  static_assert(PJRT_Error_Message_Args_STRUCT_SIZE == 40);
}

// Structs that grew after 0.110: our constants stop at the 0.110 field, and the later fields
// are declared after it (a newer jaxlib passes the larger size).
TEST(AbiLayout, ArgsSizesThatDifferFromNewerMinors) {
  // 0.112 appended hlo_output_callbacks/num_hlo_output_callbacks (144 bytes from then on).
  static_assert(PJRT_ExecuteOptions_STRUCT_SIZE == 121);
  static_assert(jaxmlx_pjrt_field_end(PJRT_ExecuteOptions, num_hlo_output_callbacks) == 144);
  // 0.113 appended peak_allocated_bytes(_is_set) (201 bytes from then on).
  static_assert(PJRT_Device_MemoryStats_Args_STRUCT_SIZE == 185);
  static_assert(jaxmlx_pjrt_field_end(PJRT_Device_MemoryStats_Args, peak_allocated_bytes_is_set) ==
                201);
  // 0.111 appended load_options (72 bytes from then on).
  static_assert(PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE == 64);
  static_assert(jaxmlx_pjrt_field_end(PJRT_Executable_DeserializeAndLoad_Args, load_options) == 72);
}

TEST(AbiLayout, OtherCommonArgsSizes) {
  static_assert(PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE == 56);
  static_assert(PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE == 120);
  static_assert(PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE == 80);
  static_assert(PJRT_NamedValue_STRUCT_SIZE == 56);
  static_assert(PJRT_Buffer_MemoryLayout_STRUCT_SIZE == 76);
  static_assert(offsetof(PJRT_Buffer_MemoryLayout, type) == 72);
  static_assert(PJRT_Api_Version_STRUCT_SIZE == 24);
  static_assert(PJRT_Extension_Base_STRUCT_SIZE == 24);
}

// The ABI-visible prefixes of PJRT_Error (0.107) and PJRT_Memory (0.105).
TEST(AbiLayout, ObjectPrefixTables) {
  static_assert(sizeof(PJRT_Error) == 8 && PJRT_Error_STRUCT_SIZE == 8);
  static_assert(offsetof(PJRT_Error_FunctionTable, instance_size) == 8);
  static_assert(offsetof(PJRT_Error_FunctionTable, extension_start) == 16);
  static_assert(offsetof(PJRT_Error_FunctionTable, destroy) == 24);
  static_assert(offsetof(PJRT_Error_FunctionTable, for_each_payload) == 48);
  static_assert(PJRT_Error_FunctionTable_STRUCT_SIZE == 56);
  static_assert(sizeof(PJRT_Memory) == 8 && PJRT_Memory_STRUCT_SIZE == 8);
  static_assert(offsetof(PJRT_Memory_FunctionTable, extension_start) == 8);
  static_assert(offsetof(PJRT_Memory_FunctionTable, instance_struct_size) == 16);
  static_assert(offsetof(PJRT_Memory_FunctionTable, get_user_data) == 24);
  static_assert(offsetof(PJRT_Memory_FunctionTable, set_user_data) == 32);
  static_assert(PJRT_Memory_FunctionTable_STRUCT_SIZE == 40);
}

TEST(AbiLayout, ElementTypeValues) {
  static_assert(PJRT_Buffer_Type_BF16 == 13);
  static_assert(PJRT_Buffer_Type_S4 == 21 && PJRT_Buffer_Type_U4 == 22);
  static_assert(PJRT_Buffer_Type_TOKEN == 23);
  static_assert(PJRT_Buffer_Type_S2 == 24 && PJRT_Buffer_Type_U2 == 25);
  static_assert(PJRT_Buffer_Type_F8E8M0FNU == 28 && PJRT_Buffer_Type_F4E2M1FN == 29);
  static_assert(PJRT_Buffer_Type_U1 == 31);
}

// ------------------------------------------------------------------ the exported table

PJRT_Error* call_slot(const PJRT_Api* api, int slot, void* args) {
  void* fn = nullptr;
  std::memcpy(&fn, reinterpret_cast<const char*>(api) + slot_offset(slot), sizeof(fn));
  return reinterpret_cast<PJRT_Error* (*)(void*)>(fn)(args);
}

TEST(AbiTable, VersionAndNoNullSlots) {
  const PJRT_Api* api = GetPjrtApi();
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->struct_size, 1144u);
  EXPECT_EQ(api->extension_start, nullptr);
  EXPECT_EQ(api->pjrt_api_version.struct_size, PJRT_Api_Version_STRUCT_SIZE);
  EXPECT_EQ(api->pjrt_api_version.major_version, 0);
  EXPECT_EQ(api->pjrt_api_version.minor_version, 110);
  for (int i = 0; i < kSlotCount; ++i) {
    void* fn = nullptr;
    std::memcpy(&fn, reinterpret_cast<const char*>(api) + slot_offset(i), sizeof(fn));
    EXPECT_NE(fn, nullptr) << slot_name(i);
  }
}

// Every slot still marked PJRT_UNIMPL answers UNIMPLEMENTED with its own name; the stubs do not
// read their argument, so a zeroed block stands in for each args struct.
TEST(AbiTable, UnimplementedSlotsNameThemselves) {
  const PJRT_Api* api = GetPjrtApi();
  std::vector<unsigned char> zeros(1024, 0);
  int checked = 0;
  for (int i = 0; i < kSlotCount; ++i) {
    if (slot_implemented(i)) continue;
    PJRT_Error* error = call_slot(api, i, zeros.data());
    ASSERT_NE(error, nullptr) << slot_name(i);
    Status status = take_status(error);
    EXPECT_EQ(status.code(), Code::kUnimplemented) << slot_name(i);
    EXPECT_EQ(status.message(),
              std::string(slot_name(i)) + " is not implemented by the jax-mlx plugin");
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "every slot is implemented";
}

TEST(AbiTable, PluginInitializeSucceeds) {
  PJRT_Plugin_Initialize_Args args{PJRT_Plugin_Initialize_Args_STRUCT_SIZE, nullptr};
  EXPECT_EQ(GetPjrtApi()->PJRT_Plugin_Initialize(&args), nullptr);
}

// ------------------------------------------------------------------ errors

TEST(Errors, RoundTripThroughSlots) {
  const PJRT_Api* api = GetPjrtApi();
  PJRT_Error* error = make_error(Code::kInvalidArgument, "bad shape [2,3]");
  ASSERT_NE(error, nullptr);

  PJRT_Error_Message_Args msg{};
  msg.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  msg.error = error;
  api->PJRT_Error_Message(&msg);
  EXPECT_EQ(std::string_view(msg.message, msg.message_size), "bad shape [2,3]");

  PJRT_Error_GetCode_Args code{};
  code.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  code.error = error;
  EXPECT_EQ(api->PJRT_Error_GetCode(&code), nullptr);
  EXPECT_EQ(code.code, PJRT_Error_Code_INVALID_ARGUMENT);

  int visits = 0;
  PJRT_Error_ForEachPayload_Args payloads{};
  payloads.struct_size = PJRT_Error_ForEachPayload_Args_STRUCT_SIZE;
  payloads.error = error;
  payloads.visitor = [](const char*, size_t, const char*, size_t, void* n) {
    ++*static_cast<int*>(n);
  };
  payloads.user_arg = &visits;
  EXPECT_EQ(api->PJRT_Error_ForEachPayload(&payloads), nullptr);
  EXPECT_EQ(visits, 0);

  PJRT_Error_Destroy_Args destroy{PJRT_Error_Destroy_Args_STRUCT_SIZE, nullptr, error};
  api->PJRT_Error_Destroy(&destroy);
  destroy.error = nullptr;
  api->PJRT_Error_Destroy(&destroy);  // null is allowed
}

TEST(Errors, FunctionTablePrefix) {
  PJRT_Error* error = make_error(Code::kNotFound, "no device 7");
  ASSERT_NE(error, nullptr);
  const PJRT_Error_FunctionTable* table = error->vtable;
  ASSERT_EQ(table, &kErrorFunctionTable);
  EXPECT_EQ(table->struct_size, PJRT_Error_FunctionTable_STRUCT_SIZE);
  EXPECT_EQ(table->instance_size, PJRT_Error_STRUCT_SIZE);
  EXPECT_EQ(table->extension_start, nullptr);
  const char* m = nullptr;
  size_t n = 0;
  table->message(error, &m, &n);
  EXPECT_EQ(std::string_view(m, n), "no device 7");
  EXPECT_EQ(table->get_code(error), PJRT_Error_Code_NOT_FOUND);
  ASSERT_NE(table->for_each_payload, nullptr);
  table->destroy(error);
}

TEST(Errors, StatusConversions) {
  EXPECT_EQ(make_error(Status()), nullptr);
  EXPECT_EQ(make_error(Code::kOk, "ignored"), nullptr);
  Status with_context = invalid_argument("dims mismatch");
  with_context.with_context("while lowering stablehlo.add");
  Status back = take_status(make_error(with_context));
  EXPECT_EQ(back.code(), Code::kInvalidArgument);
  EXPECT_EQ(back.message(), with_context.message());
  EXPECT_TRUE(to_status(nullptr).ok());

  Status from_callback = take_status((*callback_error_fn())(PJRT_Error_Code_NOT_FOUND, "key k", 5));
  EXPECT_EQ(from_callback.code(), Code::kNotFound);
  EXPECT_EQ(from_callback.message(), "key k");
}

TEST(Errors, ArgsChecks) {
  PJRT_Buffer_ToHostBuffer_Args args{};
  args.struct_size = 16;
  Status small = take_status(check_args(&args));
  EXPECT_EQ(small.code(), Code::kInvalidArgument);
  EXPECT_EQ(small.message(),
            "PJRT_Buffer_ToHostBuffer: args->struct_size is 16, the plugin needs at least 56");
  args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  EXPECT_EQ(check_args(&args), nullptr);
  // Callers from newer minors pass larger structs.
  args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE + 64;
  EXPECT_EQ(check_args(&args), nullptr);

  Status null_args = take_status(check_args(static_cast<PJRT_Client_Create_Args*>(nullptr)));
  EXPECT_EQ(null_args.message(), "PJRT_Client_Create: args is null");
  Status null_field = take_status(check_not_null("PJRT_Buffer_Delete", nullptr, "args->buffer"));
  EXPECT_EQ(null_field.message(), "PJRT_Buffer_Delete: args->buffer is null");
}

TEST(Errors, GuardedCatchesExceptions) {
  PJRT_Client_Compile_Args args{};
  args.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;

  Status thrown = take_status(
      guarded(&args, []() -> PJRT_Error* { throw std::runtime_error("[reshape] bad size"); }));
  EXPECT_EQ(thrown.code(), Code::kInternal);
  EXPECT_EQ(thrown.message(), "PJRT_Client_Compile: uncaught exception: [reshape] bad size");

  Status unknown = take_status(guarded(&args, []() -> Status { throw 42; }));
  EXPECT_EQ(unknown.message(), "PJRT_Client_Compile: unknown exception");

  EXPECT_EQ(guarded(&args, [] { return Status(); }), nullptr);
  EXPECT_EQ(guarded(&args, [] {}), nullptr);
  Status returned = take_status(guarded(&args, [] { return unimplemented("dtype f8"); }));
  EXPECT_EQ(returned.code(), Code::kUnimplemented);

  // The name-only overload (for callbacks) skips the args check.
  Status named = take_status(guarded("recv callback", [] { throw std::bad_alloc(); }));
  EXPECT_EQ(named.message(), "recv callback: uncaught exception: std::bad_alloc");

  // The struct_size check runs before the body.
  args.struct_size = 8;
  bool ran = false;
  Status rejected = take_status(guarded(&args, [&] { ran = true; }));
  EXPECT_FALSE(ran);
  EXPECT_EQ(rejected.code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace jaxmlx::pjrt
