
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

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ < 700)
#define __shfl_sync(mask, var, lane, width) \
        __shfl((var), (lane), (width))

#define __shfl_down_sync(mask, var, offset, width) \
        __shfl_down((var), (offset), (width))

#define __shfl_up_sync(mask, var, offset, width) \
        __shfl_up((var), (offset), (width))
#endif

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

__forceinline__ __device__ void tvm_builtin_cuda_warp_sync() {
    __syncwarp();
}
__forceinline__ __device__ void tvm_builtin_ptx_bar_arrive_arrive(uint32_t __a, uint32_t __b) {
  asm volatile("bar.arrive %0, %1;" :  : "r"(__a), "r"(__b) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64(uint32_t __addr) {
  asm volatile("mbarrier.arrive.shared.b64 _, [%0];" :  : "r"(__addr) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_mbarrier_arrive_async_mbarrier_arrive_noinc_shared_b64(uint32_t __addr) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];" :  : "r"(__addr) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_bar_sync_count_sync(uint32_t __a, uint32_t __b) {
  asm volatile("bar.sync %0, %1;" :  : "r"(__a), "r"(__b) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_cg_async_cg_shared_global_16(uint32_t __dst_mem, const void* __src_mem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :  : "r"(__dst_mem), "l"(__src_mem) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_mbarrier_test_wait_parity_test_wait_parity_shared_b64(uint32_t& __wait_complete, uint32_t __addr, uint32_t __phase) {
  asm volatile("{ .reg .pred pd0; mbarrier.test_wait.parity.shared.b64 pd0, [%1], %2; selp.b32 %0, 1, 0, pd0; }" : "=r"(__wait_complete) : "r"(__addr), "r"(__phase) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_mbarrier_init_init_shared_b64(uint32_t __addr, uint32_t __count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" :  : "r"(__addr), "r"(__count) : "memory");
}

__forceinline__ __device__ unsigned int tvm_builtin_cuda_cvta_generic_to_shared(void* p) {
    return __cvta_generic_to_shared(p);
}
extern "C" __global__ void __launch_bounds__(160) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(160) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  extern __shared__ __align__(64) uchar buf_dyn_shmem_ptr[];
  __shared__ alignas(64) uint64_t ws_full_ptr[8];
  __shared__ alignas(64) uint64_t ws_empty_ptr[8];
  alignas(64) uint ws_ready_ptr[1];
  alignas(64) float C_warp_ptr[128];
  alignas(64) half A_shared_dyn_warp_ptr[2048];
  alignas(64) half B_shared_dyn_warp_ptr[512];
  int ws_warp = __shfl_sync((uint)4294967295, ((int)threadIdx.y), 0, 32);
  int cse_v1 = (((int)threadIdx.y) * 32);
  if (((((int)threadIdx.y) * 32) + ((int)threadIdx.x)) == 0) {
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[0]))), (uint)32);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[1]))), (uint)32);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[2]))), (uint)32);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[0]))), (uint)4);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[1]))), (uint)4);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[2]))), (uint)4);
  }
  __syncthreads();
  int cse_v4 = (((int)threadIdx.x) >> 4);
  int cse_v5 = (((int)threadIdx.x) & 15);
  int cse_v11 = ((((int)blockIdx.y) >> 1) * 32768);
  int cse_v13 = ((((int)blockIdx.y) & 1) * 128);
  if (4 <= ws_warp) {
    for (int ws_p = 0; ws_p < 8; ++ws_p) {
      ws_ready_ptr[0] = (uint)0;
      int cse_v2 = (ws_p % 3);
      #pragma unroll 1
      while (1) {
        if (!((ws_ready_ptr[0] == (uint)0))) { break; }
        tvm_builtin_ptx_mbarrier_test_wait_parity_test_wait_parity_shared_b64(ws_ready_ptr[0], tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[(ws_p % 3)]))), ((uint)(((ws_p % 6) / 3) ^ 1)));
      }
      for (int ws_c0 = 0; ws_c0 < 4; ++ws_c0) {
        for (int ax0_ax1_fused_0 = 0; ax0_ax1_fused_0 < 4; ++ax0_ax1_fused_0) {
          int cse_v3 = (((int)threadIdx.x) >> 2);
          int cse_v10 = ((((int)threadIdx.x) & 3) * 8);
          tvm_builtin_ptx_cp_async_cg_async_cg_shared_global_16(tvm_builtin_cuda_cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((((((ws_p % 3) * 5120) + (ax0_ax1_fused_0 * 1280)) + (ws_c0 * 320)) + ((((int)threadIdx.x) >> 2) * 40)) + ((((int)threadIdx.x) & 3) * 8)) + 13056)]))), (&(A_ptr[(((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_ax1_fused_0 * 8192)) + (ws_c0 * 2048)) + ((((int)threadIdx.x) >> 2) * 256)) + (ws_p * 32)) + ((((int)threadIdx.x) & 3) * 8))])));
        }
      }
      for (int ws_c1 = 0; ws_c1 < 4; ++ws_c1) {
        for (int ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 4; ++ax0_ax1_fused_0_1) {
          int cse_v12 = ((((int)threadIdx.x) & 15) * 8);
          tvm_builtin_ptx_cp_async_cg_async_cg_shared_global_16(tvm_builtin_cuda_cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[((((((ws_p % 3) * 4352) + (ax0_ax1_fused_0_1 * 1088)) + (ws_c1 * 272)) + ((((int)threadIdx.x) >> 4) * 136)) + ((((int)threadIdx.x) & 15) * 8))]))), (&(B_ptr[((((((ws_p * 8192) + (ax0_ax1_fused_0_1 * 2048)) + (ws_c1 * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)blockIdx.y) & 1) * 128)) + ((((int)threadIdx.x) & 15) * 8))])));
        }
      }
      tvm_builtin_ptx_cp_async_mbarrier_arrive_async_mbarrier_arrive_noinc_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[(ws_p % 3)]))));
    }
    for (int ws_t = 8; ws_t < 11; ++ws_t) {
      ws_ready_ptr[0] = (uint)0;
      #pragma unroll 1
      while (1) {
        if (!((ws_ready_ptr[0] == (uint)0))) { break; }
        tvm_builtin_ptx_mbarrier_test_wait_parity_test_wait_parity_shared_b64(ws_ready_ptr[0], tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[(ws_t % 3)]))), ((uint)(((ws_t % 6) / 3) ^ 1)));
      }
    }
  } else {
    for (int i_0_3_init = 0; i_0_3_init < 4; ++i_0_3_init) {
      for (int i_0_4_init = 0; i_0_4_init < 2; ++i_0_4_init) {
        for (int j_0_4_init = 0; j_0_4_init < 2; ++j_0_4_init) {
          for (int i = 0; i < 8; ++i) {
C_warp_ptr[(((i_0_3_init * 32) + (i_0_4_init * 16)) + (j_0_4_init * 8)) + i] = 0.0;}
;
        }
      }
    }
    int cse_v6 = (ws_warp >> 1);
    if ((ws_warp >> 1) == 0) {
      tvm_builtin_ptx_bar_arrive_arrive((uint)2, (uint)128);
    }
    for (int ws_k = 0; ws_k < 8; ++ws_k) {
      ws_ready_ptr[0] = (uint)0;
      int cse_v7 = (ws_k % 3);
      #pragma unroll 1
      while (1) {
        if (!((ws_ready_ptr[0] == (uint)0))) { break; }
        tvm_builtin_ptx_mbarrier_test_wait_parity_test_wait_parity_shared_b64(ws_ready_ptr[0], tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[(ws_k % 3)]))), ((uint)((ws_k % 6) / 3)));
      }
      tvm_builtin_ptx_bar_sync_count_sync(((uint)((ws_warp >> 1) + 1)), (uint)128);
      for (int k_0_1 = 0; k_0_1 < 2; ++k_0_1) {
        int cse_v8 = (((int)threadIdx.x) * 8);
        int cse_v14 = ((((int)threadIdx.x) >> 4) * 8);
        for (int ax0_0 = 0; ax0_0 < 8; ++ax0_0) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((((ws_k % 3) * 5120) + (ax0_0 * 640)) + (k_0_1 * 16)) + 13056)])) + (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8)));
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
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((((ws_k % 3) * 4352) + (k_0_1 * 2176)) + (((int)threadIdx.y) * 32)) + (ax1_0 * 16))])) + (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8)));
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
              int cse_v9 = (j_0_4 * 256);
              int cse_v15 = ((j_0_4 * 256) + (((int)threadIdx.x) * 8));
              int cse_v16 = (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8));
              int cse_v17 = ((((i_0_3 * 1024) + (i_0_4 * 512)) + (j_0_4 * 256)) + (((int)threadIdx.x) * 8));

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
      if (((ws_warp >> 1) != 0) || (ws_k < 7)) {
        tvm_builtin_ptx_bar_arrive_arrive(((uint)(((ws_warp >> 1) == 0) ? 2 : 1)), (uint)128);
      }
      tvm_builtin_cuda_warp_sync();
      if (((int)threadIdx.x) == 0) {
        tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[(ws_k % 3)]))));
      }
    }
    for (int ax0_0_1 = 0; ax0_0_1 < 8; ++ax0_0_1) {
      for (int ax1_0_1 = 0; ax1_0_1 < 2; ++ax1_0_1) {
        for (int local_id = 0; local_id < 8; ++local_id) {
(&(C_ptr[((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_0_1 * 4096)) + ((((int)blockIdx.y) & 1) * 128)) + (((int)threadIdx.y) * 32)) + (ax1_0_1 * 16))]))[((((((local_id % 4) / 2) * 8) + (threadIdx.x / 4)) * 256) + ((((local_id / 4) * 8) + ((threadIdx.x % 4) * 2)) + (local_id % 2)))] = C_warp_ptr[((ax0_0_1 * 16) + (ax1_0_1 * 8)) + local_id];
}
;
      }
    }
  }
}

