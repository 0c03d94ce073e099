// Our declarations of the PJRT C API: the types, enums, argument structs and the PJRT_Api
// function table that jaxlib reads from the plugin.
//
// Written by us from the published ABI (names, field order and types are facts of the ABI and
// must not change; see /work/shared/PJRT_NOTES.md). Every field offset, struct size,
// STRUCT_SIZE constant and enumerator was checked mechanically against the upstream header at
// 0.110, and the field offsets also against 0.114. Layout claimed: PJRT (0, 110), 138 slots,
// sizeof(PJRT_Api) == 1144, LP64. C++ only (slot members are declared with `::`-qualified types
// so g++ accepts a member named like its type).
//
// Versioning rules that matter when reading this file:
//  * Every argument struct starts with `struct_size` (the caller's sizeof at *its* minor) and
//    `extension_start`. Read a field only if `struct_size` covers it (jaxmlx_pjrt_field_end).
//  * `X_STRUCT_SIZE` is offsetof(last field) + sizeof(last field) at our claimed minor 110.
//    Fields added after 0.110 are declared (so newer callers' values can be read) but are not
//    counted in X_STRUCT_SIZE; they are marked "[0.11x]".
//  * Callers do not zero argument structs: write every out field, including `*_is_set` flags.
//  * Every enum has the fixed underlying type int (the size and alignment of a C enum here):
//    a caller may pass a code we do not know (a newer jaxlib, or garbage), and reading a value
//    outside the enumerators' range from an enum without a fixed type is undefined behaviour
//    (UBSan, make asan: BufferFromHostBuffer reading element type 99 in client_test).
#pragma once

#include <cstddef>
#include <cstdint>

// Version we claim in PJRT_Api::pjrt_api_version.
#define PJRT_API_MAJOR 0
#define PJRT_API_MINOR 110

// Bytes of T up to and including `field`: the struct_size a caller must pass for us to read it.
#define jaxmlx_pjrt_field_end(T, field) (offsetof(T, field) + sizeof(((T*)nullptr)->field))

// Declares T_STRUCT_SIZE the way the ABI computes it (end of the last field at our minor).
#define PJRT_STRUCT_TRAITS(T, last_field) \
  static constexpr size_t T##_STRUCT_SIZE = jaxmlx_pjrt_field_end(T, last_field)

extern "C" {

// ===================================================================== extensions

// Tags of the extension chain (PJRT_Extension_Base::type). Values as of 0.114; 0.115 appends
// Rma (25). We provide none; we must ignore (never reject) unknown entries in a caller's chain.
typedef enum : int {
  PJRT_Extension_Type_Gpu_Custom_Call = 0,
  PJRT_Extension_Type_Profiler = 1,
  PJRT_Extension_Type_Custom_Partitioner = 2,
  PJRT_Extension_Type_Stream = 3,
  PJRT_Extension_Type_Layouts = 4,
  PJRT_Extension_Type_FFI = 5,
  PJRT_Extension_Type_MemoryDescriptions = 6,
  PJRT_Extension_Type_Triton = 7,
  PJRT_Extension_Type_RawBuffer = 8,
  PJRT_Extension_Type_PhaseCompile = 9,
  PJRT_Extension_Type_Example = 10,
  PJRT_Extension_Type_Unknown = 11,
  PJRT_Extension_Type_CrossHostTransfers = 12,
  PJRT_Extension_Type_ExecutableMetadata = 13,
  PJRT_Extension_Type_Callback = 14,
  PJRT_Extension_Type_HostAllocator = 15,
  PJRT_Extension_Type_TpuTopology = 16,
  PJRT_Extension_Type_TpuExecutable = 17,
  PJRT_Extension_Type_Megascale = 18,
  PJRT_Extension_Type_Shardings = 19,
  PJRT_Extension_Type_AbiVersion = 20,
  PJRT_Extension_Type_Collectives = 21,
  PJRT_Extension_Type_MultiSlice = 22,
  PJRT_Extension_Type_HostMemoryAllocator = 23,
  PJRT_Extension_Type_XlaTransform = 24,
} PJRT_Extension_Type;

// Header of every extension struct; a singly linked list starting at `extension_start`.
typedef struct PJRT_Extension_Base {
  size_t struct_size;
  PJRT_Extension_Type type;
  struct PJRT_Extension_Base* next;
} PJRT_Extension_Base;
PJRT_STRUCT_TRAITS(PJRT_Extension_Base, next);

// ===================================================================== version

typedef struct PJRT_Api_Version {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  int major_version;
  int minor_version;
} PJRT_Api_Version;
PJRT_STRUCT_TRAITS(PJRT_Api_Version, minor_version);

// ===================================================================== opaque handles
// Objects the plugin defines. Only PJRT_Error and PJRT_Memory have an ABI-visible prefix
// (a function-table pointer, declared below); the rest are ours to define in C++.

typedef struct PJRT_Error PJRT_Error;
typedef struct PJRT_Memory PJRT_Memory;
typedef struct PJRT_Event PJRT_Event;
typedef struct PJRT_Client PJRT_Client;
typedef struct PJRT_Device PJRT_Device;
typedef struct PJRT_DeviceDescription PJRT_DeviceDescription;
typedef struct PJRT_TopologyDescription PJRT_TopologyDescription;
typedef struct PJRT_Executable PJRT_Executable;
typedef struct PJRT_LoadedExecutable PJRT_LoadedExecutable;
typedef struct PJRT_Buffer PJRT_Buffer;
typedef struct PJRT_CopyToDeviceStream PJRT_CopyToDeviceStream;
typedef struct PJRT_ExecuteContext PJRT_ExecuteContext;
typedef struct PJRT_AsyncHostToDeviceTransferManager PJRT_AsyncHostToDeviceTransferManager;
typedef struct PJRT_AsyncTrackingEvent PJRT_AsyncTrackingEvent;
typedef struct PJRT_FulfillAliasBufferCallback PJRT_FulfillAliasBufferCallback;
typedef struct PJRT_PhaseCompiler PJRT_PhaseCompiler;
typedef struct PJRT_MultiSlice_Config PJRT_MultiSlice_Config;
// Backing stores handed out with a matching deleter callback.
typedef struct PJRT_Device_Attributes PJRT_Device_Attributes;
typedef struct PJRT_SerializedExecutable PJRT_SerializedExecutable;
typedef struct PJRT_SerializedCompileOptions PJRT_SerializedCompileOptions;
typedef struct PJRT_SerializedTopology PJRT_SerializedTopology;
typedef struct PJRT_DeviceAssignmentSerialized PJRT_DeviceAssignmentSerialized;

// ===================================================================== errors

// Same numbering as absl::StatusCode (and jaxmlx::Code).
typedef enum : int {
  PJRT_Error_Code_OK = 0,
  PJRT_Error_Code_CANCELLED = 1,
  PJRT_Error_Code_UNKNOWN = 2,
  PJRT_Error_Code_INVALID_ARGUMENT = 3,
  PJRT_Error_Code_DEADLINE_EXCEEDED = 4,
  PJRT_Error_Code_NOT_FOUND = 5,
  PJRT_Error_Code_ALREADY_EXISTS = 6,
  PJRT_Error_Code_PERMISSION_DENIED = 7,
  PJRT_Error_Code_RESOURCE_EXHAUSTED = 8,
  PJRT_Error_Code_FAILED_PRECONDITION = 9,
  PJRT_Error_Code_ABORTED = 10,
  PJRT_Error_Code_OUT_OF_RANGE = 11,
  PJRT_Error_Code_UNIMPLEMENTED = 12,
  PJRT_Error_Code_INTERNAL = 13,
  PJRT_Error_Code_UNAVAILABLE = 14,
  PJRT_Error_Code_DATA_LOSS = 15,
  PJRT_Error_Code_UNAUTHENTICATED = 16,
} PJRT_Error_Code;

// Called once per (key, value) payload of an error.
typedef void (*PJRT_Error_PayloadVisitor)(const char* key, size_t key_size, const char* value,
                                          size_t value_size, void* user_arg);

// Since 0.107 every PJRT_Error starts with a pointer to one of these, so the framework can
// operate on an error without going through the Error_* slots. Field order is the ABI's.
typedef struct PJRT_Error_FunctionTable {
  size_t struct_size;
  size_t instance_size;  // size of the public PJRT_Error part (PJRT_Error_STRUCT_SIZE)
  PJRT_Extension_Base* extension_start;
  void (*destroy)(PJRT_Error* error);
  void (*message)(const PJRT_Error* error, const char** message, size_t* message_size);
  PJRT_Error_Code (*get_code)(const PJRT_Error* error);
  void (*for_each_payload)(const PJRT_Error* error, PJRT_Error_PayloadVisitor visitor,
                           void* user_arg);
} PJRT_Error_FunctionTable;
PJRT_STRUCT_TRAITS(PJRT_Error_FunctionTable, for_each_payload);

// The ABI-visible prefix of every error; our errors derive from it (errors.h).
struct PJRT_Error {
  const PJRT_Error_FunctionTable* vtable;
};
PJRT_STRUCT_TRAITS(PJRT_Error, vtable);

// Handed by the plugin to caller-provided callbacks (KV store, send callbacks) so that they can
// build a PJRT_Error to return; must copy `message`.
typedef PJRT_Error* (*PJRT_CallbackError)(PJRT_Error_Code code, const char* message,
                                          size_t message_size);

// ===================================================================== memory prefix

// Since 0.105 every PJRT_Memory starts with a pointer to one of these; jaxlib stores its own
// per-memory data through it. Note the field order differs from the error table's.
typedef struct PJRT_Memory_FunctionTable {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  size_t instance_struct_size;  // PJRT_Memory_STRUCT_SIZE
  void* (*get_user_data)(PJRT_Memory* memory, const void* key);
  // Replaces any value under `key`, calling the old value's dtor (if any) first.
  void (*set_user_data)(PJRT_Memory* memory, const void* key, void* data, void (*dtor)(void*));
} PJRT_Memory_FunctionTable;
PJRT_STRUCT_TRAITS(PJRT_Memory_FunctionTable, set_user_data);

struct PJRT_Memory {
  const PJRT_Memory_FunctionTable* vtable;
};
PJRT_STRUCT_TRAITS(PJRT_Memory, vtable);

// ===================================================================== common value types

typedef enum : int {
  PJRT_NamedValue_kString = 0,
  PJRT_NamedValue_kInt64 = 1,
  PJRT_NamedValue_kInt64List = 2,
  PJRT_NamedValue_kFloat = 3,
  PJRT_NamedValue_kBool = 4,
} PJRT_NamedValue_Type;

// A typed key/value (options, attributes). `value_size`: element count for strings and lists,
// 1 for scalars.
typedef struct PJRT_NamedValue {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* name;
  size_t name_size;
  PJRT_NamedValue_Type type;
  union {
    const char* string_value;
    int64_t int64_value;
    const int64_t* int64_array_value;
    float float_value;
    bool bool_value;
  };
  size_t value_size;
} PJRT_NamedValue;
PJRT_STRUCT_TRAITS(PJRT_NamedValue, value_size);

// Element types. Values are fixed by the ABI (not sorted by kind). The two F6 types are from
// 0.114: a newer jaxlib may pass them, so we name them in order to reject them clearly.
typedef enum : int {
  PJRT_Buffer_Type_INVALID = 0,
  PJRT_Buffer_Type_PRED = 1,
  PJRT_Buffer_Type_S8 = 2,
  PJRT_Buffer_Type_S16 = 3,
  PJRT_Buffer_Type_S32 = 4,
  PJRT_Buffer_Type_S64 = 5,
  PJRT_Buffer_Type_U8 = 6,
  PJRT_Buffer_Type_U16 = 7,
  PJRT_Buffer_Type_U32 = 8,
  PJRT_Buffer_Type_U64 = 9,
  PJRT_Buffer_Type_F16 = 10,
  PJRT_Buffer_Type_F32 = 11,
  PJRT_Buffer_Type_F64 = 12,
  PJRT_Buffer_Type_BF16 = 13,
  PJRT_Buffer_Type_C64 = 14,
  PJRT_Buffer_Type_C128 = 15,
  PJRT_Buffer_Type_F8E5M2 = 16,
  PJRT_Buffer_Type_F8E4M3FN = 17,
  PJRT_Buffer_Type_F8E4M3B11FNUZ = 18,
  PJRT_Buffer_Type_F8E5M2FNUZ = 19,
  PJRT_Buffer_Type_F8E4M3FNUZ = 20,
  PJRT_Buffer_Type_S4 = 21,
  PJRT_Buffer_Type_U4 = 22,
  PJRT_Buffer_Type_TOKEN = 23,
  PJRT_Buffer_Type_S2 = 24,
  PJRT_Buffer_Type_U2 = 25,
  PJRT_Buffer_Type_F8E4M3 = 26,
  PJRT_Buffer_Type_F8E3M4 = 27,
  PJRT_Buffer_Type_F8E8M0FNU = 28,
  PJRT_Buffer_Type_F4E2M1FN = 29,
  PJRT_Buffer_Type_S1 = 30,
  PJRT_Buffer_Type_U1 = 31,
  PJRT_Buffer_Type_F6E2M3FN = 32,  // [0.114]
  PJRT_Buffer_Type_F6E3M2FN = 33,  // [0.114]
} PJRT_Buffer_Type;

// How long the plugin may keep using the host memory given to BufferFromHostBuffer.
typedef enum : int {
  // Only during the call: copy before returning.
  PJRT_HostBufferSemantics_kImmutableOnlyDuringCall = 0,
  // Until `done_with_host_buffer` fires; the caller does not modify it meanwhile.
  PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes = 1,
  // The buffer may alias the host memory for its whole life, read-only.
  PJRT_HostBufferSemantics_kImmutableZeroCopy = 2,
  // The buffer may alias the host memory and also write to it (e.g. donated outputs).
  PJRT_HostBufferSemantics_kMutableZeroCopy = 3,
} PJRT_HostBufferSemantics;

typedef enum : int {
  PJRT_Buffer_MemoryLayout_Type_Tiled = 0,
  PJRT_Buffer_MemoryLayout_Type_Strides = 1,
} PJRT_Buffer_MemoryLayout_Type;

// minor_to_major[0] is the fastest-varying logical dimension. Tiles: `num_tiles` tiles whose
// dimension counts are tile_dim_sizes[i], their sizes concatenated in tile_dims.
typedef struct PJRT_Buffer_MemoryLayout_Tiled {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const int64_t* minor_to_major;
  size_t minor_to_major_size;
  const int64_t* tile_dims;
  const size_t* tile_dim_sizes;
  size_t num_tiles;
} PJRT_Buffer_MemoryLayout_Tiled;
PJRT_STRUCT_TRAITS(PJRT_Buffer_MemoryLayout_Tiled, num_tiles);

// Byte strides per dimension; may be negative (then data points inside the allocation).
typedef struct PJRT_Buffer_MemoryLayout_Strides {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const int64_t* byte_strides;
  size_t num_byte_strides;
} PJRT_Buffer_MemoryLayout_Strides;
PJRT_STRUCT_TRAITS(PJRT_Buffer_MemoryLayout_Strides, num_byte_strides);

// Tagged union: `type` says which member is valid. Note the tag comes after the union.
typedef struct PJRT_Buffer_MemoryLayout {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  union {
    PJRT_Buffer_MemoryLayout_Tiled tiled;
    PJRT_Buffer_MemoryLayout_Strides strides;
  };
  PJRT_Buffer_MemoryLayout_Type type;
} PJRT_Buffer_MemoryLayout;
PJRT_STRUCT_TRAITS(PJRT_Buffer_MemoryLayout, type);

typedef struct PJRT_ShapeSpec {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
} PJRT_ShapeSpec;
PJRT_STRUCT_TRAITS(PJRT_ShapeSpec, element_type);

// A program to compile. `format` is "mlir" (StableHLO bytecode or text), "hlo" or
// "hlo_with_config". Who owns `code` depends on the call (see OptimizedProgram).
typedef struct PJRT_Program {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  char* code;
  size_t code_size;
  const char* format;
  size_t format_size;
} PJRT_Program;
PJRT_STRUCT_TRAITS(PJRT_Program, format_size);

// A block of bytes whose receiver frees it with deleter(data, deleter_arg).
typedef struct PJRT_Chunk {
  void* data;
  size_t size;
  void (*deleter)(void* data, void* deleter_arg);
  void* deleter_arg;
} PJRT_Chunk;

typedef struct PJRT_LogicalDeviceIds {
  int replica;
  int partition;
} PJRT_LogicalDeviceIds;

typedef enum : int {
  PJRT_ProcessState_kUnspecified = 0,
  PJRT_ProcessState_kUninitialized = 1,
  PJRT_ProcessState_kDisconnected = 2,
  PJRT_ProcessState_kConnected = 3,
  PJRT_ProcessState_kError = 4,
} PJRT_ProcessState;

// Note: no extension_start in this one.
typedef struct PJRT_ProcessInfo {
  size_t struct_size;
  int task_id;
  uint64_t incarnation_id;
  PJRT_ProcessState state;
  int error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_ProcessInfo;
PJRT_STRUCT_TRAITS(PJRT_ProcessInfo, error_message_size);

// ===================================================================== callbacks

// Gets the event's status; the callback owns `error` (may be null) and must destroy it.
typedef void (*PJRT_Event_OnReadyCallback)(PJRT_Error* error, void* user_arg);

// Host send/recv callbacks (stablehlo send/recv to host). The send callback must call
// chunk->deleter; the recv callback owns `stream` and destroys it with
// PJRT_CopyToDeviceStream_Destroy.
typedef PJRT_Error* (*PJRT_SendCallback)(PJRT_Chunk* chunk, PJRT_CallbackError* callback_error,
                                         size_t total_size_in_bytes, bool done, void* user_arg);
typedef void (*PJRT_RecvCallback)(PJRT_CopyToDeviceStream* stream, void* user_arg);

typedef struct PJRT_SendCallbackInfo {
  int64_t channel_id;
  void* user_arg;
  PJRT_SendCallback send_callback;
} PJRT_SendCallbackInfo;
PJRT_STRUCT_TRAITS(PJRT_SendCallbackInfo, send_callback);

typedef struct PJRT_RecvCallbackInfo {
  int64_t channel_id;
  void* user_arg;
  PJRT_RecvCallback recv_callback;
} PJRT_RecvCallbackInfo;
PJRT_STRUCT_TRAITS(PJRT_RecvCallbackInfo, recv_callback);

// [0.112] Host output callbacks referenced from PJRT_ExecuteOptions::hlo_output_callbacks.
typedef void (*PJRT_HloOutputCallback)(int64_t replica_id, int64_t partition_id, const void* data,
                                       const int64_t* shape_dims, size_t shape_num_dims,
                                       PJRT_Buffer_Type shape_element_type, int64_t operand_index,
                                       void* user_arg);

typedef struct PJRT_HloOutputCallbackInfo {
  void* user_arg;
  PJRT_HloOutputCallback callback;
  int64_t callback_id;
  size_t num_operands;
} PJRT_HloOutputCallbackInfo;
PJRT_STRUCT_TRAITS(PJRT_HloOutputCallbackInfo, num_operands);

// Key-value store callbacks the framework may pass to Client_Create (multi-process only).
typedef void (*PJRT_KeyValueGetCallback_ValueDeleter)(char* value);

typedef struct PJRT_KeyValueGetCallback_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* key;
  size_t key_size;
  int timeout_in_ms;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                   // out
  size_t value_size;                                             // out
  PJRT_KeyValueGetCallback_ValueDeleter value_deleter_callback;  // out: frees `value`
} PJRT_KeyValueGetCallback_Args;
PJRT_STRUCT_TRAITS(PJRT_KeyValueGetCallback_Args, value_deleter_callback);
typedef PJRT_Error* (*PJRT_KeyValueGetCallback)(PJRT_KeyValueGetCallback_Args* args);

typedef void (*PJRT_KeyValueTryGetCallback_ValueDeleter)(char* value);

// Like Get, but NOT_FOUND at once instead of waiting.
typedef struct PJRT_KeyValueTryGetCallback_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* key;
  size_t key_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
  char* value;                                                      // out
  size_t value_size;                                                // out
  PJRT_KeyValueTryGetCallback_ValueDeleter value_deleter_callback;  // out
} PJRT_KeyValueTryGetCallback_Args;
PJRT_STRUCT_TRAITS(PJRT_KeyValueTryGetCallback_Args, value_deleter_callback);
typedef PJRT_Error* (*PJRT_KeyValueTryGetCallback)(PJRT_KeyValueTryGetCallback_Args* args);

