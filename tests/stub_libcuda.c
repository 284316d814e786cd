/* A stand-in for libcuda.so that a whole C program links against, so that
 * the README's C example (its main.c and the code kgc exports) is built
 * and run on a machine without a GPU, and the arguments the program gives
 * the driver are checked as the driver would need them to be.
 *
 * Built as libcuda.so and found through LIBRARY_PATH and LD_LIBRARY_PATH.
 * cuMemAlloc hands out disjoint address ranges and records them. Every
 * launch's parameters are checked against the file named by the variable
 * STUB_CUDA_LAUNCHES, one line per launch in order, one number per
 * parameter: the bytes the kernel reads or writes through that pointer,
 * which must lie inside one live allocation (so a workspace that is null
 * or too small fails the launch), or 0 for a pointer that must be null.
 * A failed check returns CUDA_ERROR_INVALID_VALUE and says why on stderr.
 * No kernel runs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#define STUB_MAX_ALLOCATIONS 64
#define STUB_MAX_LAUNCHES 64
#define STUB_MAX_PARAMS 64

static struct {
  CUdeviceptr start;
  size_t bytes;
} allocations[STUB_MAX_ALLOCATIONS];
static int num_allocations, initialized, launches;
static CUdeviceptr next_address = 0x100000000ull;
static uint64_t expected[STUB_MAX_LAUNCHES][STUB_MAX_PARAMS];
static int expected_counts[STUB_MAX_LAUNCHES], num_expected = -1;

static void read_expectations(void) {
  if (num_expected >= 0) return;
  num_expected = 0;
  const char *path = getenv("STUB_CUDA_LAUNCHES");
  FILE *file = path ? fopen(path, "r") : NULL;
  if (file == NULL) return;
  char line[4096];
  while (num_expected < STUB_MAX_LAUNCHES && fgets(line, sizeof line, file)) {
    int count = 0;
    for (char *token = strtok(line, " \n"); token && count < STUB_MAX_PARAMS;
         token = strtok(NULL, " \n"))
      expected[num_expected][count++] = strtoull(token, NULL, 10);
    expected_counts[num_expected++] = count;
  }
  fclose(file);
}

/* Whether [address, address + bytes) lies inside one live allocation. */
static int allocated(CUdeviceptr address, size_t bytes) {
  for (int i = 0; i < num_allocations; ++i)
    if (allocations[i].bytes && address >= allocations[i].start &&
        address + bytes <= allocations[i].start + allocations[i].bytes)
      return 1;
  return 0;
}

static CUresult refuse(const char *why, int launch, int param, CUdeviceptr address,
                       uint64_t bytes) {
  fprintf(stderr, "stub libcuda: launch %d, parameter %d: %s (address 0x%llx, %llu bytes)\n",
          launch, param, why, (unsigned long long)address, (unsigned long long)bytes);
  return CUDA_ERROR_INVALID_VALUE;
}

/* -- context and memory -------------------------------------------------- */

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  initialized = 1;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  (void)device;
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *context = (CUcontext)(uintptr_t)0xc0;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext context) {
  return context ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

CUresult cuCtxGetDevice(CUdevice *device) {
  *device = 0;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attribute, CUdevice device) {
  (void)device;
  if (attribute != CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    return CUDA_ERROR_INVALID_VALUE;
  *value = 232448; /* an H100's */
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *address, size_t bytes) {
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (bytes == 0 || num_allocations == STUB_MAX_ALLOCATIONS) return CUDA_ERROR_INVALID_VALUE;
  allocations[num_allocations].start = next_address;
  allocations[num_allocations].bytes = bytes;
  ++num_allocations;
  *address = next_address;
  /* the next range starts past this one, 256-byte aligned as the driver's */
  next_address += (bytes + 0xffffull + 256) & ~0xffffull;
  return CUDA_SUCCESS;
}

CUresult cuMemFree(CUdeviceptr address) {
  for (int i = 0; i < num_allocations; ++i)
    if (allocations[i].start == address && allocations[i].bytes) {
      allocations[i].bytes = 0;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyHtoD(CUdeviceptr destination, const void *source, size_t bytes) {
  return source && allocated(destination, bytes) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemcpyDtoH(void *destination, CUdeviceptr source, size_t bytes) {
  if (!destination || !allocated(source, bytes)) return CUDA_ERROR_INVALID_VALUE;
  memset(destination, 0, bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoDAsync(CUdeviceptr destination, CUdeviceptr source, size_t bytes,
                           CUstream stream) {
  (void)stream;
  return allocated(destination, bytes) && allocated(source, bytes) ? CUDA_SUCCESS
                                                                   : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return initialized ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

/* -- modules and launches ------------------------------------------------ */

CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  static uintptr_t loaded;
  if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (image == NULL) return CUDA_ERROR_INVALID_IMAGE;
  *module = (CUmodule)(0x1000 + ++loaded);
  return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  if (!name || !*name) return CUDA_ERROR_NOT_FOUND;
  *function = (CUfunction)((uintptr_t)module + 0x1000);
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule module) {
  (void)module;
  return CUDA_SUCCESS;
}

CUresult cuFuncSetCacheConfig(CUfunction function, CUfunc_cache config) {
  (void)function, (void)config;
  return CUDA_SUCCESS;
}

CUresult cuFuncGetAttribute(int *value, CUfunction_attribute attribute, CUfunction function) {
  (void)function;
  if (attribute != CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES) return CUDA_ERROR_INVALID_VALUE;
  *value = 0;
  return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute, int value) {
  (void)function;
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES || value < 0)
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuLaunchKernel(CUfunction function, unsigned int gridX, unsigned int gridY,
                        unsigned int gridZ, unsigned int blockX, unsigned int blockY,
                        unsigned int blockZ, unsigned int shared, CUstream stream, void **params,
                        void **extra) {
  (void)function, (void)shared, (void)stream;
  int launch = launches++;
  read_expectations();
  if (launch >= num_expected) return refuse("no launch of this number is expected", launch, -1, 0, 0);
  if (extra != NULL || params == NULL) return refuse("parameters missing", launch, -1, 0, 0);
  if (!gridX || !gridY || !gridZ || !blockX || blockY != 1 || blockZ != 1 || blockX > 1024)
    return refuse("bad grid or block", launch, -1, 0, 0);
  for (int i = 0; i < expected_counts[launch]; ++i) {
    CUdeviceptr address = *(const CUdeviceptr *)params[i];
    uint64_t bytes = expected[launch][i];
    if (bytes == 0 && address != 0) return refuse("expected a null pointer", launch, i, address, 0);
    if (bytes != 0 && !allocated(address, bytes))
      return refuse("not inside one cuMemAlloc'd buffer", launch, i, address, bytes);
  }
  return CUDA_SUCCESS;
}
