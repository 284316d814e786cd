/* A stand-in for libcuda.so that records what C exported by kgc asks of the
 * CUDA driver, so that tests/test_export_c.py can run the generated host code
 * on a machine without a GPU and check each launch: the kernel, grid, block,
 * shared memory, stream and every parameter's value.
 *
 * Handles are small integers in disguise: module i is (CUmodule)(0x1000 + i),
 * its function (CUfunction)(0x2000 + i). */
#include <stdint.h>
#include <string.h>

#include <cuda.h>

#define MOCK_MAX 64
#define MOCK_MAX_PARAMS 32

typedef struct {
  uint64_t function, grid[3], block[3], shared, stream, num_params;
  uint64_t params[MOCK_MAX_PARAMS];
} mock_launch_record;

static int loads, unloads, fail_load_at = -1, shared_optin = 232448, static_shared = 0;
static const unsigned char *images[MOCK_MAX];
static char entries[MOCK_MAX][256];
static int max_dynamic_shared[MOCK_MAX], prefer_shared[MOCK_MAX];
static int unloaded[MOCK_MAX];
static int param_counts[MOCK_MAX];
static int param_sizes[MOCK_MAX][MOCK_MAX_PARAMS];  /* bytes; 0 for 8 (a pointer) */
static mock_launch_record launches[MOCK_MAX];
static int num_launches;
static uint64_t copies[MOCK_MAX][4];
static int num_copies;

/* -- what the test sets and reads ---------------------------------------- */

void mock_reset(void) {
  loads = unloads = num_launches = num_copies = 0;
  fail_load_at = -1;
  memset(unloaded, 0, sizeof unloaded);
  memset(max_dynamic_shared, 0, sizeof max_dynamic_shared);
  memset(prefer_shared, 0, sizeof prefer_shared);
  memset(param_sizes, 0, sizeof param_sizes);
}
void mock_fail_load_at(int index) { fail_load_at = index; }
void mock_set_shared(int optin, int static_bytes) {
  shared_optin = optin;
  static_shared = static_bytes;
}
/* How many parameters the launch of this number passes (the driver reads
 * them by the kernel's signature; the mock is told). */
void mock_set_param_count(int launch, int count) { param_counts[launch] = count; }
/* A parameter of 4 bytes (an i32, the dynamic extent's size); others are 8. */
void mock_set_param_size(int launch, int index, int bytes) { param_sizes[launch][index] = bytes; }
int mock_loads(void) { return loads; }
int mock_unloads(void) { return unloads; }
int mock_unloaded(int module) { return unloaded[module]; }
const unsigned char *mock_image(int module) { return images[module]; }
const char *mock_entry(int module) { return entries[module]; }
int mock_max_dynamic_shared(int module) { return max_dynamic_shared[module]; }
int mock_prefer_shared(int module) { return prefer_shared[module]; }
int mock_num_launches(void) { return num_launches; }
const mock_launch_record *mock_launch(int index) { return &launches[index]; }
int mock_num_copies(void) { return num_copies; }
const uint64_t *mock_copy(int index) { return copies[index]; }

/* -- the driver ---------------------------------------------------------- */

CUresult cuCtxGetDevice(CUdevice *device) {
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice device) {
  (void)device;
  if (attribute != CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) return CUDA_ERROR_INVALID_VALUE;
  *value = shared_optin;
  return CUDA_SUCCESS;
}

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  if (loads == fail_load_at) return CUDA_ERROR_NO_BINARY_FOR_GPU;
  images[loads] = image;
  *module = (CUmodule)(uintptr_t)(0x1000 + loads);
  ++loads;
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  uintptr_t index = (uintptr_t)module - 0x1000;
  strncpy(entries[index], name, sizeof entries[index] - 1);
  *function = (CUfunction)(uintptr_t)(0x2000 + index);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  unloaded[(uintptr_t)module - 0x1000] = 1;
  ++unloads;
  return CUDA_SUCCESS;
}

CUresult cuFuncSetCacheConfig(CUfunction function, CUfunc_cache config) {
  prefer_shared[(uintptr_t)function - 0x2000] = config == CU_FUNC_CACHE_PREFER_SHARED;
  return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attribute, CUfunction function) {
  (void)function;
  if (attribute != CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
  *value = static_shared;
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
  max_dynamic_shared[(uintptr_t)function - 0x2000] = value;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gridX, unsigned int gridY,
                        unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                        unsigned int blockZ, unsigned int shared, CUstream stream, void **params,
                        void **extra) {
  if (extra != NULL || num_launches == MOCK_MAX) return CUDA_ERROR_INVALID_VALUE;
  mock_launch_record *record = &launches[num_launches];
  record->function = (uintptr_t)function;
  record->grid[0] = gridX, record->grid[1] = gridY, record->grid[2] = gridZ;
  record->block[0] = blockX, record->block[1] = blockY, record->block[2] = blockZ;
  record->shared = shared;
  record->stream = (uintptr_t)stream;
  record->num_params = (uint64_t)param_counts[num_launches];
  for (int i = 0; i < param_counts[num_launches] && i < MOCK_MAX_PARAMS; ++i)
    record->params[i] = param_sizes[num_launches][i] == 4 ? *(const uint32_t *)params[i]
                                                          : *(const CUdeviceptr *)params[i];
  ++num_launches;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                           CUstream stream) {
  if (num_copies == MOCK_MAX) return CUDA_ERROR_INVALID_VALUE;
  copies[num_copies][0] = destination;
  copies[num_copies][1] = source;
  copies[num_copies][2] = bytes;
  copies[num_copies][3] = (uintptr_t)stream;
  ++num_copies;
  return CUDA_SUCCESS;
}