typedef struct PJRT_KeyValuePutCallback_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* key;
  size_t key_size;
  const char* value;  // valid during the call only
  size_t value_size;
  PJRT_CallbackError* callback_error;
  void* user_arg;
} PJRT_KeyValuePutCallback_Args;
PJRT_STRUCT_TRAITS(PJRT_KeyValuePutCallback_Args, user_arg);
typedef PJRT_Error* (*PJRT_KeyValuePutCallback)(PJRT_KeyValuePutCallback_Args* args);

// ===================================================================== execute options

// Per-execution options (pointed to by LoadedExecutable_Execute_Args::options).
// Layout history: multi_slice_config 0.97; use_major_to_minor_data_layout_for_callbacks 0.108;
// hlo_output_callbacks/num_hlo_output_callbacks 0.112, so jaxlib 0.10.2 and later pass
// struct_size 144 while our 0.110 size is 121.
typedef struct PJRT_ExecuteOptions {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  // [num_devices][num_send_ops] / [num_devices][num_recv_ops]; matched by channel id.
  PJRT_SendCallbackInfo** send_callbacks;
  PJRT_RecvCallbackInfo** recv_callbacks;
  size_t num_send_ops;
  size_t num_recv_ops;
  int launch_id;
  // Inputs that must not be donated even if the program aliases them.
  const int64_t* non_donatable_input_indices;
  size_t num_non_donatable_input_indices;
  PJRT_ExecuteContext* context;
  const char* call_location;  // NUL-terminated, valid during the call; may be null
  size_t num_tasks;
  int* task_ids;
  int64_t* incarnation_ids;
  PJRT_MultiSlice_Config* multi_slice_config;
  bool use_major_to_minor_data_layout_for_callbacks;
  PJRT_HloOutputCallbackInfo* hlo_output_callbacks;  // [0.112]
  size_t num_hlo_output_callbacks;                   // [0.112]
} PJRT_ExecuteOptions;
PJRT_STRUCT_TRAITS(PJRT_ExecuteOptions, use_major_to_minor_data_layout_for_callbacks);

// [0.111] Options for Executable_DeserializeAndLoad. No extension_start.
typedef struct PJRT_LoadOptions {
  size_t struct_size;
  const int32_t* computation_origin;
  size_t computation_origin_size;
  PJRT_MultiSlice_Config* multi_slice_config;
} PJRT_LoadOptions;
PJRT_STRUCT_TRAITS(PJRT_LoadOptions, multi_slice_config);

// ===================================================================== argument structs
// One struct and one function type per slot, grouped like the slots. "out" marks fields the
// plugin writes. Every function type is named exactly like its PJRT_Api slot.

// ------------------------------------------------------------ Error_*, Plugin_*

typedef struct PJRT_Error_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Error* error;  // may be null
} PJRT_Error_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_Error_Destroy_Args, error);
typedef void PJRT_Error_Destroy(PJRT_Error_Destroy_Args* args);

typedef struct PJRT_Error_Message_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  const char* message;  // out; lives as long as `error`
  size_t message_size;  // out
} PJRT_Error_Message_Args;
PJRT_STRUCT_TRAITS(PJRT_Error_Message_Args, message_size);
typedef void PJRT_Error_Message(PJRT_Error_Message_Args* args);

