
#ifdef __CUDACC_RTC__
  #include <cuda/std/cstdint>
  using cuda::std::uint8_t;
  using cuda::std::uint16_t;
  using cuda::std::uint32_t;
  using cuda::std::uint64_t;
  using cuda::std::int8_t;
  using cuda::std::int16_t;
  using cuda::std::int32_t;
  using cuda::std::int64_t;

  #include <cuda/std/type_traits>
  namespace std {
    using cuda::std::is_same;
    using cuda::std::is_same_v;
    using cuda::std::is_integral;
    using cuda::std::is_signed;
    using cuda::std::is_unsigned;
    using cuda::std::is_floating_point;
    using cuda::std::enable_if;
    using cuda::std::conditional;
  }

  // NVRTC uses asm/volatile instead of __asm__/__volatile__ (gcc extension).
  #ifndef __asm__
  #define __asm__ asm
  #endif
  #ifndef __volatile__
  #define __volatile__ volatile
  #endif
#else
  #include <cstdint>
  #include <type_traits>
  #include <cuda.h>
#endif

#if !defined(__CUDA_ARCH__) || (__CUDA_ARCH__ >= 530)
#include <cuda_fp16.h>
__device__ half max(half a, half b)
{
  return __hgt(__half(a), __half(b)) ? a : b;
}
__device__ half min(half a, half b)
{
  return __hlt(__half(a), __half(b)) ? a : b;
}
#endif // __CUDA_ARCH__ >= 530

// Pack two half values.
static inline __device__ __host__ unsigned
__pack_half2(const half x, const half y) {
  unsigned v0 = *((unsigned short *)&x);
  unsigned v1 = *((unsigned short *)&y);
  return (v1 << 16) | v0;
}

#define CUDA_UNSUPPORTED_HALF_MATH_BINARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x, half y) {   \
  float tmp_x = __half2float(x);                                          \
  float tmp_y = __half2float(y);                                          \
  float result = FP32_MATH_NAME(tmp_x, tmp_y);                            \
  return __float2half(result);                                            \
}

#define CUDA_UNSUPPORTED_HALF_MATH_UNARY(HALF_MATH_NAME, FP32_MATH_NAME) \
static inline __device__ __host__ half HALF_MATH_NAME(half x) {          \
  float tmp_x = __half2float(x);                                         \
  float result = FP32_MATH_NAME(tmp_x);                                  \
  return __float2half(result);                                           \
}

// Some fp16 math functions are not supported in cuda_fp16.h,
// so we define them here to make sure the generated CUDA code
// is valid.
#if defined(__CUDA_ARCH__)
#if (__CUDA_ARCH__ >= 530)
CUDA_UNSUPPORTED_HALF_MATH_BINARY(hpow, powf)
#if ((__CUDACC_VER_MAJOR__ < 12) || ((__CUDACC_VER_MAJOR__ == 12) && (__CUDACC_VER_MINOR__ < 8)))
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htanh, tanhf)
#endif
CUDA_UNSUPPORTED_HALF_MATH_UNARY(htan, tanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hatan, atanf)
CUDA_UNSUPPORTED_HALF_MATH_UNARY(herf, erf)
#else
CUDA_UNSUPPORTED_HALF_MATH_UNARY(hexp, exp)
#endif
#endif

#undef CUDA_UNSUPPORTED_HALF_MATH_BINARY
#undef CUDA_UNSUPPORTED_HALF_MATH_UNARY

template <typename T, typename TVec2>
struct __align__(8) half4_bfloat164 {
  T x, y, z, w;
  __host__ __device__ half4_bfloat164() : x(T(0)), y(T(0)), z(T(0)), w(T(0)) {}
  __host__ __device__ half4_bfloat164(T x, T y, T z, T w) : x(x), y(y), z(z), w(w) {}

};

using half4 = half4_bfloat164<__half, __half2>;
__host__ __device__ half4 make_half4(__half x, __half y, __half z, __half w) {
    return half4(x, y, z, w);
}

