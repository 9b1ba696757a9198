
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

__forceinline__ __device__ uint32_t tvm_builtin_elect_one_sync() {{
  uint32_t pred = 0;
  asm volatile(
    "{\n"
    ".reg .pred %%px;\n"
    "     elect.sync _|%%px, %1;\n"
    "@%%px mov.s32 %0, 1;\n"
    "}\n"
    : "+r"(pred)
    : "r"(0xFFFFFFFF));
  return pred;
}}

__forceinline__ __device__ void tvm_builtin_cuda_warp_sync() {
    __syncwarp();
}
__forceinline__ __device__ void tvm_builtin_ptx_cp_async_bulk_g2s_cluster_async_bulk_shared__cluster_global_mbarrier__complete_tx__bytes(uint32_t __dst_mem, const void* __src_mem, uint32_t __size, uint32_t __mbar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :  : "r"(__dst_mem), "l"(__src_mem), "r"(__size), "r"(__mbar) : "memory");
}

__forceinline__ __device__ uint32_t tvm_builtin_elect_one_sync_op() {
    return tvm_builtin_elect_one_sync();
}
__forceinline__ __device__ void tvm_builtin_ptx_mbarrier_arrive_expect_tx_arrive_expect_tx_shared_b64(uint32_t __addr, uint32_t __tx_count) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :  : "r"(__addr), "r"(__tx_count) : "memory");
}