typedef struct PJRT_Error_GetCode_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  PJRT_Error_Code code;  // out
} PJRT_Error_GetCode_Args;
PJRT_STRUCT_TRAITS(PJRT_Error_GetCode_Args, code);
typedef PJRT_Error* PJRT_Error_GetCode(PJRT_Error_GetCode_Args* args);

typedef struct PJRT_Error_ForEachPayload_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Error* error;
  PJRT_Error_PayloadVisitor visitor;
  void* user_arg;
} PJRT_Error_ForEachPayload_Args;
PJRT_STRUCT_TRAITS(PJRT_Error_ForEachPayload_Args, user_arg);
typedef PJRT_Error* PJRT_Error_ForEachPayload(PJRT_Error_ForEachPayload_Args* args);

typedef struct PJRT_Plugin_Initialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
} PJRT_Plugin_Initialize_Args;
PJRT_STRUCT_TRAITS(PJRT_Plugin_Initialize_Args, extension_start);
typedef PJRT_Error* PJRT_Plugin_Initialize(PJRT_Plugin_Initialize_Args* args);

// Keys jaxlib reads: "xla_version", "stablehlo_current_version", "stablehlo_minimum_version".
typedef struct PJRT_Plugin_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_NamedValue* attributes;  // out; process lifetime
  size_t num_attributes;              // out
} PJRT_Plugin_Attributes_Args;
PJRT_STRUCT_TRAITS(PJRT_Plugin_Attributes_Args, num_attributes);
typedef PJRT_Error* PJRT_Plugin_Attributes(PJRT_Plugin_Attributes_Args* args);

// ------------------------------------------------------------ Event_*

typedef struct PJRT_Event_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;  // may be null
} PJRT_Event_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_Destroy_Args, event);
typedef PJRT_Error* PJRT_Event_Destroy(PJRT_Event_Destroy_Args* args);

typedef struct PJRT_Event_IsReady_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
  bool is_ready;  // out; true also when it completed with an error
} PJRT_Event_IsReady_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_IsReady_Args, is_ready);
typedef PJRT_Error* PJRT_Event_IsReady(PJRT_Event_IsReady_Args* args);

// Only after IsReady: returns the event's error (a new PJRT_Error each call) or null.
typedef struct PJRT_Event_Error_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
} PJRT_Event_Error_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_Error_Args, event);
typedef PJRT_Error* PJRT_Event_Error(PJRT_Event_Error_Args* args);

// Blocks until ready; returns the event's error (new object) or null.
typedef struct PJRT_Event_Await_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
} PJRT_Event_Await_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_Await_Args, event);
typedef PJRT_Error* PJRT_Event_Await(PJRT_Event_Await_Args* args);

typedef struct PJRT_Event_OnReady_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
} PJRT_Event_OnReady_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_OnReady_Args, user_arg);
typedef PJRT_Error* PJRT_Event_OnReady(PJRT_Event_OnReady_Args* args);

// [0.89] A caller-completed event (the framework sets it with Event_Set).
typedef struct PJRT_Event_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;  // out
} PJRT_Event_Create_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_Create_Args, event);
typedef PJRT_Error* PJRT_Event_Create(PJRT_Event_Create_Args* args);

typedef struct PJRT_Event_Set_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Event* event;
  PJRT_Error_Code error_code;  // OK completes without error
  const char* error_message;   // copy it: valid during the call only
  size_t error_message_size;
} PJRT_Event_Set_Args;
PJRT_STRUCT_TRAITS(PJRT_Event_Set_Args, error_message_size);
typedef PJRT_Error* PJRT_Event_Set(PJRT_Event_Set_Args* args);

// ------------------------------------------------------------ Client_*

typedef struct PJRT_Client_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_KeyValueGetCallback kv_get_callback;
  void* kv_get_user_arg;
  PJRT_KeyValuePutCallback kv_put_callback;
  void* kv_put_user_arg;
  PJRT_Client* client;  // out
  PJRT_KeyValueTryGetCallback kv_try_get_callback;
  void* kv_try_get_user_arg;
} PJRT_Client_Create_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_Create_Args, kv_try_get_user_arg);
typedef PJRT_Error* PJRT_Client_Create(PJRT_Client_Create_Args* args);

typedef struct PJRT_Client_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;  // may be null
} PJRT_Client_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_Destroy_Args, client);
typedef PJRT_Error* PJRT_Client_Destroy(PJRT_Client_Destroy_Args* args);

typedef struct PJRT_Client_PlatformName_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* platform_name;  // out; owned by client
  size_t platform_name_size;  // out
} PJRT_Client_PlatformName_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_PlatformName_Args, platform_name_size);
typedef PJRT_Error* PJRT_Client_PlatformName(PJRT_Client_PlatformName_Args* args);

typedef struct PJRT_Client_ProcessIndex_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int process_index;  // out
} PJRT_Client_ProcessIndex_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_ProcessIndex_Args, process_index);
typedef PJRT_Error* PJRT_Client_ProcessIndex(PJRT_Client_ProcessIndex_Args* args);

typedef struct PJRT_Client_PlatformVersion_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* platform_version;  // out; owned by client
  size_t platform_version_size;  // out
} PJRT_Client_PlatformVersion_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_PlatformVersion_Args, platform_version_size);
typedef PJRT_Error* PJRT_Client_PlatformVersion(PJRT_Client_PlatformVersion_Args* args);

typedef struct PJRT_Client_TopologyDescription_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_TopologyDescription* topology;  // out; owned by client, not destroyed by the caller
} PJRT_Client_TopologyDescription_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_TopologyDescription_Args, topology);
typedef PJRT_Error* PJRT_Client_TopologyDescription(PJRT_Client_TopologyDescription_Args* args);

typedef struct PJRT_Client_Devices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* devices;  // out; owned by client
  size_t num_devices;           // out
} PJRT_Client_Devices_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_Devices_Args, num_devices);
typedef PJRT_Error* PJRT_Client_Devices(PJRT_Client_Devices_Args* args);

typedef struct PJRT_Client_AddressableDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
} PJRT_Client_AddressableDevices_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_AddressableDevices_Args, num_addressable_devices);
typedef PJRT_Error* PJRT_Client_AddressableDevices(PJRT_Client_AddressableDevices_Args* args);

// By global id (DeviceDescription_Id).
typedef struct PJRT_Client_LookupDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int id;
  PJRT_Device* device;  // out
} PJRT_Client_LookupDevice_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_LookupDevice_Args, device);
typedef PJRT_Error* PJRT_Client_LookupDevice(PJRT_Client_LookupDevice_Args* args);

// By local hardware id (Device_LocalHardwareId).
typedef struct PJRT_Client_LookupAddressableDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int local_hardware_id;
  PJRT_Device* addressable_device;  // out
} PJRT_Client_LookupAddressableDevice_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_LookupAddressableDevice_Args, addressable_device);
typedef PJRT_Error* PJRT_Client_LookupAddressableDevice(
    PJRT_Client_LookupAddressableDevice_Args* args);

typedef struct PJRT_Client_UpdateGlobalProcessInfo_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_ProcessInfo* process_infos;
  size_t num_process_infos;
} PJRT_Client_UpdateGlobalProcessInfo_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_UpdateGlobalProcessInfo_Args, num_process_infos);
typedef PJRT_Error* PJRT_Client_UpdateGlobalProcessInfo(
    PJRT_Client_UpdateGlobalProcessInfo_Args* args);

typedef struct PJRT_Client_AddressableMemories_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Memory* const* addressable_memories;  // out
  size_t num_addressable_memories;           // out
} PJRT_Client_AddressableMemories_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_AddressableMemories_Args, num_addressable_memories);
typedef PJRT_Error* PJRT_Client_AddressableMemories(PJRT_Client_AddressableMemories_Args* args);

// `compile_options` is a serialized xla.CompileOptionsProto.
typedef struct PJRT_Client_Compile_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_LoadedExecutable* executable;  // out
} PJRT_Client_Compile_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_Compile_Args, executable);
typedef PJRT_Error* PJRT_Client_Compile(PJRT_Client_Compile_Args* args);

// [0.95] Loads an unloaded PJRT_Executable (from PJRT_Compile) onto this client.
typedef struct PJRT_Client_Load_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Executable* executable;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_LoadedExecutable* loaded_executable;  // out
} PJRT_Client_Load_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_Load_Args, loaded_executable);
typedef PJRT_Error* PJRT_Client_Load(PJRT_Client_Load_Args* args);

// Writes num_replicas * num_partitions device ids into the caller's array.
typedef struct PJRT_Client_DefaultDeviceAssignment_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  int num_replicas;
  int num_partitions;
  size_t default_assignment_size;  // capacity of default_assignment
  int* default_assignment;         // caller-owned; filled by the plugin
} PJRT_Client_DefaultDeviceAssignment_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_DefaultDeviceAssignment_Args, default_assignment);
typedef PJRT_Error* PJRT_Client_DefaultDeviceAssignment(
    PJRT_Client_DefaultDeviceAssignment_Args* args);

typedef struct PJRT_Client_DmaMap_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  void* data;
  size_t size;
} PJRT_Client_DmaMap_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_DmaMap_Args, size);
typedef PJRT_Error* PJRT_Client_DmaMap(PJRT_Client_DmaMap_Args* args);

typedef struct PJRT_Client_DmaUnmap_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  void* data;
} PJRT_Client_DmaUnmap_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_DmaUnmap_Args, data);
typedef PJRT_Error* PJRT_Client_DmaUnmap(PJRT_Client_DmaUnmap_Args* args);

// The main host-to-device path (jax.device_put, numpy args). Exactly one of device/memory is
// normally set; memory wins when non-null. Null byte_strides means dense major-to-minor.
typedef struct PJRT_Client_BufferFromHostBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const void* data;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  const int64_t* byte_strides;  // may be null / empty
  size_t num_byte_strides;
  PJRT_HostBufferSemantics host_buffer_semantics;
  PJRT_Device* device;
  PJRT_Memory* memory;                      // may be null
  PJRT_Buffer_MemoryLayout* device_layout;  // may be null: dense major-to-minor
  PJRT_Event* done_with_host_buffer;        // out: ready when `data` may be freed/reused
  PJRT_Buffer* buffer;                      // out
} PJRT_Client_BufferFromHostBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_BufferFromHostBuffer_Args, buffer);
typedef PJRT_Error* PJRT_Client_BufferFromHostBuffer(PJRT_Client_BufferFromHostBuffer_Args* args);

// Wraps memory the plugin does not own (dlpack import).
typedef struct PJRT_Client_CreateViewOfDeviceBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  void* device_buffer_ptr;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
  PJRT_Buffer_MemoryLayout* layout;
  PJRT_Device* device;  // deprecated in favour of `memory`
  void (*on_delete_callback)(void* device_buffer_ptr, void* user_arg);  // may be null
  void* on_delete_callback_arg;
  intptr_t stream;
  PJRT_Buffer* buffer;  // out
  PJRT_Memory* memory;
} PJRT_Client_CreateViewOfDeviceBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_CreateViewOfDeviceBuffer_Args, memory);
typedef PJRT_Error* PJRT_Client_CreateViewOfDeviceBuffer(
    PJRT_Client_CreateViewOfDeviceBuffer_Args* args);

typedef struct PJRT_Client_CreateBuffersForAsyncHostToDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_ShapeSpec* shape_specs;
  size_t num_shape_specs;
  PJRT_Buffer_MemoryLayout** device_layouts;  // may be null
  size_t num_device_layouts;
  PJRT_Memory* memory;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;  // out
} PJRT_Client_CreateBuffersForAsyncHostToDevice_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_CreateBuffersForAsyncHostToDevice_Args, transfer_manager);
typedef PJRT_Error* PJRT_Client_CreateBuffersForAsyncHostToDevice(
    PJRT_Client_CreateBuffersForAsyncHostToDevice_Args* args);

