
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
extern "C" __global__ void __launch_bounds__(512) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(512) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  extern __shared__ __align__(64) uchar buf_dyn_shmem_ptr[];
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> C_reindex_shared_dyn_wmma_accumulator_ptr[4];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, half, nvcuda::wmma::row_major> A_reindex_shared_dyn_wmma_matrix_a_ptr[4];
  nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, half, nvcuda::wmma::col_major> B_reindex_shared_dyn_wmma_matrix_b_ptr[4];
  for (int ax1_0_3_init = 0; ax1_0_3_init < 2; ++ax1_0_3_init) {
    for (int ax2_0_3_init = 0; ax2_0_3_init < 2; ++ax2_0_3_init) {
      nvcuda::wmma::fill_fragment(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_init * 2) + ax2_0_3_init)], 0x0p+0f/*0.000000e+00*/);
    }
  }
  int cse_v1 = (((int)blockIdx.x) * 32768);
  int cse_v2 = (((int)threadIdx.y) * 512);
  int cse_v3 = (((int)threadIdx.x) >> 4);
  int cse_v4 = (((int)threadIdx.x) & 15);
  int cse_v5 = (((int)threadIdx.y) * 144);
  int cse_v15 = ((((int)threadIdx.x) >> 4) * 256);
  int cse_v16 = ((((int)threadIdx.x) & 15) * 4);
  int cse_v17 = ((((int)threadIdx.x) >> 4) * 72);
  for (int ax0_ax1_fused_0 = 0; ax0_ax1_fused_0 < 4; ++ax0_ax1_fused_0) {
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((ax0_ax1_fused_0 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4)) + 27648)) = *(half4*)(A_ptr + (((((((int)blockIdx.x) * 32768) + (ax0_ax1_fused_0 * 8192)) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)threadIdx.x) & 15) * 4)));
  }
  int cse_v6 = (((int)blockIdx.y) * 128);
  int cse_v7 = (((int)threadIdx.y) * 2);
  int cse_v35 = (((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128));
  for (int ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 4; ++ax0_ax1_fused_0_1) {
    int4 v_ = make_int4((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_1 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)))+(256*0), (((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_1 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)))+(256*1), (((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_1 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)))+(256*2), (((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_1 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)))+(256*3));
    *(half4*)(((half*)buf_dyn_shmem_ptr) + ((((ax0_ax1_fused_0_1 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4))) = make_half4(B_ptr[v_.x],B_ptr[v_.y],B_ptr[v_.z],B_ptr[v_.w]);
  }
  for (int ax0_ax1_fused_0_2 = 0; ax0_ax1_fused_0_2 < 4; ++ax0_ax1_fused_0_2) {
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((ax0_ax1_fused_0_2 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4)) + 36864)) = *(half4*)(A_ptr + ((((((((int)blockIdx.x) * 32768) + (ax0_ax1_fused_0_2 * 8192)) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)threadIdx.x) & 15) * 4)) + 64));
  }
  for (int ax0_ax1_fused_0_3 = 0; ax0_ax1_fused_0_3 < 4; ++ax0_ax1_fused_0_3) {
    int4 v__1 = make_int4(((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_3 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 16384))+(256*0), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_3 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 16384))+(256*1), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_3 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 16384))+(256*2), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_3 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 16384))+(256*3));
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((ax0_ax1_fused_0_3 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4)) + 9216)) = make_half4(B_ptr[v__1.x],B_ptr[v__1.y],B_ptr[v__1.z],B_ptr[v__1.w]);
  }
  for (int ax0_ax1_fused_0_4 = 0; ax0_ax1_fused_0_4 < 4; ++ax0_ax1_fused_0_4) {
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((ax0_ax1_fused_0_4 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4)) + 46080)) = *(half4*)(A_ptr + ((((((((int)blockIdx.x) * 32768) + (ax0_ax1_fused_0_4 * 8192)) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)threadIdx.x) & 15) * 4)) + 128));
  }
  for (int ax0_ax1_fused_0_5 = 0; ax0_ax1_fused_0_5 < 4; ++ax0_ax1_fused_0_5) {
    int4 v__2 = make_int4(((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_5 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 32768))+(256*0), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_5 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 32768))+(256*1), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_5 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 32768))+(256*2), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_5 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 32768))+(256*3));
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((ax0_ax1_fused_0_5 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4)) + 18432)) = make_half4(B_ptr[v__2.x],B_ptr[v__2.y],B_ptr[v__2.z],B_ptr[v__2.w]);
  }
  int cse_v8 = (((int)threadIdx.y) & 3);
  int cse_v18 = ((((int)threadIdx.y) & 3) * 2304);
  __syncthreads();
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 27648)])), 72);
  int cse_v36 = (((((int)threadIdx.y) & 3) * 2304) + 1152);
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 28800)])), 72);
  int cse_v9 = (((int)threadIdx.y) >> 2);
  int cse_v19 = ((((int)threadIdx.y) >> 2) * 2304);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[((((int)threadIdx.y) >> 2) * 2304)])), 72);
  int cse_v37 = (((((int)threadIdx.y) >> 2) * 2304) + 1152);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) >> 2) * 2304) + 1152)])), 72);
  for (int ax3_0_1 = 0; ax3_0_1 < 3; ++ax3_0_1) {
    int cse_v10 = (ax3_0_1 * 16);
    int cse_v38 = (((ax3_0_1 + 1) & 1) * 2);
    int cse_v39 = (((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1 * 16));
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1 * 16)) + 27664)])), 72);
    int cse_v50 = ((((ax3_0_1 + 1) & 1) * 2) + 1);
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[((((ax3_0_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1 * 16)) + 28816)])), 72);
    int cse_v40 = (((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1 * 16));
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1 * 16)) + 16)])), 72);
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[((((ax3_0_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1 * 16)) + 1168)])), 72);
    for (int ax1_0_3 = 0; ax1_0_3 < 2; ++ax1_0_3) {
      for (int ax2_0_3 = 0; ax2_0_3 < 2; ++ax2_0_3) {
        int cse_v20 = ((ax1_0_3 * 2) + ax2_0_3);
        int cse_v21 = ((ax3_0_1 & 1) * 2);
        nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3 * 2) + ax2_0_3)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1 & 1) * 2) + ax1_0_3)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1 & 1) * 2) + ax2_0_3)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3 * 2) + ax2_0_3)]);
      }
    }
  }
  __syncthreads();
  for (int ax0_ax1_fused_0_6 = 0; ax0_ax1_fused_0_6 < 4; ++ax0_ax1_fused_0_6) {
    *(half4*)(((half*)buf_dyn_shmem_ptr) + (((((ax0_ax1_fused_0_6 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4)) + 27648)) = *(half4*)(A_ptr + ((((((((int)blockIdx.x) * 32768) + (ax0_ax1_fused_0_6 * 8192)) + (((int)threadIdx.y) * 512)) + ((((int)threadIdx.x) >> 4) * 256)) + ((((int)threadIdx.x) & 15) * 4)) + 192));
  }
  for (int ax0_ax1_fused_0_7 = 0; ax0_ax1_fused_0_7 < 4; ++ax0_ax1_fused_0_7) {
    int4 v__3 = make_int4(((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_7 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 49152))+(256*0), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_7 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 49152))+(256*1), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_7 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 49152))+(256*2), ((((((((((int)threadIdx.x) & 15) * 1024) + (((int)blockIdx.y) * 128)) + (ax0_ax1_fused_0_7 * 32)) + (((int)threadIdx.y) * 2)) + (((int)threadIdx.x) >> 4)) + 49152))+(256*3));
    *(half4*)(((half*)buf_dyn_shmem_ptr) + ((((ax0_ax1_fused_0_7 * 2304) + (((int)threadIdx.y) * 144)) + ((((int)threadIdx.x) >> 4) * 72)) + ((((int)threadIdx.x) & 15) * 4))) = make_half4(B_ptr[v__3.x],B_ptr[v__3.y],B_ptr[v__3.z],B_ptr[v__3.w]);
  }
  __syncthreads();
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 36864)])), 72);
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 38016)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) >> 2) * 2304) + 9216)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) >> 2) * 2304) + 10368)])), 72);
  for (int ax1_0_3_1 = 0; ax1_0_3_1 < 2; ++ax1_0_3_1) {
    for (int ax2_0_3_1 = 0; ax2_0_3_1 < 2; ++ax2_0_3_1) {
      int cse_v22 = ((ax1_0_3_1 * 2) + ax2_0_3_1);
      nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_1 * 2) + ax2_0_3_1)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(ax1_0_3_1 + 2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(ax2_0_3_1 + 2)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_1 * 2) + ax2_0_3_1)]);
    }
  }
  for (int ax3_0_1_1 = 0; ax3_0_1_1 < 3; ++ax3_0_1_1) {
    int cse_v11 = (ax3_0_1_1 * 16);
    int cse_v41 = (((ax3_0_1_1 + 1) & 1) * 2);
    int cse_v42 = (((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_1 * 16));
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_1 * 16)) + 36880)])), 72);
    int cse_v51 = ((((ax3_0_1_1 + 1) & 1) * 2) + 1);
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[((((ax3_0_1_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_1 * 16)) + 38032)])), 72);
    int cse_v43 = (((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_1 * 16));
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_1 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_1 * 16)) + 9232)])), 72);
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[((((ax3_0_1_1 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_1 * 16)) + 10384)])), 72);
    for (int ax1_0_3_2 = 0; ax1_0_3_2 < 2; ++ax1_0_3_2) {
      for (int ax2_0_3_2 = 0; ax2_0_3_2 < 2; ++ax2_0_3_2) {
        int cse_v23 = ((ax1_0_3_2 * 2) + ax2_0_3_2);
        int cse_v24 = ((ax3_0_1_1 & 1) * 2);
        nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_2 * 2) + ax2_0_3_2)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_1 & 1) * 2) + ax1_0_3_2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_1 & 1) * 2) + ax2_0_3_2)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_2 * 2) + ax2_0_3_2)]);
      }
    }
  }
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 46080)])), 72);
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 47232)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) >> 2) * 2304) + 18432)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) >> 2) * 2304) + 19584)])), 72);
  for (int ax1_0_3_3 = 0; ax1_0_3_3 < 2; ++ax1_0_3_3) {
    for (int ax2_0_3_3 = 0; ax2_0_3_3 < 2; ++ax2_0_3_3) {
      int cse_v25 = ((ax1_0_3_3 * 2) + ax2_0_3_3);
      nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_3 * 2) + ax2_0_3_3)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(ax1_0_3_3 + 2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(ax2_0_3_3 + 2)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_3 * 2) + ax2_0_3_3)]);
    }
  }
  for (int ax3_0_1_2 = 0; ax3_0_1_2 < 3; ++ax3_0_1_2) {
    int cse_v12 = (ax3_0_1_2 * 16);
    int cse_v44 = (((ax3_0_1_2 + 1) & 1) * 2);
    int cse_v45 = (((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_2 * 16));
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_2 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_2 * 16)) + 46096)])), 72);
    int cse_v52 = ((((ax3_0_1_2 + 1) & 1) * 2) + 1);
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[((((ax3_0_1_2 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_2 * 16)) + 47248)])), 72);
    int cse_v46 = (((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_2 * 16));
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_2 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_2 * 16)) + 18448)])), 72);
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[((((ax3_0_1_2 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_2 * 16)) + 19600)])), 72);
    for (int ax1_0_3_4 = 0; ax1_0_3_4 < 2; ++ax1_0_3_4) {
      for (int ax2_0_3_4 = 0; ax2_0_3_4 < 2; ++ax2_0_3_4) {
        int cse_v26 = ((ax1_0_3_4 * 2) + ax2_0_3_4);
        int cse_v27 = ((ax3_0_1_2 & 1) * 2);
        nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_4 * 2) + ax2_0_3_4)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_2 & 1) * 2) + ax1_0_3_4)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_2 & 1) * 2) + ax2_0_3_4)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_4 * 2) + ax2_0_3_4)]);
      }
    }
  }
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 27648)])), 72);
  nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) & 3) * 2304) + 28800)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[0], (&(((half*)buf_dyn_shmem_ptr)[((((int)threadIdx.y) >> 2) * 2304)])), 72);
  nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[1], (&(((half*)buf_dyn_shmem_ptr)[(((((int)threadIdx.y) >> 2) * 2304) + 1152)])), 72);
  for (int ax1_0_3_5 = 0; ax1_0_3_5 < 2; ++ax1_0_3_5) {
    for (int ax2_0_3_5 = 0; ax2_0_3_5 < 2; ++ax2_0_3_5) {
      int cse_v28 = ((ax1_0_3_5 * 2) + ax2_0_3_5);
      nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_5 * 2) + ax2_0_3_5)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(ax1_0_3_5 + 2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(ax2_0_3_5 + 2)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_5 * 2) + ax2_0_3_5)]);
    }
  }
  for (int ax3_0_1_3 = 0; ax3_0_1_3 < 3; ++ax3_0_1_3) {
    int cse_v13 = (ax3_0_1_3 * 16);
    int cse_v47 = (((ax3_0_1_3 + 1) & 1) * 2);
    int cse_v48 = (((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_3 * 16));
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_3 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_3 * 16)) + 27664)])), 72);
    int cse_v53 = ((((ax3_0_1_3 + 1) & 1) * 2) + 1);
    nvcuda::wmma::load_matrix_sync(A_reindex_shared_dyn_wmma_matrix_a_ptr[((((ax3_0_1_3 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) & 3) * 2304) + (ax3_0_1_3 * 16)) + 28816)])), 72);
    int cse_v49 = (((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_3 * 16));
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_3 + 1) & 1) * 2)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_3 * 16)) + 16)])), 72);
    nvcuda::wmma::load_matrix_sync(B_reindex_shared_dyn_wmma_matrix_b_ptr[((((ax3_0_1_3 + 1) & 1) * 2) + 1)], (&(((half*)buf_dyn_shmem_ptr)[((((((int)threadIdx.y) >> 2) * 2304) + (ax3_0_1_3 * 16)) + 1168)])), 72);
    for (int ax1_0_3_6 = 0; ax1_0_3_6 < 2; ++ax1_0_3_6) {
      for (int ax2_0_3_6 = 0; ax2_0_3_6 < 2; ++ax2_0_3_6) {
        int cse_v29 = ((ax1_0_3_6 * 2) + ax2_0_3_6);
        int cse_v30 = ((ax3_0_1_3 & 1) * 2);
        nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_6 * 2) + ax2_0_3_6)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(((ax3_0_1_3 & 1) * 2) + ax1_0_3_6)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(((ax3_0_1_3 & 1) * 2) + ax2_0_3_6)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_6 * 2) + ax2_0_3_6)]);
      }
    }
  }
  for (int ax1_0_3_7 = 0; ax1_0_3_7 < 2; ++ax1_0_3_7) {
    for (int ax2_0_3_7 = 0; ax2_0_3_7 < 2; ++ax2_0_3_7) {
      int cse_v31 = ((ax1_0_3_7 * 2) + ax2_0_3_7);
      nvcuda::wmma::mma_sync(C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_7 * 2) + ax2_0_3_7)], A_reindex_shared_dyn_wmma_matrix_a_ptr[(ax1_0_3_7 + 2)], B_reindex_shared_dyn_wmma_matrix_b_ptr[(ax2_0_3_7 + 2)], C_reindex_shared_dyn_wmma_accumulator_ptr[((ax1_0_3_7 * 2) + ax2_0_3_7)]);
    }
  }
  int cse_v32 = ((((int)threadIdx.y) & 3) * 4096);
  int cse_v33 = ((((int)threadIdx.y) >> 2) * 32);
  __syncthreads();
  for (int ax0_0 = 0; ax0_0 < 2; ++ax0_0) {
    for (int ax1_0 = 0; ax1_0 < 2; ++ax1_0) {
      nvcuda::wmma::store_matrix_sync((&(((float*)buf_dyn_shmem_ptr)[(((((((int)threadIdx.y) & 3) * 4096) + (ax0_0 * 2048)) + ((((int)threadIdx.y) >> 2) * 32)) + (ax1_0 * 16))])), C_reindex_shared_dyn_wmma_accumulator_ptr[((ax0_0 * 2) + ax1_0)], 128, nvcuda::wmma::mem_row_major);
    }
  }
  __syncthreads();
  for (int ax0_ax1_fused_0_8 = 0; ax0_ax1_fused_0_8 < 8; ++ax0_ax1_fused_0_8) {
    int cse_v14 = (((int)threadIdx.x) >> 3);
    int cse_v34 = ((((int)threadIdx.x) & 7) * 4);
    *(float4*)(C_ptr + (((((((((int)blockIdx.x) * 32768) + ((((int)threadIdx.y) & 3) * 8192)) + (ax0_ax1_fused_0_8 * 1024)) + ((((int)threadIdx.x) >> 3) * 256)) + (((int)blockIdx.y) * 128)) + ((((int)threadIdx.y) >> 2) * 32)) + ((((int)threadIdx.x) & 7) * 4))) = *(float4*)(((float*)buf_dyn_shmem_ptr) + ((((((((int)threadIdx.y) & 3) * 4096) + (ax0_ax1_fused_0_8 * 512)) + ((((int)threadIdx.x) >> 3) * 128)) + ((((int)threadIdx.y) >> 2) * 32)) + ((((int)threadIdx.x) & 7) * 4)));
  }
}