#include <mma.h>

#if (((__CUDACC_VER_MAJOR__ == 11) && (__CUDACC_VER_MINOR__ >= 4)) || \
     (__CUDACC_VER_MAJOR__ > 11))
#define TVM_ENABLE_L2_PREFETCH 1
#else
#define TVM_ENABLE_L2_PREFETCH 0
#endif

#ifdef _WIN32
  using uint = unsigned int;
  using uchar = unsigned char;
  using ushort = unsigned short;
  using int64_t = long long;
  using uint64_t = unsigned long long;
#else
  #define uint unsigned int
  #define uchar unsigned char
  #define ushort unsigned short
#endif
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_0() {
  asm volatile("cp.async.wait_group 0;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_1() {
  asm volatile("cp.async.wait_group 1;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_wait_group_async_wait_group_2() {
  asm volatile("cp.async.wait_group 2;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_commit_group_async_commit_group() {
  asm volatile("cp.async.commit_group;" :  : );
}

__forceinline__ __device__ void ptx_cp_async_legacy_cg_16_2_2(void* dst, int dst_off, void* src, int src_off) {
  uint8_t* dst_p = (uint8_t*)dst + dst_off * 2;
  uint8_t* src_p = (uint8_t*)src + src_off * 2;
  unsigned int dst_addr = __cvta_generic_to_shared(dst_p);
  asm volatile("cp.async.cg.shared.global [%0], [%1], %2;"
    :: "r"(dst_addr), "l"(src_p), "n"(16));
}
extern "C" __global__ void __launch_bounds__(128) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(128) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  extern __shared__ __align__(64) uchar buf_dyn_shmem_ptr[];
  alignas(64) float C_warp_ptr[128];
  alignas(64) half A_shared_dyn_warp_ptr[2048];
  alignas(64) half B_shared_dyn_warp_ptr[512];
  alignas(64) half A_shared_dyn_warp_ptr_1[2048];
  alignas(64) half B_shared_dyn_warp_ptr_1[512];
  for (int i_0_3_init = 0; i_0_3_init < 4; ++i_0_3_init) {
    for (int i_0_4_init = 0; i_0_4_init < 2; ++i_0_4_init) {
      for (int j_0_4_init = 0; j_0_4_init < 2; ++j_0_4_init) {
        for (int i = 0; i < 8; ++i) {
C_warp_ptr[(((i_0_3_init * 32) + (i_0_4_init * 16)) + (j_0_4_init * 8)) + i] = 0.0;}
;
      }
    }
  }
  int cse_v1 = (((int)threadIdx.y) * 2048);
  int cse_v2 = (((int)threadIdx.x) >> 2);
  int cse_v3 = (((int)threadIdx.y) * 320);
  int cse_v4 = (((int)threadIdx.y) * 512);
  int cse_v5 = (((int)threadIdx.x) >> 4);
  int cse_v6 = (((int)threadIdx.x) & 15);
  int cse_v7 = (((int)threadIdx.y) * 272);
  int cse_v14 = ((((int)blockIdx.y) >> 1) * 32768);
  int cse_v15 = ((((int)threadIdx.x) >> 2) * 256);
  int cse_v16 = ((((int)threadIdx.x) & 3) * 8);
  int cse_v17 = ((((int)threadIdx.x) >> 2) * 40);
  int cse_v18 = ((((int)threadIdx.x) >> 4) * 256);
  int cse_v19 = ((((int)blockIdx.y) & 1) * 128);
  int cse_v20 = ((((int)threadIdx.x) & 15) * 8);
  int cse_v21 = ((((int)threadIdx.x) >> 4) * 136);
  for (int ax0_ax1_fused_0 = 0; ax0_ax1_fused_0 < 4; ++ax0_ax1_fused_0) {
    ptx_cp_async_legacy_cg_16_2_2(buf_dyn_shmem_ptr, (((((ax0_ax1_fused_0 * 1280) + (((int)threadIdx.y) * 320)) + ((((int)threadIdx.x) >> 2) * 40)) + ((((int)threadIdx.x) & 3) * 8)) + 13056), A_ptr, ((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_ax1_fused_0 * 8192)) + (((int)threadIdx.y) * 2048)) + ((((int)threadIdx.x) >> 2) * 256)) + ((((int)threadIdx.x) & 3) * 8)));
  }
  for (int ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 4; ++ax0_ax1_fused_0_1) {
    ptx_cp_async_legacy_cg_16_2_2(buf_dyn_shmem_ptr, ((((ax0_ax1_fused_0_1 * 1088) + (((int)threadIdx.y) * 272)) + ((((int)threadIdx.x) >> 4) * 136)) + ((((int)threadIdx.x) & 15) * 8)), B_ptr, (((((ax0_ax1_fused_0_1 * 2048) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)blockIdx.y) & 1) * 128)) + ((((int)threadIdx.x) & 15) * 8)));
  }
  tvm_builtin_ptx_cp_async_commit_group_async_commit_group();
  for (int ax0_ax1_fused_0_2 = 0; ax0_ax1_fused_0_2 < 4; ++ax0_ax1_fused_0_2) {
    ptx_cp_async_legacy_cg_16_2_2(buf_dyn_shmem_ptr, (((((ax0_ax1_fused_0_2 * 1280) + (((int)threadIdx.y) * 320)) + ((((int)threadIdx.x) >> 2) * 40)) + ((((int)threadIdx.x) & 3) * 8)) + 18176), A_ptr, (((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_ax1_fused_0_2 * 8192)) + (((int)threadIdx.y) * 2048)) + ((((int)threadIdx.x) >> 2) * 256)) + ((((int)threadIdx.x) & 3) * 8)) + 32));
  }
  for (int ax0_ax1_fused_0_3 = 0; ax0_ax1_fused_0_3 < 4; ++ax0_ax1_fused_0_3) {
    ptx_cp_async_legacy_cg_16_2_2(buf_dyn_shmem_ptr, (((((ax0_ax1_fused_0_3 * 1088) + (((int)threadIdx.y) * 272)) + ((((int)threadIdx.x) >> 4) * 136)) + ((((int)threadIdx.x) & 15) * 8)) + 4352), B_ptr, ((((((ax0_ax1_fused_0_3 * 2048) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)blockIdx.y) & 1) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + 8192));
  }
  tvm_builtin_ptx_cp_async_commit_group_async_commit_group();
  int cse_v8 = (((int)threadIdx.x) * 8);
  int cse_v10 = (((int)threadIdx.y) * 32);
  int cse_v23 = ((((int)threadIdx.x) >> 4) * 8);
  int cse_v27 = (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8));
  int cse_v28 = (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8));
  for (int k_0_0 = 0; k_0_0 < 6; ++k_0_0) {
    int cse_v22 = ((k_0_0 + 2) % 3);
    __syncthreads();
    for (int ax0_ax1_fused_0_4 = 0; ax0_ax1_fused_0_4 < 4; ++ax0_ax1_fused_0_4) {
      ptx_cp_async_legacy_cg_16_2_2(buf_dyn_shmem_ptr, ((((((((k_0_0 + 2) % 3) * 5120) + (ax0_ax1_fused_0_4 * 1280)) + (((int)threadIdx.y) * 320)) + ((((int)threadIdx.x) >> 2) * 40)) + ((((int)threadIdx.x) & 3) * 8)) + 13056), A_ptr, ((((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_ax1_fused_0_4 * 8192)) + (((int)threadIdx.y) * 2048)) + ((((int)threadIdx.x) >> 2) * 256)) + (k_0_0 * 32)) + ((((int)threadIdx.x) & 3) * 8)) + 64));
    }
    for (int ax0_ax1_fused_0_5 = 0; ax0_ax1_fused_0_5 < 4; ++ax0_ax1_fused_0_5) {
      ptx_cp_async_legacy_cg_16_2_2(buf_dyn_shmem_ptr, (((((((k_0_0 + 2) % 3) * 4352) + (ax0_ax1_fused_0_5 * 1088)) + (((int)threadIdx.y) * 272)) + ((((int)threadIdx.x) >> 4) * 136)) + ((((int)threadIdx.x) & 15) * 8)), B_ptr, (((((((k_0_0 * 8192) + (ax0_ax1_fused_0_5 * 2048)) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)blockIdx.y) & 1) * 128)) + ((((int)threadIdx.x) & 15) * 8)) + 16384));
    }
    tvm_builtin_ptx_cp_async_commit_group_async_commit_group();
    tvm_builtin_ptx_cp_async_wait_group_async_wait_group_2();
    __syncthreads();
    for (int k_0_1 = 0; k_0_1 < 2; ++k_0_1) {
      int cse_v9 = (k_0_0 % 3);
      for (int ax0_0 = 0; ax0_0 < 8; ++ax0_0) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((((k_0_0 % 3) * 5120) + (ax0_0 * 640)) + (k_0_1 * 16)) + 13056)])) + (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
      }
      for (int ax1_0 = 0; ax1_0 < 2; ++ax1_0) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((((k_0_0 % 3) * 4352) + (k_0_1 * 2176)) + (((int)threadIdx.y) * 32)) + (ax1_0 * 16))])) + (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
      }
      for (int i_0_3 = 0; i_0_3 < 4; ++i_0_3) {
        for (int i_0_4 = 0; i_0_4 < 2; ++i_0_4) {
          for (int j_0_4 = 0; j_0_4 < 2; ++j_0_4) {
            int cse_v11 = (j_0_4 * 256);
            int cse_v24 = ((j_0_4 * 256) + (((int)threadIdx.x) * 8));
            int cse_v29 = (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8));
            int cse_v32 = ((((i_0_3 * 1024) + (i_0_4 * 512)) + (j_0_4 * 256)) + (((int)threadIdx.x) * 8));

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[0]), "=f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[1]), "=f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[2]), "=f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + ((j_0_4 * 256) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + ((j_0_4 * 256) + (((int)threadIdx.x) * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[0]), "f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[2]), "f"(((float *)(C_warp_ptr + (((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8))))[3]));
  }

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[0]), "=f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[1]), "=f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[2]), "=f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8))))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + (((j_0_4 * 256) + (((int)threadIdx.x) * 8)) + 4)))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + (((j_0_4 * 256) + (((int)threadIdx.x) * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[0]), "f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[2]), "f"(((float *)(C_warp_ptr + ((((i_0_3 * 32) + (i_0_4 * 16)) + (j_0_4 * 8)) + 4)))[3]));
  }
          }
        }
      }
    }
  }
  tvm_builtin_ptx_cp_async_wait_group_async_wait_group_1();
  __syncthreads();
  for (int k_0_1_1 = 0; k_0_1_1 < 2; ++k_0_1_1) {
    for (int ax0_0_1 = 0; ax0_0_1 < 8; ++ax0_0_1) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((ax0_0_1 * 640) + (k_0_1_1 * 16)) + 13056)])) + (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_1 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_1 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_1 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_1 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
    }
    for (int ax1_0_1 = 0; ax1_0_1 < 2; ++ax1_0_1) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((k_0_1_1 * 2176) + (((int)threadIdx.y) * 32)) + (ax1_0_1 * 16))])) + (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_1 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_1 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_1 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_1 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
    }
    for (int i_0_3_1 = 0; i_0_3_1 < 4; ++i_0_3_1) {
      for (int i_0_4_1 = 0; i_0_4_1 < 2; ++i_0_4_1) {
        for (int j_0_4_1 = 0; j_0_4_1 < 2; ++j_0_4_1) {
          int cse_v12 = (j_0_4_1 * 256);
          int cse_v25 = ((j_0_4_1 * 256) + (((int)threadIdx.x) * 8));
          int cse_v30 = (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8));
          int cse_v33 = ((((i_0_3_1 * 1024) + (i_0_4_1 * 512)) + (j_0_4_1 * 256)) + (((int)threadIdx.x) * 8));

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[0]), "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[1]), "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[2]), "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((j_0_4_1 * 256) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((j_0_4_1 * 256) + (((int)threadIdx.x) * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[0]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[2]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[3]));
  }

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[0]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[1]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[2]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8))))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + (((j_0_4_1 * 256) + (((int)threadIdx.x) * 8)) + 4)))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + (((j_0_4_1 * 256) + (((int)threadIdx.x) * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[0]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[2]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[3]));
  }
        }
      }
    }
  }
  tvm_builtin_ptx_cp_async_wait_group_async_wait_group_0();
  __syncthreads();
  for (int k_0_1_2 = 0; k_0_1_2 < 2; ++k_0_1_2) {
    for (int ax0_0_2 = 0; ax0_0_2 < 8; ++ax0_0_2) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((ax0_0_2 * 640) + (k_0_1_2 * 16)) + 18176)])) + (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_2 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_2 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_2 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + ((ax0_0_2 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
    }
    for (int ax1_0_2 = 0; ax1_0_2 < 2; ++ax1_0_2) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[((((k_0_1_2 * 2176) + (((int)threadIdx.y) * 32)) + (ax1_0_2 * 16)) + 4352)])) + (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_2 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_2 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_2 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((ax1_0_2 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
    }
    for (int i_0_3_2 = 0; i_0_3_2 < 4; ++i_0_3_2) {
      for (int i_0_4_2 = 0; i_0_4_2 < 2; ++i_0_4_2) {
        for (int j_0_4_2 = 0; j_0_4_2 < 2; ++j_0_4_2) {
          int cse_v13 = (j_0_4_2 * 256);
          int cse_v26 = ((j_0_4_2 * 256) + (((int)threadIdx.x) * 8));
          int cse_v31 = (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8));
          int cse_v34 = ((((i_0_3_2 * 1024) + (i_0_4_2 * 512)) + (j_0_4_2 * 256)) + (((int)threadIdx.x) * 8));

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[0]), "=f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[1]), "=f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[2]), "=f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((j_0_4_2 * 256) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + ((j_0_4_2 * 256) + (((int)threadIdx.x) * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[0]), "f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[2]), "f"(((float *)(C_warp_ptr + (((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8))))[3]));
  }

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[0]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[1]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[2]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr_1 + (((i_0_3_2 * 512) + (i_0_4_2 * 256)) + (((int)threadIdx.x) * 8))))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + (((j_0_4_2 * 256) + (((int)threadIdx.x) * 8)) + 4)))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr_1 + (((j_0_4_2 * 256) + (((int)threadIdx.x) * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[0]), "f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[2]), "f"(((float *)(C_warp_ptr + ((((i_0_3_2 * 32) + (i_0_4_2 * 16)) + (j_0_4_2 * 8)) + 4)))[3]));
  }
        }
      }
    }
  }
  for (int ax0_0_3 = 0; ax0_0_3 < 8; ++ax0_0_3) {
    for (int ax1_0_3 = 0; ax1_0_3 < 2; ++ax1_0_3) {
      for (int local_id = 0; local_id < 8; ++local_id) {
(&(C_ptr[((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_0_3 * 4096)) + ((((int)blockIdx.y) & 1) * 128)) + (((int)threadIdx.y) * 32)) + (ax1_0_3 * 16))]))[((((((local_id % 4) / 2) * 8) + (threadIdx.x / 4)) * 256) + ((((local_id / 4) * 8) + ((threadIdx.x % 4) * 2)) + (local_id % 2)))] = C_warp_ptr[((ax0_0_3 * 16) + (ax1_0_3 * 8)) + local_id];
}
;
    }
  }
}