typedef struct PJRT_Client_CreateUninitializedBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Device* device;
  PJRT_Memory* memory;  // wins over device when set
  PJRT_Buffer* buffer;  // out
} PJRT_Client_CreateUninitializedBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_CreateUninitializedBuffer_Args, buffer);
typedef PJRT_Error* PJRT_Client_CreateUninitializedBuffer(
    PJRT_Client_CreateUninitializedBuffer_Args* args);

// A buffer that holds no memory, only an error; executing with it fails with that error.
typedef struct PJRT_Client_CreateErrorBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Memory* memory;
  PJRT_Buffer* buffer;             // out
  const PJRT_NamedValue* payload;  // [0.103]
  size_t num_payload;
} PJRT_Client_CreateErrorBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_CreateErrorBuffer_Args, num_payload);
typedef PJRT_Error* PJRT_Client_CreateErrorBuffer(PJRT_Client_CreateErrorBuffer_Args* args);

typedef struct PJRT_Client_CreateAliasBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Memory* memory;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Buffer* alias_buffer;                                 // out
  PJRT_FulfillAliasBufferCallback* fulfill_alias_buffer_cb;  // out
} PJRT_Client_CreateAliasBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_CreateAliasBuffer_Args, fulfill_alias_buffer_cb);
typedef PJRT_Error* PJRT_Client_CreateAliasBuffer(PJRT_Client_CreateAliasBuffer_Args* args);

typedef struct PJRT_Client_FulfillAliasBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Buffer* buffer;
  PJRT_Error_Code status_code;
  const char* error_message;
  size_t error_message_size;
  PJRT_FulfillAliasBufferCallback* fulfill_alias_buffer_cb;
} PJRT_Client_FulfillAliasBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Client_FulfillAliasBuffer_Args, fulfill_alias_buffer_cb);
typedef PJRT_Error* PJRT_Client_FulfillAliasBuffer(PJRT_Client_FulfillAliasBuffer_Args* args);

// ------------------------------------------------------------ AsyncHostToDeviceTransferManager_*

typedef struct PJRT_AsyncHostToDeviceTransferManager_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;  // may be null
} PJRT_AsyncHostToDeviceTransferManager_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_Destroy_Args, transfer_manager);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_Destroy(
    PJRT_AsyncHostToDeviceTransferManager_Destroy_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_TransferData_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  int64_t offset;
  int64_t transfer_size;
  bool is_last_transfer;
  PJRT_Event* done_with_h2d_transfer;  // out
} PJRT_AsyncHostToDeviceTransferManager_TransferData_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_TransferData_Args, done_with_h2d_transfer);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_TransferData(
    PJRT_AsyncHostToDeviceTransferManager_TransferData_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Buffer* buffer_out;  // out
} PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args, buffer_out);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer(
    PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_Device_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  PJRT_Device* device_out;  // out
} PJRT_AsyncHostToDeviceTransferManager_Device_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_Device_Args, device_out);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_Device(
    PJRT_AsyncHostToDeviceTransferManager_Device_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  size_t buffer_count;  // out
} PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args, buffer_count);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_BufferCount(
    PJRT_AsyncHostToDeviceTransferManager_BufferCount_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  size_t buffer_size;  // out
} PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args, buffer_size);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_BufferSize(
    PJRT_AsyncHostToDeviceTransferManager_BufferSize_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args, error_message_size);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_SetBufferError(
    PJRT_AsyncHostToDeviceTransferManager_SetBufferError_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  const PJRT_NamedValue* transfer_metadata;
  size_t num_metadata;
} PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args, num_metadata);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_AddMetadata(
    PJRT_AsyncHostToDeviceTransferManager_AddMetadata_Args* args);

typedef struct PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncHostToDeviceTransferManager* transfer_manager;
  int buffer_index;
  const void* data;
  const int64_t* shape_dims;
  size_t shape_num_dims;
  PJRT_Buffer_Type shape_element_type;
  PJRT_Buffer_MemoryLayout* shape_layout;
  PJRT_Event* done_with_h2d_transfer;  // out
} PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args,
                   done_with_h2d_transfer);
typedef PJRT_Error* PJRT_AsyncHostToDeviceTransferManager_TransferLiteral(
    PJRT_AsyncHostToDeviceTransferManager_TransferLiteral_Args* args);

// ------------------------------------------------------------ DeviceDescription_*

typedef struct PJRT_DeviceDescription_Id_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  int id;  // out; unique across all processes
} PJRT_DeviceDescription_Id_Args;
PJRT_STRUCT_TRAITS(PJRT_DeviceDescription_Id_Args, id);
typedef PJRT_Error* PJRT_DeviceDescription_Id(PJRT_DeviceDescription_Id_Args* args);

typedef struct PJRT_DeviceDescription_ProcessIndex_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  int process_index;  // out
} PJRT_DeviceDescription_ProcessIndex_Args;
PJRT_STRUCT_TRAITS(PJRT_DeviceDescription_ProcessIndex_Args, process_index);
typedef PJRT_Error* PJRT_DeviceDescription_ProcessIndex(
    PJRT_DeviceDescription_ProcessIndex_Args* args);

// Note the order: count before pointer here.
typedef struct PJRT_DeviceDescription_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  size_t num_attributes;              // out
  const PJRT_NamedValue* attributes;  // out
} PJRT_DeviceDescription_Attributes_Args;
PJRT_STRUCT_TRAITS(PJRT_DeviceDescription_Attributes_Args, attributes);
typedef PJRT_Error* PJRT_DeviceDescription_Attributes(PJRT_DeviceDescription_Attributes_Args* args);

typedef struct PJRT_DeviceDescription_Kind_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* device_kind;  // out
  size_t device_kind_size;  // out
} PJRT_DeviceDescription_Kind_Args;
PJRT_STRUCT_TRAITS(PJRT_DeviceDescription_Kind_Args, device_kind_size);
typedef PJRT_Error* PJRT_DeviceDescription_Kind(PJRT_DeviceDescription_Kind_Args* args);

typedef struct PJRT_DeviceDescription_DebugString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* debug_string;  // out
  size_t debug_string_size;  // out
} PJRT_DeviceDescription_DebugString_Args;
PJRT_STRUCT_TRAITS(PJRT_DeviceDescription_DebugString_Args, debug_string_size);
typedef PJRT_Error* PJRT_DeviceDescription_DebugString(
    PJRT_DeviceDescription_DebugString_Args* args);

typedef struct PJRT_DeviceDescription_ToString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_DeviceDescription* device_description;
  const char* to_string;  // out
  size_t to_string_size;  // out
} PJRT_DeviceDescription_ToString_Args;
PJRT_STRUCT_TRAITS(PJRT_DeviceDescription_ToString_Args, to_string_size);
typedef PJRT_Error* PJRT_DeviceDescription_ToString(PJRT_DeviceDescription_ToString_Args* args);

// ------------------------------------------------------------ Device_*

typedef struct PJRT_Device_GetDescription_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  PJRT_DeviceDescription* device_description;  // out
} PJRT_Device_GetDescription_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_GetDescription_Args, device_description);
typedef PJRT_Error* PJRT_Device_GetDescription(PJRT_Device_GetDescription_Args* args);

typedef struct PJRT_Device_IsAddressable_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  bool is_addressable;  // out
} PJRT_Device_IsAddressable_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_IsAddressable_Args, is_addressable);
typedef PJRT_Error* PJRT_Device_IsAddressable(PJRT_Device_IsAddressable_Args* args);

typedef struct PJRT_Device_LocalHardwareId_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  int local_hardware_id;  // out; -1 if none
} PJRT_Device_LocalHardwareId_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_LocalHardwareId_Args, local_hardware_id);
typedef PJRT_Error* PJRT_Device_LocalHardwareId(PJRT_Device_LocalHardwareId_Args* args);

typedef struct PJRT_Device_AddressableMemories_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  PJRT_Memory* const* memories;  // out; lives as long as device
  size_t num_memories;           // out
} PJRT_Device_AddressableMemories_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_AddressableMemories_Args, num_memories);
typedef PJRT_Error* PJRT_Device_AddressableMemories(PJRT_Device_AddressableMemories_Args* args);

typedef struct PJRT_Device_DefaultMemory_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  PJRT_Memory* memory;  // out
} PJRT_Device_DefaultMemory_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_DefaultMemory_Args, memory);
typedef PJRT_Error* PJRT_Device_DefaultMemory(PJRT_Device_DefaultMemory_Args* args);

// Only bytes_in_use is required; every other stat has an *_is_set flag we must write.
typedef struct PJRT_Device_MemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  int64_t bytes_in_use;  // out
  int64_t peak_bytes_in_use;
  bool peak_bytes_in_use_is_set;
  int64_t num_allocs;
  bool num_allocs_is_set;
  int64_t largest_alloc_size;
  bool largest_alloc_size_is_set;
  int64_t bytes_limit;
  bool bytes_limit_is_set;
  int64_t bytes_reserved;
  bool bytes_reserved_is_set;
  int64_t peak_bytes_reserved;
  bool peak_bytes_reserved_is_set;
  int64_t bytes_reservable_limit;
  bool bytes_reservable_limit_is_set;
  int64_t largest_free_block_bytes;
  bool largest_free_block_bytes_is_set;
  int64_t pool_bytes;
  bool pool_bytes_is_set;
  int64_t peak_pool_bytes;
  bool peak_pool_bytes_is_set;
  int64_t peak_allocated_bytes;      // [0.113]
  bool peak_allocated_bytes_is_set;  // [0.113]
} PJRT_Device_MemoryStats_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_MemoryStats_Args, peak_pool_bytes_is_set);
typedef PJRT_Error* PJRT_Device_MemoryStats(PJRT_Device_MemoryStats_Args* args);

typedef struct PJRT_Device_ClearMemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
} PJRT_Device_ClearMemoryStats_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_ClearMemoryStats_Args, device);
typedef PJRT_Error* PJRT_Device_ClearMemoryStats(PJRT_Device_ClearMemoryStats_Args* args);

// Fails the oldest unfinished execution with `launch_id` on this device.
typedef struct PJRT_Device_PoisonExecution_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  int32_t launch_id;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
  bool poisoned;                   // out
  const PJRT_NamedValue* payload;  // [0.100]
  size_t num_payload;
} PJRT_Device_PoisonExecution_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_PoisonExecution_Args, num_payload);
typedef PJRT_Error* PJRT_Device_PoisonExecution(PJRT_Device_PoisonExecution_Args* args);

// Called by jaxlib at minor >= 92; attributes_deleter must be set (it is called).
typedef struct PJRT_Device_GetAttributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  const PJRT_NamedValue* attributes;                                      // out
  size_t num_attributes;                                                  // out
  PJRT_Device_Attributes* device_attributes;                              // out: backing
  void (*attributes_deleter)(PJRT_Device_Attributes* device_attributes);  // out
} PJRT_Device_GetAttributes_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_GetAttributes_Args, attributes_deleter);
typedef PJRT_Error* PJRT_Device_GetAttributes(PJRT_Device_GetAttributes_Args* args);

// Called by jaxlib at minor >= 86; an error here is fatal to jaxlib.
typedef struct PJRT_Device_CreateAsyncTrackingEvent_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Device* device;
  const char* description;
  size_t description_size;
  PJRT_AsyncTrackingEvent* event;  // out
} PJRT_Device_CreateAsyncTrackingEvent_Args;
PJRT_STRUCT_TRAITS(PJRT_Device_CreateAsyncTrackingEvent_Args, event);
typedef PJRT_Error* PJRT_Device_CreateAsyncTrackingEvent(
    PJRT_Device_CreateAsyncTrackingEvent_Args* args);

typedef struct PJRT_AsyncTrackingEvent_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_AsyncTrackingEvent* event;
} PJRT_AsyncTrackingEvent_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_AsyncTrackingEvent_Destroy_Args, event);
typedef PJRT_Error* PJRT_AsyncTrackingEvent_Destroy(PJRT_AsyncTrackingEvent_Destroy_Args* args);

// ------------------------------------------------------------ Memory_*

