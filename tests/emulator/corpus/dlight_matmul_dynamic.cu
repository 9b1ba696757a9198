
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
extern "C" __global__ void __launch_bounds__(512) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr, int64_t m);
extern "C" __global__ void __launch_bounds__(512) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr, int64_t m) {
  extern __shared__ __align__(64) uchar buf_dyn_shmem_ptr[];
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> C_reindex_pad_shared_dyn_wmma_accumulator_ptr[4];
  alignas(64) half4 A_reindex_pad_shared_dyn_local_ptr[4];
  alignas(64) half4 B_reindex_shared_dyn_local_ptr[4];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[4];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> B_reindex_shared_dyn_wmma_matrix_b_ptr[4];
  for (int ax1_0_3_init = 0; ax1_0_3_init < 2; ++ax1_0_3_init) {
    for (int ax2_0_3_init = 0; ax2_0_3_init < 2; ++ax2_0_3_init) {
      nvcuda::wmma::fill_fragment(C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_init * 2) + ax2_0_3_init)], 0x0p+0f/*0.000000e+00*/);
    }
  }
  int64_t cse_v2 = (((int64_t)blockIdx.x) * (int64_t)128);
  int64_t cse_v3 = (((int64_t)threadIdx.y) * (int64_t)2);
  int64_t cse_v4 = (((int64_t)threadIdx.x) >> (int64_t)4);
  int64_t cse_v5 = (((int64_t)blockIdx.x) * (int64_t)32768);
  int64_t cse_v6 = (((int64_t)threadIdx.y) * (int64_t)512);
  int64_t cse_v7 = (((int64_t)threadIdx.x) & (int64_t)15);
  int64_t cse_v13 = ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)256);
  int64_t cse_v14 = ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4);
  for (int64_t ax0_ax1_fused_0 = (int64_t)0; ax0_ax1_fused_0 < (int64_t)4; ++ax0_ax1_fused_0) {
    half4 condval;
    if (((((((int64_t)blockIdx.x) * (int64_t)128) + (ax0_ax1_fused_0 * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)) < m) {
      condval = *(half4*)(A_ptr + (((((((int64_t)blockIdx.x) * (int64_t)32768) + (ax0_ax1_fused_0 * (int64_t)8192)) + (((int64_t)threadIdx.y) * (int64_t)512)) + ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)256)) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4)));
    } else {
      condval = make_half4(__float2half_rn(0x0p+0f/*0.000000e+00*/), __float2half_rn(0x0p+0f/*0.000000e+00*/), __float2half_rn(0x0p+0f/*0.000000e+00*/), __float2half_rn(0x0p+0f/*0.000000e+00*/));
    }
    A_reindex_pad_shared_dyn_local_ptr[ax0_ax1_fused_0] = condval;
  }
  int64_t cse_v8 = (((int64_t)blockIdx.y) * (int64_t)128);
  int64_t cse_v15 = ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024);
  for (int ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 4; ++ax0_ax1_fused_0_1) {
    longlong4 v_ = make_longlong4((((((((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_1) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)))+((int64_t)256*0), (((((((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_1) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)))+((int64_t)256*1), (((((((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_1) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)))+((int64_t)256*2), (((((((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_1) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)))+((int64_t)256*3));
    B_reindex_shared_dyn_local_ptr[ax0_ax1_fused_0_1] = make_half4(B_ptr[v_.x],B_ptr[v_.y],B_ptr[v_.z],B_ptr[v_.w]);
  }
  int64_t cse_v9 = (((int64_t)threadIdx.y) * (int64_t)144);
  int64_t cse_v16 = ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)72);
  for (int ax0_ax1_fused_0_2 = 0; ax0_ax1_fused_0_2 < 4; ++ax0_ax1_fused_0_2) {
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((((int64_t)ax0_ax1_fused_0_2) * (int64_t)2304) + (((int64_t)threadIdx.y) * (int64_t)144)) + ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)72)) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4)) + (int64_t)18432)) = A_reindex_pad_shared_dyn_local_ptr[ax0_ax1_fused_0_2];
  }
  for (int ax0_ax1_fused_0_3 = 0; ax0_ax1_fused_0_3 < 4; ++ax0_ax1_fused_0_3) {
    *(half4*)(((half*)buf_dyn_shmem_ptr) + ((((((int64_t)ax0_ax1_fused_0_3) * (int64_t)2304) + (((int64_t)threadIdx.y) * (int64_t)144)) + ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)72)) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4))) = B_reindex_shared_dyn_local_ptr[ax0_ax1_fused_0_3];
  }
  int64_t cse_v10 = (((int64_t)threadIdx.y) & (int64_t)3);
  int64_t cse_v17 = ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304);
  __syncthreads();
  nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304) + (int64_t)18432)])), 72);
  nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304) + (int64_t)19584)])), 72);
  int64_t cse_v11 = (((int64_t)threadIdx.y) >> (int64_t)2);
  int64_t cse_v18 = ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304) + (int64_t)1152)])), 72);
  for (int64_t ax3_0_0 = (int64_t)0; ax3_0_0 < (int64_t)3; ++ax3_0_0) {
    for (int64_t ax0_ax1_fused_0_4 = (int64_t)0; ax0_ax1_fused_0_4 < (int64_t)4; ++ax0_ax1_fused_0_4) {
      half4 condval_1;
      if (((((((int64_t)blockIdx.x) * (int64_t)128) + (ax0_ax1_fused_0_4 * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)) < m) {
        condval_1 = *(half4*)(A_ptr + (((((((((int64_t)blockIdx.x) * (int64_t)32768) + (ax0_ax1_fused_0_4 * (int64_t)8192)) + (((int64_t)threadIdx.y) * (int64_t)512)) + ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)256)) + (ax3_0_0 * (int64_t)64)) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4)) + (int64_t)64));
      } else {
        condval_1 = make_half4(__float2half_rn(0x0p+0f/*0.000000e+00*/), __float2half_rn(0x0p+0f/*0.000000e+00*/), __float2half_rn(0x0p+0f/*0.000000e+00*/), __float2half_rn(0x0p+0f/*0.000000e+00*/));
      }
      A_reindex_pad_shared_dyn_local_ptr[ax0_ax1_fused_0_4] = condval_1;
    }
    for (int ax0_ax1_fused_0_5 = 0; ax0_ax1_fused_0_5 < 4; ++ax0_ax1_fused_0_5) {
      longlong4 v__1 = make_longlong4(((((((((ax3_0_0 * (int64_t)16384) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024)) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_5) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)) + (int64_t)16384))+((int64_t)256*0), ((((((((ax3_0_0 * (int64_t)16384) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024)) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_5) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)) + (int64_t)16384))+((int64_t)256*1), ((((((((ax3_0_0 * (int64_t)16384) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024)) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_5) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)) + (int64_t)16384))+((int64_t)256*2), ((((((((ax3_0_0 * (int64_t)16384) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)1024)) + (((int64_t)blockIdx.y) * (int64_t)128)) + (((int64_t)ax0_ax1_fused_0_5) * (int64_t)32)) + (((int64_t)threadIdx.y) * (int64_t)2)) + (((int64_t)threadIdx.x) >> (int64_t)4)) + (int64_t)16384))+((int64_t)256*3));
      B_reindex_shared_dyn_local_ptr[ax0_ax1_fused_0_5] = make_half4(B_ptr[v__1.x],B_ptr[v__1.y],B_ptr[v__1.z],B_ptr[v__1.w]);
    }
    for (int ax3_0_1 = 0; ax3_0_1 < 3; ++ax3_0_1) {
      int64_t cse_v19 = ((ax3_0_0 & (int64_t)1) * (int64_t)9216);
      int64_t cse_v20 = (((int64_t)ax3_0_1) * (int64_t)16);
      int cse_v31 = (((ax3_0_1 + 1) & 1) * 2);
      int64_t cse_v36 = ((((ax3_0_0 & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304)) + (((int64_t)ax3_0_1) * (int64_t)16));
      nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304)) + (((int64_t)ax3_0_1) * (int64_t)16)) + (int64_t)18448)])), 72);
      int cse_v37 = ((((ax3_0_1 + 1) & 1) * 2) + 1);
      nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[((((ax3_0_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304)) + (((int64_t)ax3_0_1) * (int64_t)16)) + (int64_t)19600)])), 72);
      int64_t cse_v38 = ((((ax3_0_0 & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304)) + (((int64_t)ax3_0_1) * (int64_t)16));
      nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304)) + (((int64_t)ax3_0_1) * (int64_t)16)) + (int64_t)16)])), 72);
      nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[((((ax3_0_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304)) + (((int64_t)ax3_0_1) * (int64_t)16)) + (int64_t)1168)])), 72);
      for (int ax1_0_3 = 0; ax1_0_3 < 2; ++ax1_0_3) {
        for (int ax2_0_3 = 0; ax2_0_3 < 2; ++ax2_0_3) {
          int cse_v21 = ((ax1_0_3 * 2) + ax2_0_3);
          int cse_v22 = ((ax3_0_1 & 1) * 2);
          nvcuda::wmma::mma_sync(C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3 * 2) + ax2_0_3)], A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1 & 1) * 2) + ax1_0_3)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1 & 1) * 2) + ax2_0_3)], C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3 * 2) + ax2_0_3)]);
        }
      }
    }
    int64_t cse_v32 = (((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216);
    __syncthreads();
    for (int ax0_ax1_fused_0_6 = 0; ax0_ax1_fused_0_6 < 4; ++ax0_ax1_fused_0_6) {
      *(half4*)(((half*)buf_dyn_shmem_ptr) + ((((((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + (((int64_t)ax0_ax1_fused_0_6) * (int64_t)2304)) + (((int64_t)threadIdx.y) * (int64_t)144)) + ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)72)) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4)) + (int64_t)18432)) = A_reindex_pad_shared_dyn_local_ptr[ax0_ax1_fused_0_6];
    }
    for (int ax0_ax1_fused_0_7 = 0; ax0_ax1_fused_0_7 < 4; ++ax0_ax1_fused_0_7) {
      *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + (((int64_t)ax0_ax1_fused_0_7) * (int64_t)2304)) + (((int64_t)threadIdx.y) * (int64_t)144)) + ((((int64_t)threadIdx.x) >> (int64_t)4) * (int64_t)72)) + ((((int64_t)threadIdx.x) & (int64_t)15) * (int64_t)4))) = B_reindex_shared_dyn_local_ptr[ax0_ax1_fused_0_7];
    }
    int64_t cse_v39 = ((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304));
    __syncthreads();
    nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304)) + (int64_t)18432)])), 72);
    nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304)) + (int64_t)19584)])), 72);
    int64_t cse_v40 = ((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304));
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304))])), 72);
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((ax3_0_0 + (int64_t)1) & (int64_t)1) * (int64_t)9216) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304)) + (int64_t)1152)])), 72);
    for (int ax1_0_3_1 = 0; ax1_0_3_1 < 2; ++ax1_0_3_1) {
      for (int ax2_0_3_1 = 0; ax2_0_3_1 < 2; ++ax2_0_3_1) {
        int cse_v23 = ((ax1_0_3_1 * 2) + ax2_0_3_1);
        nvcuda::wmma::mma_sync(C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_1 * 2) + ax2_0_3_1)], A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[(ax1_0_3_1 + 2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(ax2_0_3_1 + 2)], C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_1 * 2) + ax2_0_3_1)]);
      }
    }
  }
  for (int ax3_0_1_1 = 0; ax3_0_1_1 < 3; ++ax3_0_1_1) {
    int64_t cse_v24 = (((int64_t)ax3_0_1_1) * (int64_t)16);
    int cse_v33 = (((ax3_0_1_1 + 1) & 1) * 2);
    int64_t cse_v34 = (((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304) + (((int64_t)ax3_0_1_1) * (int64_t)16));
    nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304) + (((int64_t)ax3_0_1_1) * (int64_t)16)) + (int64_t)27664)])), 72);
    int cse_v41 = ((((ax3_0_1_1 + 1) & 1) * 2) + 1);
    nvcuda::wmma::load_matrix_sync(A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[((((ax3_0_1_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)2304) + (((int64_t)ax3_0_1_1) * (int64_t)16)) + (int64_t)28816)])), 72);
    int64_t cse_v35 = (((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304) + (((int64_t)ax3_0_1_1) * (int64_t)16));
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304) + (((int64_t)ax3_0_1_1) * (int64_t)16)) + (int64_t)9232)])), 72);
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[((((ax3_0_1_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)2304) + (((int64_t)ax3_0_1_1) * (int64_t)16)) + (int64_t)10384)])), 72);
    for (int ax1_0_3_2 = 0; ax1_0_3_2 < 2; ++ax1_0_3_2) {
      for (int ax2_0_3_2 = 0; ax2_0_3_2 < 2; ++ax2_0_3_2) {
        int cse_v25 = ((ax1_0_3_2 * 2) + ax2_0_3_2);
        int cse_v26 = ((ax3_0_1_1 & 1) * 2);
        nvcuda::wmma::mma_sync(C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_2 * 2) + ax2_0_3_2)], A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_1 & 1) * 2) + ax1_0_3_2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_1 & 1) * 2) + ax2_0_3_2)], C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_2 * 2) + ax2_0_3_2)]);
      }
    }
  }
  for (int ax1_0_3_3 = 0; ax1_0_3_3 < 2; ++ax1_0_3_3) {
    for (int ax2_0_3_3 = 0; ax2_0_3_3 < 2; ++ax2_0_3_3) {
      int cse_v27 = ((ax1_0_3_3 * 2) + ax2_0_3_3);
      nvcuda::wmma::mma_sync(C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_3 * 2) + ax2_0_3_3)], A_reindex_pad_shared_dyn_wmma_matrix_a_ptr[(ax1_0_3_3 + 2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(ax2_0_3_3 + 2)], C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_3 * 2) + ax2_0_3_3)]);
    }
  }
  int64_t cse_v28 = ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)4096);
  int64_t cse_v29 = ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)32);
  __syncthreads();
  for (int ax0_0 = 0; ax0_0 < 2; ++ax0_0) {
    for (int ax1_0 = 0; ax1_0 < 2; ++ax1_0) {
      nvcuda::wmma::store_matrix_sync((&(((float*)buf_dyn_shmem_ptr)[(((((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)4096) + (((int64_t)ax0_0) * (int64_t)2048)) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)32)) + (((int64_t)ax1_0) * (int64_t)16))])), C_reindex_pad_shared_dyn_wmma_accumulator_ptr[((ax0_0 * 2) + ax1_0)], 128, nvcuda::wmma::mem_row_major);
    }
  }
  __syncthreads();
  for (int64_t ax0_ax1_fused_0_8 = (int64_t)0; ax0_ax1_fused_0_8 < (int64_t)8; ++ax0_ax1_fused_0_8) {
    int64_t cse_v12 = (((int64_t)threadIdx.x) >> (int64_t)3);
    if (((((((int64_t)blockIdx.x) * (int64_t)128) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)32)) + (ax0_ax1_fused_0_8 * (int64_t)4)) + (((int64_t)threadIdx.x) >> (int64_t)3)) < m) {
      int64_t cse_v30 = ((((int64_t)threadIdx.x) & (int64_t)7) * (int64_t)4);
      *(float4*)(C_ptr + (((((((((int64_t)blockIdx.x) * (int64_t)32768) + ((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)8192)) + (ax0_ax1_fused_0_8 * (int64_t)1024)) + ((((int64_t)threadIdx.x) >> (int64_t)3) * (int64_t)256)) + (((int64_t)blockIdx.y) * (int64_t)128)) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)32)) + ((((int64_t)threadIdx.x) & (int64_t)7) * (int64_t)4))) = *(float4*)(((float*)buf_dyn_shmem_ptr) + ((((((((int64_t)threadIdx.y) & (int64_t)3) * (int64_t)4096) + (ax0_ax1_fused_0_8 * (int64_t)512)) + ((((int64_t)threadIdx.x) >> (int64_t)3) * (int64_t)128)) + ((((int64_t)threadIdx.y) >> (int64_t)2) * (int64_t)32)) + ((((int64_t)threadIdx.x) & (int64_t)7) * (int64_t)4)));
    }
  }
}