__forceinline__ __device__ void tvm_builtin_cuda_mbarrier_wait(void* barrier, int phase) {
    unsigned int barrier_addr_int = __cvta_generic_to_shared(barrier);
    unsigned int ticks = 0x989680;
    asm volatile(
        "{\n"
        ".reg .pred                P1;\n"
        "LAB_WAIT:\n"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P1, [%0], %1, %2;\n"
        "@P1                       bra.uni DONE;\n"
        "bra.uni                   LAB_WAIT;\n"
        "DONE:\n"
        "}\n"
        :: "r"(barrier_addr_int), "r"(phase), "r"(ticks) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64(uint32_t __addr) {
  asm volatile("mbarrier.arrive.shared.b64 _, [%0];" :  : "r"(__addr) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_setmaxnreg_dec_sync_aligned_u32_40() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_fence_mbarrier_init_mbarrier_init_release_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_mbarrier_init_init_shared_b64(uint32_t __addr, uint32_t __count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" :  : "r"(__addr), "r"(__count) : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_setmaxnreg_inc_sync_aligned_u32_240() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;" :  :  : "memory");
}

__forceinline__ __device__ unsigned int tvm_builtin_cuda_cvta_generic_to_shared(void* p) {
    return __cvta_generic_to_shared(p);
}
extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(256, 1) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  extern __shared__ __align__(64) uchar buf_dyn_shmem_ptr[];
  __shared__ alignas(64) uint64_t ws_full_ptr[8];
  __shared__ alignas(64) uint64_t ws_empty_ptr[8];
  alignas(64) float C_warp_ptr[128];
  alignas(64) half A_shared_dyn_warp_ptr[4096];
  alignas(64) half B_shared_dyn_warp_ptr[1024];
  int ws_warp = __shfl_sync((uint)4294967295, ((int)threadIdx.y), 0, 32);
  int cse_v1 = (((int)threadIdx.y) * 32);
  if (((((int)threadIdx.y) * 32) + ((int)threadIdx.x)) == 0) {
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[0]))), (uint)1);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[1]))), (uint)1);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[2]))), (uint)1);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[3]))), (uint)1);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[4]))), (uint)1);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[0]))), (uint)4);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[1]))), (uint)4);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[2]))), (uint)4);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[3]))), (uint)4);
    tvm_builtin_ptx_mbarrier_init_init_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[4]))), (uint)4);
    tvm_builtin_ptx_fence_mbarrier_init_mbarrier_init_release_cluster();
  }
  __syncthreads();
  int cse_v8 = ((((int)blockIdx.y) >> 1) * 32768);
  int cse_v9 = ((((int)blockIdx.y) & 1) * 128);
  if (4 <= ws_warp) {
    tvm_builtin_ptx_setmaxnreg_dec_sync_aligned_u32_40();
    if (ws_warp == 4) {
      for (int ws_p = 0; ws_p < 8; ++ws_p) {
        int cse_v2 = (ws_p % 5);
        tvm_builtin_cuda_mbarrier_wait((&(ws_empty_ptr[(ws_p % 5)])), ((ws_p / 5) ^ 1));
        if (tvm_builtin_elect_one_sync_op() != (uint)0) {
          tvm_builtin_ptx_mbarrier_arrive_expect_tx_arrive_expect_tx_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[(ws_p % 5)]))), (uint)16384);
          for (int ws_r1 = 0; ws_r1 < 128; ++ws_r1) {
            tvm_builtin_ptx_cp_async_bulk_g2s_cluster_async_bulk_shared__cluster_global_mbarrier__complete_tx__bytes(tvm_builtin_cuda_cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[((((ws_p % 5) * 5120) + (ws_r1 * 40)) + 21760)]))), (&(A_ptr[((((((int)blockIdx.y) >> 1) * 32768) + (ws_r1 * 256)) + (ws_p * 32))])), (uint)64, tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[(ws_p % 5)]))));
          }
          for (int ws_r1_1 = 0; ws_r1_1 < 32; ++ws_r1_1) {
            tvm_builtin_ptx_cp_async_bulk_g2s_cluster_async_bulk_shared__cluster_global_mbarrier__complete_tx__bytes(tvm_builtin_cuda_cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((ws_p % 5) * 4352) + (ws_r1_1 * 136))]))), (&(B_ptr[(((ws_p * 8192) + (ws_r1_1 * 256)) + ((((int)blockIdx.y) & 1) * 128))])), (uint)256, tvm_builtin_cuda_cvta_generic_to_shared((&(ws_full_ptr[(ws_p % 5)]))));
          }
        }
      }
      for (int ws_t = 8; ws_t < 13; ++ws_t) {
        tvm_builtin_cuda_mbarrier_wait((&(ws_empty_ptr[(ws_t % 5)])), (((ws_t % 10) / 5) ^ 1));
      }
    }
  } else {
    tvm_builtin_ptx_setmaxnreg_inc_sync_aligned_u32_240();
    for (int i_0_3_init = 0; i_0_3_init < 4; ++i_0_3_init) {
      for (int i_0_4_init = 0; i_0_4_init < 2; ++i_0_4_init) {
        for (int j_0_4_init = 0; j_0_4_init < 2; ++j_0_4_init) {
          for (int i = 0; i < 8; ++i) {
C_warp_ptr[(((i_0_3_init * 32) + (i_0_4_init * 16)) + (j_0_4_init * 8)) + i] = 0.0;}
;
        }
      }
    }
    for (int ws_k = 0; ws_k < 8; ++ws_k) {
      int cse_v3 = (ws_k % 5);
      tvm_builtin_cuda_mbarrier_wait((&(ws_full_ptr[(ws_k % 5)])), (ws_k / 5));
      int cse_v4 = (((int)threadIdx.x) * 8);
      int cse_v5 = (((int)threadIdx.x) & 15);
      int cse_v10 = ((ws_k % 5) * 5120);
      int cse_v11 = ((((int)threadIdx.x) >> 4) * 8);
      int cse_v14 = (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8));
      for (int ax0_0 = 0; ax0_0 < 8; ++ax0_0) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[((((ws_k % 5) * 5120) + (ax0_0 * 640)) + 21760)])) + (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + ((ax0_0 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
      }
      int cse_v15 = (((ws_k % 5) * 4352) + (((int)threadIdx.y) * 32));
      int cse_v16 = (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8));
      for (int ax1_0 = 0; ax1_0 < 2; ++ax1_0) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[((((ws_k % 5) * 4352) + (((int)threadIdx.y) * 32)) + (ax1_0 * 16))])) + (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[0]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[1]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[2]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + ((ax1_0 * 256) + (((int)threadIdx.x) * 8))))[3])
      : "r"(addr)
    );
  }
      }
      for (int ax0_0_1 = 0; ax0_0_1 < 8; ++ax0_0_1) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[((((ws_k % 5) * 5120) + (ax0_0_1 * 640)) + 21776)])) + (((((int)threadIdx.x) & 15) * 40) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(A_shared_dyn_warp_ptr + (((ax0_0_1 * 256) + (((int)threadIdx.x) * 8)) + 2048)))[0]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + (((ax0_0_1 * 256) + (((int)threadIdx.x) * 8)) + 2048)))[1]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + (((ax0_0_1 * 256) + (((int)threadIdx.x) * 8)) + 2048)))[2]), "=r"(((unsigned *)(A_shared_dyn_warp_ptr + (((ax0_0_1 * 256) + (((int)threadIdx.x) * 8)) + 2048)))[3])
      : "r"(addr)
    );
  }
      }
      for (int ax1_0_1 = 0; ax1_0_1 < 2; ++ax1_0_1) {

  {
    unsigned int addr = __cvta_generic_to_shared((&(((half*)buf_dyn_shmem_ptr)[(((((ws_k % 5) * 4352) + (((int)threadIdx.y) * 32)) + (ax1_0_1 * 16)) + 2176)])) + (((((int)threadIdx.x) & 15) * 136) + ((((int)threadIdx.x) >> 4) * 8)));
    __asm__ __volatile__(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
      "{%0, %1, %2, %3}, [%4];\n"
      : "=r"(((unsigned *)(B_shared_dyn_warp_ptr + (((ax1_0_1 * 256) + (((int)threadIdx.x) * 8)) + 512)))[0]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + (((ax1_0_1 * 256) + (((int)threadIdx.x) * 8)) + 512)))[1]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + (((ax1_0_1 * 256) + (((int)threadIdx.x) * 8)) + 512)))[2]), "=r"(((unsigned *)(B_shared_dyn_warp_ptr + (((ax1_0_1 * 256) + (((int)threadIdx.x) * 8)) + 512)))[3])
      : "r"(addr)
    );
  }
      }
      for (int i_0_3 = 0; i_0_3 < 4; ++i_0_3) {
        for (int i_0_4 = 0; i_0_4 < 2; ++i_0_4) {
          for (int j_0_4 = 0; j_0_4 < 2; ++j_0_4) {
            int cse_v6 = (j_0_4 * 256);
            int cse_v12 = ((j_0_4 * 256) + (((int)threadIdx.x) * 8));
            int cse_v17 = (((i_0_3 * 512) + (i_0_4 * 256)) + (((int)threadIdx.x) * 8));
            int cse_v18 = ((((i_0_3 * 1024) + (i_0_4 * 512)) + (j_0_4 * 256)) + (((int)threadIdx.x) * 8));

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
      for (int i_0_3_1 = 0; i_0_3_1 < 4; ++i_0_3_1) {
        for (int i_0_4_1 = 0; i_0_4_1 < 2; ++i_0_4_1) {
          for (int j_0_4_1 = 0; j_0_4_1 < 2; ++j_0_4_1) {
            int cse_v7 = (j_0_4_1 * 256);
            int cse_v13 = ((j_0_4_1 * 256) + (((int)threadIdx.x) * 8));
            int cse_v19 = ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048);
            int cse_v20 = ((((i_0_3_1 * 1024) + (i_0_4_1 * 512)) + (j_0_4_1 * 256)) + (((int)threadIdx.x) * 8));

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[0]), "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[1]), "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[2]), "=f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + (((j_0_4_1 * 256) + (((int)threadIdx.x) * 8)) + 512)))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + (((j_0_4_1 * 256) + (((int)threadIdx.x) * 8)) + 512)))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[0]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[1]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[2]), "f"(((float *)(C_warp_ptr + (((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8))))[3]));
  }

  {
    __asm__ __volatile__(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      :  "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[0]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[1]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[2]), "=f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[3])
      : "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[0]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[1]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[2]), "r"(((unsigned *)(A_shared_dyn_warp_ptr + ((((i_0_3_1 * 512) + (i_0_4_1 * 256)) + (((int)threadIdx.x) * 8)) + 2048)))[3]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + (((j_0_4_1 * 256) + (((int)threadIdx.x) * 8)) + 516)))[0]), "r"(((unsigned *)(B_shared_dyn_warp_ptr + (((j_0_4_1 * 256) + (((int)threadIdx.x) * 8)) + 516)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[0]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[1]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[2]), "f"(((float *)(C_warp_ptr + ((((i_0_3_1 * 32) + (i_0_4_1 * 16)) + (j_0_4_1 * 8)) + 4)))[3]));
  }
          }
        }
      }
      tvm_builtin_cuda_warp_sync();
      if (((int)threadIdx.x) == 0) {
        tvm_builtin_ptx_mbarrier_arrive_nocount_arrive_shared_b64(tvm_builtin_cuda_cvta_generic_to_shared((&(ws_empty_ptr[(ws_k % 5)]))));
      }
    }
    for (int ax0_0_2 = 0; ax0_0_2 < 8; ++ax0_0_2) {
      for (int ax1_0_2 = 0; ax1_0_2 < 2; ++ax1_0_2) {
        for (int local_id = 0; local_id < 8; ++local_id) {
(&(C_ptr[((((((((int)blockIdx.y) >> 1) * 32768) + (ax0_0_2 * 4096)) + ((((int)blockIdx.y) & 1) * 128)) + (((int)threadIdx.y) * 32)) + (ax1_0_2 * 16))]))[((((((local_id % 4) / 2) * 8) + (threadIdx.x / 4)) * 256) + ((((local_id / 4) * 8) + ((threadIdx.x % 4) * 2)) + (local_id % 2)))] = C_warp_ptr[((ax0_0_2 * 16) + (ax1_0_2 * 8)) + local_id];
}
;
      }
    }
  }
}