typedef struct PJRT_Memory_Id_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  int id;  // out
} PJRT_Memory_Id_Args;
PJRT_STRUCT_TRAITS(PJRT_Memory_Id_Args, id);
typedef PJRT_Error* PJRT_Memory_Id(PJRT_Memory_Id_Args* args);

// e.g. "device", "pinned_host", "unpinned_host".
typedef struct PJRT_Memory_Kind_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  const char* kind;  // out
  size_t kind_size;  // out
} PJRT_Memory_Kind_Args;
PJRT_STRUCT_TRAITS(PJRT_Memory_Kind_Args, kind_size);
typedef PJRT_Error* PJRT_Memory_Kind(PJRT_Memory_Kind_Args* args);

typedef struct PJRT_Memory_Kind_Id_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  int kind_id;  // out
} PJRT_Memory_Kind_Id_Args;
PJRT_STRUCT_TRAITS(PJRT_Memory_Kind_Id_Args, kind_id);
typedef PJRT_Error* PJRT_Memory_Kind_Id(PJRT_Memory_Kind_Id_Args* args);

typedef struct PJRT_Memory_DebugString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  const char* debug_string;  // out
  size_t debug_string_size;  // out
} PJRT_Memory_DebugString_Args;
PJRT_STRUCT_TRAITS(PJRT_Memory_DebugString_Args, debug_string_size);
typedef PJRT_Error* PJRT_Memory_DebugString(PJRT_Memory_DebugString_Args* args);

typedef struct PJRT_Memory_ToString_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  const char* to_string;  // out
  size_t to_string_size;  // out
} PJRT_Memory_ToString_Args;
PJRT_STRUCT_TRAITS(PJRT_Memory_ToString_Args, to_string_size);
typedef PJRT_Error* PJRT_Memory_ToString(PJRT_Memory_ToString_Args* args);

typedef struct PJRT_Memory_AddressableByDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Memory* memory;
  PJRT_Device* const* devices;  // out
  size_t num_devices;           // out
} PJRT_Memory_AddressableByDevices_Args;
PJRT_STRUCT_TRAITS(PJRT_Memory_AddressableByDevices_Args, num_devices);
typedef PJRT_Error* PJRT_Memory_AddressableByDevices(PJRT_Memory_AddressableByDevices_Args* args);

// ------------------------------------------------------------ ExecuteContext_*

typedef struct PJRT_ExecuteContext_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context;  // out
} PJRT_ExecuteContext_Create_Args;
PJRT_STRUCT_TRAITS(PJRT_ExecuteContext_Create_Args, context);
typedef PJRT_Error* PJRT_ExecuteContext_Create(PJRT_ExecuteContext_Create_Args* args);

typedef struct PJRT_ExecuteContext_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_ExecuteContext* context;  // may be null
} PJRT_ExecuteContext_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_ExecuteContext_Destroy_Args, context);
typedef PJRT_Error* PJRT_ExecuteContext_Destroy(PJRT_ExecuteContext_Destroy_Args* args);

// ------------------------------------------------------------ Executable_* (unloaded)

typedef struct PJRT_Executable_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;  // may be null
} PJRT_Executable_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_Destroy_Args, executable);
typedef PJRT_Error* PJRT_Executable_Destroy(PJRT_Executable_Destroy_Args* args);

typedef struct PJRT_Executable_Name_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  const char* executable_name;  // out; owned by executable
  size_t executable_name_size;  // out
} PJRT_Executable_Name_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_Name_Args, executable_name_size);
typedef PJRT_Error* PJRT_Executable_Name(PJRT_Executable_Name_Args* args);

typedef struct PJRT_Executable_NumReplicas_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_replicas;  // out
} PJRT_Executable_NumReplicas_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_NumReplicas_Args, num_replicas);
typedef PJRT_Error* PJRT_Executable_NumReplicas(PJRT_Executable_NumReplicas_Args* args);

typedef struct PJRT_Executable_NumPartitions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_partitions;  // out
} PJRT_Executable_NumPartitions_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_NumPartitions_Args, num_partitions);
typedef PJRT_Error* PJRT_Executable_NumPartitions(PJRT_Executable_NumPartitions_Args* args);

typedef struct PJRT_Executable_NumOutputs_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;  // out: per device
} PJRT_Executable_NumOutputs_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_NumOutputs_Args, num_outputs);
typedef PJRT_Error* PJRT_Executable_NumOutputs(PJRT_Executable_NumOutputs_Args* args);

typedef struct PJRT_Executable_SizeOfGeneratedCodeInBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  int64_t size_in_bytes;  // out
} PJRT_Executable_SizeOfGeneratedCodeInBytes_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args, size_in_bytes);
typedef PJRT_Error* PJRT_Executable_SizeOfGeneratedCodeInBytes(
    PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args);

typedef struct PJRT_Executable_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  const char* executable_fingerprint;  // out; owned by executable
  size_t executable_fingerprint_size;  // out
} PJRT_Executable_Fingerprint_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_Fingerprint_Args, executable_fingerprint_size);
typedef PJRT_Error* PJRT_Executable_Fingerprint(PJRT_Executable_Fingerprint_Args* args);

// Note the order: count before pointer here.
typedef struct PJRT_Executable_GetCostAnalysis_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_properties;              // out
  const PJRT_NamedValue* properties;  // out; owned by executable
} PJRT_Executable_GetCostAnalysis_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_GetCostAnalysis_Args, properties);
typedef PJRT_Error* PJRT_Executable_GetCostAnalysis(PJRT_Executable_GetCostAnalysis_Args* args);

// All fields after `executable` are out.
typedef struct PJRT_Executable_GetCompiledMemoryStats_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  int64_t generated_code_size_in_bytes;
  int64_t argument_size_in_bytes;
  int64_t output_size_in_bytes;
  int64_t alias_size_in_bytes;
  int64_t temp_size_in_bytes;
  int64_t host_generated_code_size_in_bytes;
  int64_t host_argument_size_in_bytes;
  int64_t host_output_size_in_bytes;
  int64_t host_alias_size_in_bytes;
  int64_t host_temp_size_in_bytes;
  int64_t peak_memory_in_bytes;
  int64_t total_size_in_bytes;
  int64_t total_allocation_bytes;    // [0.104]
  int64_t indefinite_allocations;    // [0.104]
  int64_t peak_unpadded_heap_bytes;  // [0.104]
} PJRT_Executable_GetCompiledMemoryStats_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_GetCompiledMemoryStats_Args, peak_unpadded_heap_bytes);
typedef PJRT_Error* PJRT_Executable_GetCompiledMemoryStats(
    PJRT_Executable_GetCompiledMemoryStats_Args* args);

typedef struct PJRT_Executable_OutputElementTypes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  PJRT_Buffer_Type* output_types;  // out; owned by executable
  size_t num_output_types;         // out
} PJRT_Executable_OutputElementTypes_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_OutputElementTypes_Args, num_output_types);
typedef PJRT_Error* PJRT_Executable_OutputElementTypes(
    PJRT_Executable_OutputElementTypes_Args* args);

// All outputs' dims concatenated; dim_sizes[i] = rank of output i.
typedef struct PJRT_Executable_OutputDimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;       // out
  const int64_t* dims;      // out
  const size_t* dim_sizes;  // out
} PJRT_Executable_OutputDimensions_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_OutputDimensions_Args, dim_sizes);
typedef PJRT_Error* PJRT_Executable_OutputDimensions(PJRT_Executable_OutputDimensions_Args* args);

typedef struct PJRT_Executable_ParameterMemoryKinds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_parameters;            // out
  const char* const* memory_kinds;  // out
  const size_t* memory_kind_sizes;  // out
} PJRT_Executable_ParameterMemoryKinds_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_ParameterMemoryKinds_Args, memory_kind_sizes);
typedef PJRT_Error* PJRT_Executable_ParameterMemoryKinds(
    PJRT_Executable_ParameterMemoryKinds_Args* args);

typedef struct PJRT_Executable_OutputMemoryKinds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t num_outputs;               // out
  const char* const* memory_kinds;  // out
  const size_t* memory_kind_sizes;  // out
} PJRT_Executable_OutputMemoryKinds_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_OutputMemoryKinds_Args, memory_kind_sizes);
typedef PJRT_Error* PJRT_Executable_OutputMemoryKinds(PJRT_Executable_OutputMemoryKinds_Args* args);

// Two-call protocol: first with program->code == null to learn code_size, then with a buffer.
typedef struct PJRT_Executable_OptimizedProgram_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  PJRT_Program* program;  // in/out
} PJRT_Executable_OptimizedProgram_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_OptimizedProgram_Args, program);
typedef PJRT_Error* PJRT_Executable_OptimizedProgram(PJRT_Executable_OptimizedProgram_Args* args);

// serialized_bytes is backed by serialized_executable, freed by calling the deleter once.
typedef struct PJRT_Executable_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_Executable* executable;
  const char* serialized_bytes;                                            // out
  size_t serialized_bytes_size;                                            // out
  PJRT_SerializedExecutable* serialized_executable;                        // out
  void (*serialized_executable_deleter)(PJRT_SerializedExecutable* exec);  // out
} PJRT_Executable_Serialize_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_Serialize_Args, serialized_executable_deleter);
typedef PJRT_Error* PJRT_Executable_Serialize(PJRT_Executable_Serialize_Args* args);

// Same backing/deleter protocol as Serialize. jaxlib >= minor 87 calls it: keep non-null.
typedef struct PJRT_Executable_GetCompileOptions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  const char* serialized_bytes;                                                        // out
  size_t serialized_bytes_size;                                                        // out
  PJRT_SerializedCompileOptions* serialized_compile_options;                           // out
  void (*serialized_compile_options_deleter)(PJRT_SerializedCompileOptions* options);  // out
} PJRT_Executable_GetCompileOptions_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_GetCompileOptions_Args, serialized_compile_options_deleter);
typedef PJRT_Error* PJRT_Executable_GetCompileOptions(PJRT_Executable_GetCompileOptions_Args* args);

typedef struct PJRT_Executable_DeserializeAndLoad_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  const char* serialized_executable;
  size_t serialized_executable_size;
  PJRT_LoadedExecutable* loaded_executable;           // out
  const char* overridden_serialized_compile_options;  // may be null: use the stored options
  size_t overridden_serialized_compile_options_size;
  PJRT_LoadOptions* load_options;  // [0.111]
} PJRT_Executable_DeserializeAndLoad_Args;
PJRT_STRUCT_TRAITS(PJRT_Executable_DeserializeAndLoad_Args,
                   overridden_serialized_compile_options_size);
typedef PJRT_Error* PJRT_Executable_DeserializeAndLoad(
    PJRT_Executable_DeserializeAndLoad_Args* args);

// ------------------------------------------------------------ LoadedExecutable_*

typedef struct PJRT_LoadedExecutable_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;  // may be null; implies Delete
} PJRT_LoadedExecutable_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_Destroy_Args, executable);
typedef PJRT_Error* PJRT_LoadedExecutable_Destroy(PJRT_LoadedExecutable_Destroy_Args* args);

// Returns a new PJRT_Executable the caller destroys with Executable_Destroy.
typedef struct PJRT_LoadedExecutable_GetExecutable_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* loaded_executable;
  PJRT_Executable* executable;  // out
} PJRT_LoadedExecutable_GetExecutable_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_GetExecutable_Args, executable);
typedef PJRT_Error* PJRT_LoadedExecutable_GetExecutable(
    PJRT_LoadedExecutable_GetExecutable_Args* args);

typedef struct PJRT_LoadedExecutable_AddressableDevices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_Device* const* addressable_devices;  // out
  size_t num_addressable_devices;           // out
} PJRT_LoadedExecutable_AddressableDevices_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_AddressableDevices_Args, num_addressable_devices);
typedef PJRT_Error* PJRT_LoadedExecutable_AddressableDevices(
    PJRT_LoadedExecutable_AddressableDevices_Args* args);

// jaxlib CHECK-fails if this slot errors.
typedef struct PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  PJRT_LogicalDeviceIds* addressable_device_logical_ids;  // out
  size_t num_addressable_device_logical_ids;              // out
} PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args,
                   num_addressable_device_logical_ids);
typedef PJRT_Error* PJRT_LoadedExecutable_AddressableDeviceLogicalIds(
    PJRT_LoadedExecutable_AddressableDeviceLogicalIds_Args* args);

// Serialized xla.DeviceAssignmentProto; backing/deleter protocol as Executable_Serialize.
typedef struct PJRT_LoadedExecutable_GetDeviceAssignment_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  const char* serialized_bytes;                                                       // out
  size_t serialized_bytes_size;                                                       // out
  PJRT_DeviceAssignmentSerialized* serialized_device_assignment;                      // out
  void (*serialized_device_assignment_deleter)(PJRT_DeviceAssignmentSerialized* da);  // out
} PJRT_LoadedExecutable_GetDeviceAssignment_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_GetDeviceAssignment_Args,
                   serialized_device_assignment_deleter);
typedef PJRT_Error* PJRT_LoadedExecutable_GetDeviceAssignment(
    PJRT_LoadedExecutable_GetDeviceAssignment_Args* args);

typedef struct PJRT_LoadedExecutable_Delete_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
} PJRT_LoadedExecutable_Delete_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_Delete_Args, executable);
typedef PJRT_Error* PJRT_LoadedExecutable_Delete(PJRT_LoadedExecutable_Delete_Args* args);

typedef struct PJRT_LoadedExecutable_IsDeleted_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  bool is_deleted;  // out
} PJRT_LoadedExecutable_IsDeleted_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_IsDeleted_Args, is_deleted);
typedef PJRT_Error* PJRT_LoadedExecutable_IsDeleted(PJRT_LoadedExecutable_IsDeleted_Args* args);

// argument_lists[d][a]; output_lists[d] is a caller-allocated array of num_outputs slots that
// the plugin fills with new buffers. device_complete_events, if non-null, has num_devices
// slots the plugin fills (not written when Execute returns an error).
typedef struct PJRT_LoadedExecutable_Execute_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;  // jaxlib passes a non-null profiler chain here
  PJRT_LoadedExecutable* executable;
  PJRT_ExecuteOptions* options;
  PJRT_Buffer* const* const* argument_lists;
  size_t num_devices;
  size_t num_args;
  PJRT_Buffer** const* output_lists;    // in/out
  PJRT_Event** device_complete_events;  // in/out, may be null
  PJRT_Device* execute_device;          // may be null: run on the compiled devices
} PJRT_LoadedExecutable_Execute_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_Execute_Args, execute_device);
typedef PJRT_Error* PJRT_LoadedExecutable_Execute(PJRT_LoadedExecutable_Execute_Args* args);

// Deprecated in favour of Executable_Fingerprint.
typedef struct PJRT_LoadedExecutable_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_LoadedExecutable* executable;
  const char* executable_fingerprint;  // out
  size_t executable_fingerprint_size;  // out
} PJRT_LoadedExecutable_Fingerprint_Args;
PJRT_STRUCT_TRAITS(PJRT_LoadedExecutable_Fingerprint_Args, executable_fingerprint_size);
typedef PJRT_Error* PJRT_LoadedExecutable_Fingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args);

// ------------------------------------------------------------ Buffer_*

typedef struct PJRT_Buffer_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;  // may be null; implies Delete
} PJRT_Buffer_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_Destroy_Args, buffer);
typedef PJRT_Error* PJRT_Buffer_Destroy(PJRT_Buffer_Destroy_Args* args);

typedef struct PJRT_Buffer_ElementType_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type type;  // out
} PJRT_Buffer_ElementType_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_ElementType_Args, type);
typedef PJRT_Error* PJRT_Buffer_ElementType(PJRT_Buffer_ElementType_Args* args);

typedef struct PJRT_Buffer_Dimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const int64_t* dims;  // out; lives as long as buffer
  size_t num_dims;      // out
} PJRT_Buffer_Dimensions_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_Dimensions_Args, num_dims);
typedef PJRT_Error* PJRT_Buffer_Dimensions(PJRT_Buffer_Dimensions_Args* args);

typedef struct PJRT_Buffer_UnpaddedDimensions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const int64_t* unpadded_dims;  // out
  size_t num_dims;               // out
} PJRT_Buffer_UnpaddedDimensions_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_UnpaddedDimensions_Args, num_dims);
typedef PJRT_Error* PJRT_Buffer_UnpaddedDimensions(PJRT_Buffer_UnpaddedDimensions_Args* args);

typedef struct PJRT_Buffer_DynamicDimensionIndices_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  const size_t* dynamic_dim_indices;  // out
  size_t num_dynamic_dims;            // out
} PJRT_Buffer_DynamicDimensionIndices_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_DynamicDimensionIndices_Args, num_dynamic_dims);
typedef PJRT_Error* PJRT_Buffer_DynamicDimensionIndices(
    PJRT_Buffer_DynamicDimensionIndices_Args* args);

// Deprecated (the Layouts extension replaces it). `layout` is embedded, not a pointer.
typedef struct PJRT_Buffer_GetMemoryLayout_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_MemoryLayout layout;  // out; arrays owned by buffer
} PJRT_Buffer_GetMemoryLayout_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_GetMemoryLayout_Args, layout);
typedef PJRT_Error* PJRT_Buffer_GetMemoryLayout(PJRT_Buffer_GetMemoryLayout_Args* args);

// dst == null: only report the needed size in dst_size. Otherwise copy asynchronously;
// `event` becomes ready when dst holds the data.
typedef struct PJRT_Buffer_ToHostBuffer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* src;
  PJRT_Buffer_MemoryLayout* host_layout;  // may be null: src's layout
  void* dst;                              // may be null (size query)
  size_t dst_size;                        // in/out
  PJRT_Event* event;                      // out
} PJRT_Buffer_ToHostBuffer_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_ToHostBuffer_Args, event);
typedef PJRT_Error* PJRT_Buffer_ToHostBuffer(PJRT_Buffer_ToHostBuffer_Args* args);

typedef struct PJRT_Buffer_OnDeviceSizeInBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  size_t on_device_size_in_bytes;  // out
} PJRT_Buffer_OnDeviceSizeInBytes_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_OnDeviceSizeInBytes_Args, on_device_size_in_bytes);
typedef PJRT_Error* PJRT_Buffer_OnDeviceSizeInBytes(PJRT_Buffer_OnDeviceSizeInBytes_Args* args);

// Releases the memory (after pending work); the handle stays valid for IsDeleted/Destroy.
typedef struct PJRT_Buffer_Delete_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
} PJRT_Buffer_Delete_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_Delete_Args, buffer);
typedef PJRT_Error* PJRT_Buffer_Delete(PJRT_Buffer_Delete_Args* args);

typedef struct PJRT_Buffer_IsDeleted_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  bool is_deleted;  // out
} PJRT_Buffer_IsDeleted_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_IsDeleted_Args, is_deleted);
typedef PJRT_Error* PJRT_Buffer_IsDeleted(PJRT_Buffer_IsDeleted_Args* args);

typedef struct PJRT_Buffer_CopyRawToHost_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  void* dst;
  int64_t offset;
  int64_t transfer_size;
  PJRT_Event* event;  // out
} PJRT_Buffer_CopyRawToHost_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_CopyRawToHost_Args, event);
typedef PJRT_Error* PJRT_Buffer_CopyRawToHost(PJRT_Buffer_CopyRawToHost_Args* args);

// Passed by the caller to future_ready_callback once it knows dst (or an error). No
// extension_start.
typedef struct PJRT_Buffer_CopyRawToHostFuture_Callback_Args {
  size_t struct_size;
  void* callback_data;  // the value the plugin returned
  PJRT_Error_Code error_code;
  const char* error_message;  // only when error_code != OK
  size_t error_message_size;
  void* dst;  // only when error_code == OK
} PJRT_Buffer_CopyRawToHostFuture_Callback_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_CopyRawToHostFuture_Callback_Args, dst);

typedef struct PJRT_Buffer_CopyRawToHostFuture_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  int64_t offset;
  int64_t transfer_size;
  PJRT_Event* event;                                                                   // out
  void* callback_data;                                                                 // out
  void (*future_ready_callback)(PJRT_Buffer_CopyRawToHostFuture_Callback_Args* args);  // out
} PJRT_Buffer_CopyRawToHostFuture_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_CopyRawToHostFuture_Args, future_ready_callback);
typedef PJRT_Error* PJRT_Buffer_CopyRawToHostFuture(PJRT_Buffer_CopyRawToHostFuture_Args* args);

typedef struct PJRT_Buffer_CopyToDevice_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Device* dst_device;
  PJRT_Buffer* dst_buffer;  // out
} PJRT_Buffer_CopyToDevice_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_CopyToDevice_Args, dst_buffer);
typedef PJRT_Error* PJRT_Buffer_CopyToDevice(PJRT_Buffer_CopyToDevice_Args* args);

typedef struct PJRT_Buffer_CopyToMemory_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Memory* dst_memory;
  PJRT_Buffer* dst_buffer;  // out
} PJRT_Buffer_CopyToMemory_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_CopyToMemory_Args, dst_buffer);
typedef PJRT_Error* PJRT_Buffer_CopyToMemory(PJRT_Buffer_CopyToMemory_Args* args);

// Reinterprets the bytes with a new type/shape/layout (null layout: default, not src's).
typedef struct PJRT_Buffer_Bitcast_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Buffer_Type element_type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_MemoryLayout* device_layout;
  PJRT_Buffer* out_buffer;  // out
} PJRT_Buffer_Bitcast_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_Bitcast_Args, out_buffer);
typedef PJRT_Error* PJRT_Buffer_Bitcast(PJRT_Buffer_Bitcast_Args* args);

typedef struct PJRT_Buffer_IsOnCpu_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  bool is_on_cpu;  // out
} PJRT_Buffer_IsOnCpu_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_IsOnCpu_Args, is_on_cpu);
typedef PJRT_Error* PJRT_Buffer_IsOnCpu(PJRT_Buffer_IsOnCpu_Args* args);

typedef struct PJRT_Buffer_Device_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Device* device;  // out
} PJRT_Buffer_Device_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_Device_Args, device);
typedef PJRT_Error* PJRT_Buffer_Device(PJRT_Buffer_Device_Args* args);

typedef struct PJRT_Buffer_Memory_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Memory* memory;  // out
} PJRT_Buffer_Memory_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_Memory_Args, memory);
typedef PJRT_Error* PJRT_Buffer_Memory(PJRT_Buffer_Memory_Args* args);

// New event (caller destroys) that is ready when the data is, or carries its error. On a
// deleted/donated buffer it is ready at once with an error.
typedef struct PJRT_Buffer_ReadyEvent_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Event* event;  // out
} PJRT_Buffer_ReadyEvent_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_ReadyEvent_Args, event);
typedef PJRT_Error* PJRT_Buffer_ReadyEvent(PJRT_Buffer_ReadyEvent_Args* args);

typedef struct PJRT_Buffer_UnsafePointer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  uintptr_t buffer_pointer;  // out
} PJRT_Buffer_UnsafePointer_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_UnsafePointer_Args, buffer_pointer);
typedef PJRT_Error* PJRT_Buffer_UnsafePointer(PJRT_Buffer_UnsafePointer_Args* args);

// While the external count is > 0 the data must not move or be freed (dlpack, numpy views).
typedef struct PJRT_Buffer_IncreaseExternalReferenceCount_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
} PJRT_Buffer_IncreaseExternalReferenceCount_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_IncreaseExternalReferenceCount_Args, buffer);
typedef PJRT_Error* PJRT_Buffer_IncreaseExternalReferenceCount(
    PJRT_Buffer_IncreaseExternalReferenceCount_Args* args);

typedef struct PJRT_Buffer_DecreaseExternalReferenceCount_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
} PJRT_Buffer_DecreaseExternalReferenceCount_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_DecreaseExternalReferenceCount_Args, buffer);
typedef PJRT_Error* PJRT_Buffer_DecreaseExternalReferenceCount(
    PJRT_Buffer_DecreaseExternalReferenceCount_Args* args);

typedef struct PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  void* device_memory_ptr;  // out
} PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args, device_memory_ptr);
typedef PJRT_Error* PJRT_Buffer_OpaqueDeviceMemoryDataPointer(
    PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args);

// Passed by the caller to dependency_ready_callback. No extension_start.
typedef struct PJRT_Buffer_DonateWithControlDependency_Callback_Args {
  size_t struct_size;
  void* callback_data;
  PJRT_Error_Code error_code;
  const char* error_message;
  size_t error_message_size;
} PJRT_Buffer_DonateWithControlDependency_Callback_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_DonateWithControlDependency_Callback_Args, error_message_size);

typedef struct PJRT_Buffer_DonateWithControlDependency_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  void* callback_data;  // out
  void (*dependency_ready_callback)(
      PJRT_Buffer_DonateWithControlDependency_Callback_Args* args);  // out
  PJRT_Buffer* out_buffer;                                           // out
} PJRT_Buffer_DonateWithControlDependency_Args;
PJRT_STRUCT_TRAITS(PJRT_Buffer_DonateWithControlDependency_Args, out_buffer);
typedef PJRT_Error* PJRT_Buffer_DonateWithControlDependency(
    PJRT_Buffer_DonateWithControlDependency_Args* args);

// ------------------------------------------------------------ CopyToDeviceStream_*

typedef struct PJRT_CopyToDeviceStream_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;  // may be null
} PJRT_CopyToDeviceStream_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_CopyToDeviceStream_Destroy_Args, stream);
typedef PJRT_Error* PJRT_CopyToDeviceStream_Destroy(PJRT_CopyToDeviceStream_Destroy_Args* args);

typedef struct PJRT_CopyToDeviceStream_AddChunk_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  PJRT_Chunk* chunk;              // the plugin takes ownership (calls chunk->deleter)
  PJRT_Event* transfer_complete;  // out
} PJRT_CopyToDeviceStream_AddChunk_Args;
PJRT_STRUCT_TRAITS(PJRT_CopyToDeviceStream_AddChunk_Args, transfer_complete);
typedef PJRT_Error* PJRT_CopyToDeviceStream_AddChunk(PJRT_CopyToDeviceStream_AddChunk_Args* args);

typedef struct PJRT_CopyToDeviceStream_TotalBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  int64_t total_bytes;  // out
} PJRT_CopyToDeviceStream_TotalBytes_Args;
PJRT_STRUCT_TRAITS(PJRT_CopyToDeviceStream_TotalBytes_Args, total_bytes);
typedef PJRT_Error* PJRT_CopyToDeviceStream_TotalBytes(
    PJRT_CopyToDeviceStream_TotalBytes_Args* args);

typedef struct PJRT_CopyToDeviceStream_GranuleSize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  int64_t granule_size_in_bytes;  // out
} PJRT_CopyToDeviceStream_GranuleSize_Args;
PJRT_STRUCT_TRAITS(PJRT_CopyToDeviceStream_GranuleSize_Args, granule_size_in_bytes);
typedef PJRT_Error* PJRT_CopyToDeviceStream_GranuleSize(
    PJRT_CopyToDeviceStream_GranuleSize_Args* args);

typedef struct PJRT_CopyToDeviceStream_CurrentBytes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_CopyToDeviceStream* stream;
  int64_t current_bytes;  // out
} PJRT_CopyToDeviceStream_CurrentBytes_Args;
PJRT_STRUCT_TRAITS(PJRT_CopyToDeviceStream_CurrentBytes_Args, current_bytes);
typedef PJRT_Error* PJRT_CopyToDeviceStream_CurrentBytes(
    PJRT_CopyToDeviceStream_CurrentBytes_Args* args);

// ------------------------------------------------------------ TopologyDescription_*, Compile

typedef struct PJRT_TopologyDescription_Create_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* topology_name;
  size_t topology_name_size;
  const PJRT_NamedValue* create_options;
  size_t num_options;
  PJRT_TopologyDescription* topology;  // out
} PJRT_TopologyDescription_Create_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_Create_Args, topology);
typedef PJRT_Error* PJRT_TopologyDescription_Create(PJRT_TopologyDescription_Create_Args* args);

typedef struct PJRT_TopologyDescription_Destroy_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;  // may be null
} PJRT_TopologyDescription_Destroy_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_Destroy_Args, topology);
typedef PJRT_Error* PJRT_TopologyDescription_Destroy(PJRT_TopologyDescription_Destroy_Args* args);

typedef struct PJRT_TopologyDescription_PlatformVersion_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const char* platform_version;  // out
  size_t platform_version_size;  // out
} PJRT_TopologyDescription_PlatformVersion_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_PlatformVersion_Args, platform_version_size);
typedef PJRT_Error* PJRT_TopologyDescription_PlatformVersion(
    PJRT_TopologyDescription_PlatformVersion_Args* args);

typedef struct PJRT_TopologyDescription_PlatformName_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const char* platform_name;  // out
  size_t platform_name_size;  // out
} PJRT_TopologyDescription_PlatformName_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_PlatformName_Args, platform_name_size);
typedef PJRT_Error* PJRT_TopologyDescription_PlatformName(
    PJRT_TopologyDescription_PlatformName_Args* args);

typedef struct PJRT_TopologyDescription_GetDeviceDescriptions_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  PJRT_DeviceDescription* const* descriptions;  // out; stable order, topology lifetime
  size_t num_descriptions;                      // out
} PJRT_TopologyDescription_GetDeviceDescriptions_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_GetDeviceDescriptions_Args, num_descriptions);
typedef PJRT_Error* PJRT_TopologyDescription_GetDeviceDescriptions(
    PJRT_TopologyDescription_GetDeviceDescriptions_Args* args);

typedef struct PJRT_TopologyDescription_Serialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const char* serialized_bytes;                                                       // out
  size_t serialized_bytes_size;                                                       // out
  PJRT_SerializedTopology* serialized_topology;                                       // out
  void (*serialized_topology_deleter)(PJRT_SerializedTopology* serialized_topology);  // out
} PJRT_TopologyDescription_Serialize_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_Serialize_Args, serialized_topology_deleter);
typedef PJRT_Error* PJRT_TopologyDescription_Serialize(
    PJRT_TopologyDescription_Serialize_Args* args);

typedef struct PJRT_TopologyDescription_Deserialize_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const char* serialized_topology;
  size_t serialized_topology_size;
  PJRT_TopologyDescription* topology;  // out
} PJRT_TopologyDescription_Deserialize_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_Deserialize_Args, topology);
typedef PJRT_Error* PJRT_TopologyDescription_Deserialize(
    PJRT_TopologyDescription_Deserialize_Args* args);

typedef struct PJRT_TopologyDescription_Attributes_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology;
  const PJRT_NamedValue* attributes;  // out
  size_t num_attributes;              // out
} PJRT_TopologyDescription_Attributes_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_Attributes_Args, num_attributes);
typedef PJRT_Error* PJRT_TopologyDescription_Attributes(
    PJRT_TopologyDescription_Attributes_Args* args);

// jax 0.10 always calls this (PITFALLS 5): keep it non-null.
typedef struct PJRT_TopologyDescription_Fingerprint_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  uint64_t fingerprint;  // out
} PJRT_TopologyDescription_Fingerprint_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_Fingerprint_Args, fingerprint);
typedef PJRT_Error* PJRT_TopologyDescription_Fingerprint(
    PJRT_TopologyDescription_Fingerprint_Args* args);

// Output: a serialized xla.ShapeProto freed with serialized_shape_deleter.
typedef struct PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  int memory_space_kind_id;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Buffer_Type element_type;
  const PJRT_Buffer_MemoryLayout* layout;         // may be null
  const char* serialized_shape;                   // out
  size_t serialized_shape_size;                   // out
  void (*serialized_shape_deleter)(const char*);  // out
} PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args,
                   serialized_shape_deleter);
typedef PJRT_Error* PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace(
    PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace_Args* args);

typedef struct PJRT_TopologyDescription_GetMemorySpaceKindIds_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const int* memory_space_kind_ids;  // out
  size_t num_memory_space_kind_ids;  // out
} PJRT_TopologyDescription_GetMemorySpaceKindIds_Args;
PJRT_STRUCT_TRAITS(PJRT_TopologyDescription_GetMemorySpaceKindIds_Args, num_memory_space_kind_ids);
typedef PJRT_Error* PJRT_TopologyDescription_GetMemorySpaceKindIds(
    PJRT_TopologyDescription_GetMemorySpaceKindIds_Args* args);

// Compiles without a client (client is an optional hint); result must be Client_Load'ed.
typedef struct PJRT_Compile_Args {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  const PJRT_TopologyDescription* topology;
  const PJRT_Program* program;
  const char* compile_options;
  size_t compile_options_size;
  PJRT_Client* client;          // may be null
  PJRT_Executable* executable;  // out
} PJRT_Compile_Args;
PJRT_STRUCT_TRAITS(PJRT_Compile_Args, executable);
typedef PJRT_Error* PJRT_Compile(PJRT_Compile_Args* args);

// ===================================================================== the table

// Slots 0..89 are the 0.57 reordering; 90.. were appended one minor at a time (the minor that
// added each is in slots.def). Slot i lives at byte 40 + 8 * i.
typedef struct PJRT_Api {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Api_Version pjrt_api_version;

  ::PJRT_Error_Destroy* PJRT_Error_Destroy;
  ::PJRT_Error_Message* PJRT_Error_Message;
  ::PJRT_Error_GetCode* PJRT_Error_GetCode;
  ::PJRT_Plugin_Initialize* PJRT_Plugin_Initialize;
  ::PJRT_Plugin_Attributes* PJRT_Plugin_Attributes;
  ::PJRT_Event_Destroy* PJRT_Event_Destroy;
  ::PJRT_Event_IsReady* PJRT_Event_IsReady;
  ::PJRT_Event_Error* PJRT_Event_Error;
  ::PJRT_Event_Await* PJRT_Event_Await;
  ::PJRT_Event_OnReady* PJRT_Event_OnReady;
  ::PJRT_Client_Create* PJRT_Client_Create;  // 10
  ::PJRT_Client_Destroy* PJRT_Client_Destroy;
  ::PJRT_Client_PlatformName* PJRT_Client_PlatformName;
  ::PJRT_Client_ProcessIndex* PJRT_Client_ProcessIndex;
  ::PJRT_Client_PlatformVersion* PJRT_Client_PlatformVersion;
  ::PJRT_Client_Devices* PJRT_Client_Devices;
  ::PJRT_Client_AddressableDevices* PJRT_Client_AddressableDevices;
  ::PJRT_Client_LookupDevice* PJRT_Client_LookupDevice;
  ::PJRT_Client_LookupAddressableDevice* PJRT_Client_LookupAddressableDevice;
  ::PJRT_Client_AddressableMemories* PJRT_Client_AddressableMemories;
  ::PJRT_Client_Compile* PJRT_Client_Compile;  // 20
  ::PJRT_Client_DefaultDeviceAssignment* PJRT_Client_DefaultDeviceAssignment;
  ::PJRT_Client_BufferFromHostBuffer* PJRT_Client_BufferFromHostBuffer;
  ::PJRT_DeviceDescription_Id* PJRT_DeviceDescription_Id;
  ::PJRT_DeviceDescription_ProcessIndex* PJRT_DeviceDescription_ProcessIndex;
  ::PJRT_DeviceDescription_Attributes* PJRT_DeviceDescription_Attributes;
  ::PJRT_DeviceDescription_Kind* PJRT_DeviceDescription_Kind;
  ::PJRT_DeviceDescription_DebugString* PJRT_DeviceDescription_DebugString;
  ::PJRT_DeviceDescription_ToString* PJRT_DeviceDescription_ToString;
  ::PJRT_Device_GetDescription* PJRT_Device_GetDescription;
  ::PJRT_Device_IsAddressable* PJRT_Device_IsAddressable;  // 30
  ::PJRT_Device_LocalHardwareId* PJRT_Device_LocalHardwareId;
  ::PJRT_Device_AddressableMemories* PJRT_Device_AddressableMemories;
  ::PJRT_Device_DefaultMemory* PJRT_Device_DefaultMemory;
  ::PJRT_Device_MemoryStats* PJRT_Device_MemoryStats;
  ::PJRT_Memory_Id* PJRT_Memory_Id;
  ::PJRT_Memory_Kind* PJRT_Memory_Kind;
  ::PJRT_Memory_DebugString* PJRT_Memory_DebugString;
  ::PJRT_Memory_ToString* PJRT_Memory_ToString;
  ::PJRT_Memory_AddressableByDevices* PJRT_Memory_AddressableByDevices;
  ::PJRT_Executable_Destroy* PJRT_Executable_Destroy;  // 40
  ::PJRT_Executable_Name* PJRT_Executable_Name;
  ::PJRT_Executable_NumReplicas* PJRT_Executable_NumReplicas;
  ::PJRT_Executable_NumPartitions* PJRT_Executable_NumPartitions;
  ::PJRT_Executable_NumOutputs* PJRT_Executable_NumOutputs;
  ::PJRT_Executable_SizeOfGeneratedCodeInBytes* PJRT_Executable_SizeOfGeneratedCodeInBytes;
  ::PJRT_Executable_GetCostAnalysis* PJRT_Executable_GetCostAnalysis;
  ::PJRT_Executable_OutputMemoryKinds* PJRT_Executable_OutputMemoryKinds;
  ::PJRT_Executable_OptimizedProgram* PJRT_Executable_OptimizedProgram;
  ::PJRT_Executable_Serialize* PJRT_Executable_Serialize;
  ::PJRT_LoadedExecutable_Destroy* PJRT_LoadedExecutable_Destroy;  // 50
  ::PJRT_LoadedExecutable_GetExecutable* PJRT_LoadedExecutable_GetExecutable;
  ::PJRT_LoadedExecutable_AddressableDevices* PJRT_LoadedExecutable_AddressableDevices;
  ::PJRT_LoadedExecutable_Delete* PJRT_LoadedExecutable_Delete;
  ::PJRT_LoadedExecutable_IsDeleted* PJRT_LoadedExecutable_IsDeleted;
  ::PJRT_LoadedExecutable_Execute* PJRT_LoadedExecutable_Execute;
  ::PJRT_Executable_DeserializeAndLoad* PJRT_Executable_DeserializeAndLoad;
  ::PJRT_LoadedExecutable_Fingerprint* PJRT_LoadedExecutable_Fingerprint;
  ::PJRT_Buffer_Destroy* PJRT_Buffer_Destroy;
  ::PJRT_Buffer_ElementType* PJRT_Buffer_ElementType;
  ::PJRT_Buffer_Dimensions* PJRT_Buffer_Dimensions;  // 60
  ::PJRT_Buffer_UnpaddedDimensions* PJRT_Buffer_UnpaddedDimensions;
  ::PJRT_Buffer_DynamicDimensionIndices* PJRT_Buffer_DynamicDimensionIndices;
  ::PJRT_Buffer_GetMemoryLayout* PJRT_Buffer_GetMemoryLayout;
  ::PJRT_Buffer_OnDeviceSizeInBytes* PJRT_Buffer_OnDeviceSizeInBytes;
  ::PJRT_Buffer_Device* PJRT_Buffer_Device;
  ::PJRT_Buffer_Memory* PJRT_Buffer_Memory;
  ::PJRT_Buffer_Delete* PJRT_Buffer_Delete;
  ::PJRT_Buffer_IsDeleted* PJRT_Buffer_IsDeleted;
  ::PJRT_Buffer_CopyToDevice* PJRT_Buffer_CopyToDevice;
  ::PJRT_Buffer_ToHostBuffer* PJRT_Buffer_ToHostBuffer;  // 70
  ::PJRT_Buffer_IsOnCpu* PJRT_Buffer_IsOnCpu;
  ::PJRT_Buffer_ReadyEvent* PJRT_Buffer_ReadyEvent;
  ::PJRT_Buffer_UnsafePointer* PJRT_Buffer_UnsafePointer;
  ::PJRT_Buffer_IncreaseExternalReferenceCount* PJRT_Buffer_IncreaseExternalReferenceCount;
  ::PJRT_Buffer_DecreaseExternalReferenceCount* PJRT_Buffer_DecreaseExternalReferenceCount;
  ::PJRT_Buffer_OpaqueDeviceMemoryDataPointer* PJRT_Buffer_OpaqueDeviceMemoryDataPointer;
  ::PJRT_CopyToDeviceStream_Destroy* PJRT_CopyToDeviceStream_Destroy;
  ::PJRT_CopyToDeviceStream_AddChunk* PJRT_CopyToDeviceStream_AddChunk;
  ::PJRT_CopyToDeviceStream_TotalBytes* PJRT_CopyToDeviceStream_TotalBytes;
  ::PJRT_CopyToDeviceStream_GranuleSize* PJRT_CopyToDeviceStream_GranuleSize;  // 80
  ::PJRT_CopyToDeviceStream_CurrentBytes* PJRT_CopyToDeviceStream_CurrentBytes;
  ::PJRT_TopologyDescription_Create* PJRT_TopologyDescription_Create;
  ::PJRT_TopologyDescription_Destroy* PJRT_TopologyDescription_Destroy;
  ::PJRT_TopologyDescription_PlatformName* PJRT_TopologyDescription_PlatformName;
  ::PJRT_TopologyDescription_PlatformVersion* PJRT_TopologyDescription_PlatformVersion;
  ::PJRT_TopologyDescription_GetDeviceDescriptions* PJRT_TopologyDescription_GetDeviceDescriptions;
  ::PJRT_TopologyDescription_Serialize* PJRT_TopologyDescription_Serialize;
  ::PJRT_TopologyDescription_Attributes* PJRT_TopologyDescription_Attributes;
  ::PJRT_Compile* PJRT_Compile;
  // Appended after 0.57, in order of the minor that added them.
  ::PJRT_Executable_OutputElementTypes* PJRT_Executable_OutputElementTypes;  // 90
  ::PJRT_Executable_OutputDimensions* PJRT_Executable_OutputDimensions;
  ::PJRT_Buffer_CopyToMemory* PJRT_Buffer_CopyToMemory;
  ::PJRT_Client_CreateViewOfDeviceBuffer* PJRT_Client_CreateViewOfDeviceBuffer;
  ::PJRT_Executable_Fingerprint* PJRT_Executable_Fingerprint;
  ::PJRT_Client_TopologyDescription* PJRT_Client_TopologyDescription;
  ::PJRT_Executable_GetCompiledMemoryStats* PJRT_Executable_GetCompiledMemoryStats;
  ::PJRT_Memory_Kind_Id* PJRT_Memory_Kind_Id;
  ::PJRT_ExecuteContext_Create* PJRT_ExecuteContext_Create;
  ::PJRT_ExecuteContext_Destroy* PJRT_ExecuteContext_Destroy;
  ::PJRT_Buffer_CopyRawToHost* PJRT_Buffer_CopyRawToHost;  // 100
  ::PJRT_AsyncHostToDeviceTransferManager_Destroy* PJRT_AsyncHostToDeviceTransferManager_Destroy;
  ::PJRT_AsyncHostToDeviceTransferManager_TransferData*
      PJRT_AsyncHostToDeviceTransferManager_TransferData;
  ::PJRT_Client_CreateBuffersForAsyncHostToDevice* PJRT_Client_CreateBuffersForAsyncHostToDevice;
  ::PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer*
      PJRT_AsyncHostToDeviceTransferManager_RetrieveBuffer;
  ::PJRT_AsyncHostToDeviceTransferManager_Device* PJRT_AsyncHostToDeviceTransferManager_Device;
  ::PJRT_AsyncHostToDeviceTransferManager_BufferCount*
      PJRT_AsyncHostToDeviceTransferManager_BufferCount;
  ::PJRT_AsyncHostToDeviceTransferManager_BufferSize*
      PJRT_AsyncHostToDeviceTransferManager_BufferSize;
  ::PJRT_AsyncHostToDeviceTransferManager_SetBufferError*
      PJRT_AsyncHostToDeviceTransferManager_SetBufferError;
  ::PJRT_AsyncHostToDeviceTransferManager_AddMetadata*
      PJRT_AsyncHostToDeviceTransferManager_AddMetadata;
  ::PJRT_Client_DmaMap* PJRT_Client_DmaMap;  // 110
  ::PJRT_Client_DmaUnmap* PJRT_Client_DmaUnmap;
  ::PJRT_Client_CreateUninitializedBuffer* PJRT_Client_CreateUninitializedBuffer;
  ::PJRT_Client_UpdateGlobalProcessInfo* PJRT_Client_UpdateGlobalProcessInfo;
  ::PJRT_TopologyDescription_Deserialize* PJRT_TopologyDescription_Deserialize;
  ::PJRT_Client_CreateAliasBuffer* PJRT_Client_CreateAliasBuffer;
  ::PJRT_Client_FulfillAliasBuffer* PJRT_Client_FulfillAliasBuffer;
  ::PJRT_LoadedExecutable_GetDeviceAssignment* PJRT_LoadedExecutable_GetDeviceAssignment;
  ::PJRT_Client_CreateErrorBuffer* PJRT_Client_CreateErrorBuffer;
  ::PJRT_AsyncHostToDeviceTransferManager_TransferLiteral*
      PJRT_AsyncHostToDeviceTransferManager_TransferLiteral;
  ::PJRT_Buffer_CopyRawToHostFuture* PJRT_Buffer_CopyRawToHostFuture;  // 120
  ::PJRT_Device_PoisonExecution* PJRT_Device_PoisonExecution;
  ::PJRT_Device_CreateAsyncTrackingEvent* PJRT_Device_CreateAsyncTrackingEvent;
  ::PJRT_AsyncTrackingEvent_Destroy* PJRT_AsyncTrackingEvent_Destroy;
  ::PJRT_Executable_GetCompileOptions* PJRT_Executable_GetCompileOptions;
  ::PJRT_Buffer_DonateWithControlDependency* PJRT_Buffer_DonateWithControlDependency;
  ::PJRT_Event_Create* PJRT_Event_Create;
  ::PJRT_Event_Set* PJRT_Event_Set;
  ::PJRT_Device_GetAttributes* PJRT_Device_GetAttributes;
  ::PJRT_Client_Load* PJRT_Client_Load;
  ::PJRT_LoadedExecutable_AddressableDeviceLogicalIds*
      PJRT_LoadedExecutable_AddressableDeviceLogicalIds;  // 130
  ::PJRT_Buffer_Bitcast* PJRT_Buffer_Bitcast;
  ::PJRT_Error_ForEachPayload* PJRT_Error_ForEachPayload;
  ::PJRT_TopologyDescription_Fingerprint* PJRT_TopologyDescription_Fingerprint;
  ::PJRT_Executable_ParameterMemoryKinds* PJRT_Executable_ParameterMemoryKinds;
  ::PJRT_Device_ClearMemoryStats* PJRT_Device_ClearMemoryStats;
  ::PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace*
      PJRT_TopologyDescription_MakeCanonicalShapeForMemorySpace;
  ::PJRT_TopologyDescription_GetMemorySpaceKindIds*
      PJRT_TopologyDescription_GetMemorySpaceKindIds;  // 137
} PJRT_Api;
PJRT_STRUCT_TRAITS(PJRT_Api, PJRT_TopologyDescription_GetMemorySpaceKindIds);

}  // extern "C"

static_assert(sizeof(void*) == 8, "the PJRT layouts here assume LP64");
static_assert(PJRT_Api_STRUCT_SIZE == 1144, "PJRT_Api must have 138 slots at 0.110");
static_assert(offsetof(PJRT_Api, pjrt_api_version) == 16);
static_assert(offsetof(PJRT_Api, PJRT_Error_Destroy) == 40);
