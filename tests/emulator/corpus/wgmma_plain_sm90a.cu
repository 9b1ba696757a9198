
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

#ifndef HOST_DEVICE
#define HOST_DEVICE __forceinline__ __host__ __device__
#endif
union GmmaDescriptor
{
  HOST_DEVICE constexpr
  GmmaDescriptor() noexcept : desc_(0) {}
  HOST_DEVICE constexpr
  GmmaDescriptor(uint64_t desc) noexcept : desc_(desc) {}
  HOST_DEVICE constexpr
  GmmaDescriptor(GmmaDescriptor const& t) noexcept : desc_(t.desc_) {}
  HOST_DEVICE constexpr
  GmmaDescriptor(GmmaDescriptor && t) noexcept : desc_(t.desc_) {}

  HOST_DEVICE constexpr
  GmmaDescriptor& operator=(GmmaDescriptor const& t) noexcept {
    desc_ = t.desc_;
    return *this;
  }

  HOST_DEVICE constexpr
  GmmaDescriptor& operator=(GmmaDescriptor && t) noexcept {
    desc_ = t.desc_;
    return *this;
  }

  uint64_t desc_;
  uint32_t reg32_[2];
  uint16_t reg16_[4];

  // Bitfield implementation avoids the need for shifts in assignment
  struct {
    // start_address, bit [0,14), 4LSB not included
    uint16_t start_address_ : 14, : 2;        // 14 bits [0,14), 2 bits unused
    // leading dimension byte offset, bit [16,30), 4LSB not included
    // For N: This is the stride from the first col to the second col of the 8x2 brick in INTERLEAVED
    //   Unused for all SWIZZLE_* layouts (and assumed to be 1)
    // For T: This is the stride from the first 8 rows to the next 8 rows.
    uint16_t leading_byte_offset_ : 14, : 2;  // 14 bits [0,14), 2 bits unused
    // stride dimension byte offset, bit [32,46), 4LSB not included
    // For N: This is the stride from the first 8 rows to the next 8 rows.
    // For T: This is the stride fro mthe first 8 cols to the next 8 cols.
    uint16_t stride_byte_offset_ : 14, : 2;   // 14 bits [0,14), 2 bits unused
    // base_offset, bit [49,52)
    // Valid only for SWIZZLE_128B and SWIZZLE_64B
    uint8_t : 1, base_offset_ : 3, : 4;       // 1 bit unused, 3 bits [1,4), 4 bits unused
    // layout type, bit [62,64)
    // SWIZZLE_NONE = 0, SWIZZLE_32B = 3, SWIZZLE_64B = 2, SWIZZLE_128B = 1
    uint8_t : 6, layout_type_ : 2;            // 6 bits unused, 2 bits [6,8)
  } bitfield;

  // Decay to a uint64_t
  HOST_DEVICE constexpr
  operator uint64_t() const noexcept { return desc_; }
};
__forceinline__ __device__ void tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_0() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_wgmma_f16_ss_mma_async_sync_aligned_m64n128k16_f32_f16_f16_1_1_0_0(float& __d0, float& __d1, float& __d2, float& __d3, float& __d4, float& __d5, float& __d6, float& __d7, float& __d8, float& __d9, float& __d10, float& __d11, float& __d12, float& __d13, float& __d14, float& __d15, float& __d16, float& __d17, float& __d18, float& __d19, float& __d20, float& __d21, float& __d22, float& __d23, float& __d24, float& __d25, float& __d26, float& __d27, float& __d28, float& __d29, float& __d30, float& __d31, float& __d32, float& __d33, float& __d34, float& __d35, float& __d36, float& __d37, float& __d38, float& __d39, float& __d40, float& __d41, float& __d42, float& __d43, float& __d44, float& __d45, float& __d46, float& __d47, float& __d48, float& __d49, float& __d50, float& __d51, float& __d52, float& __d53, float& __d54, float& __d55, float& __d56, float& __d57, float& __d58, float& __d59, float& __d60, float& __d61, float& __d62, float& __d63, uint64_t __a_desc, uint64_t __b_desc, uint32_t __scale_d) {
  asm volatile("{ .reg .pred ps0; setp.ne.b32 ps0, %66, 0; wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, ps0, 1, 1, 0, 0; }" : "+f"(__d0), "+f"(__d1), "+f"(__d2), "+f"(__d3), "+f"(__d4), "+f"(__d5), "+f"(__d6), "+f"(__d7), "+f"(__d8), "+f"(__d9), "+f"(__d10), "+f"(__d11), "+f"(__d12), "+f"(__d13), "+f"(__d14), "+f"(__d15), "+f"(__d16), "+f"(__d17), "+f"(__d18), "+f"(__d19), "+f"(__d20), "+f"(__d21), "+f"(__d22), "+f"(__d23), "+f"(__d24), "+f"(__d25), "+f"(__d26), "+f"(__d27), "+f"(__d28), "+f"(__d29), "+f"(__d30), "+f"(__d31), "+f"(__d32), "+f"(__d33), "+f"(__d34), "+f"(__d35), "+f"(__d36), "+f"(__d37), "+f"(__d38), "+f"(__d39), "+f"(__d40), "+f"(__d41), "+f"(__d42), "+f"(__d43), "+f"(__d44), "+f"(__d45), "+f"(__d46), "+f"(__d47), "+f"(__d48), "+f"(__d49), "+f"(__d50), "+f"(__d51), "+f"(__d52), "+f"(__d53), "+f"(__d54), "+f"(__d55), "+f"(__d56), "+f"(__d57), "+f"(__d58), "+f"(__d59), "+f"(__d60), "+f"(__d61), "+f"(__d62), "+f"(__d63) : "l"(__a_desc), "l"(__b_desc), "r"(__scale_d));
}
__forceinline__ __device__ void tvm_builtin_ptx_wgmma_commit_group_commit_group_sync_aligned() {
  asm volatile("wgmma.commit_group.sync.aligned;" :  :  : "memory");
}
__forceinline__ __device__ void tvm_builtin_ptx_wgmma_fence_fence_sync_aligned() {
  asm volatile("wgmma.fence.sync.aligned;" :  :  : "memory");
}

__forceinline__ __device__ void ptx_wgmma_encode_matrix_descriptor(uint64_t* desc, void* addr, int ldo, int sdo, int swizzle) {
  GmmaDescriptor _desc{};  // value-init: reading uncovered pad bits is UB

  switch (swizzle) {
    case 0: _desc.bitfield.layout_type_ = uint8_t(0); break; // No swizzle
    case 1: _desc.bitfield.layout_type_ = uint8_t(3); break; // 32B swizzle
    case 2: _desc.bitfield.layout_type_ = uint8_t(2); break; // 64B swizzle
    case 3: _desc.bitfield.layout_type_ = uint8_t(1); break; // 128B swizzle
  }

  uint32_t start_address = __cvta_generic_to_shared(addr);
  _desc.bitfield.start_address_ = static_cast<uint16_t>(start_address >> 4);

  constexpr uint8_t base_offset = 0;
  _desc.bitfield.base_offset_ = base_offset;

  _desc.bitfield.stride_byte_offset_  = static_cast<uint32_t>(sdo);
  _desc.bitfield.leading_byte_offset_ = static_cast<uint32_t>(ldo);

  *desc = (uint64_t)_desc;
}
__forceinline__ __device__ void tvm_builtin_ptx_fence_proxy_proxy_async_shared__cta() {
  asm volatile("fence.proxy.async.shared::cta;" :  :  : "memory");
}
extern "C" __global__ void __launch_bounds__(128) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr);
extern "C" __global__ void __launch_bounds__(128) main_kernel(half* __restrict__ A_ptr, half* __restrict__ B_ptr, float* __restrict__ C_ptr) {
  extern __shared__ __align__(64) uchar buf_dyn_shmem_ptr[];
  alignas(64) float C_local_ptr[64];
  alignas(64) uint64_t desc_a_ptr[1];
  alignas(64) uint64_t desc_b_ptr[1];
  C_local_ptr[0] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[1] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[2] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[3] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[4] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[5] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[6] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[7] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[8] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[9] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[10] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[11] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[12] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[13] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[14] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[15] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[16] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[17] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[18] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[19] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[20] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[21] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[22] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[23] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[24] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[25] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[26] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[27] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[28] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[29] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[30] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[31] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[32] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[33] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[34] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[35] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[36] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[37] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[38] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[39] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[40] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[41] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[42] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[43] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[44] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[45] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[46] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[47] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[48] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[49] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[50] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[51] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[52] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[53] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[54] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[55] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[56] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[57] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[58] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[59] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[60] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[61] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[62] = 0x0p+0f/*0.000000e+00*/;
  C_local_ptr[63] = 0x0p+0f/*0.000000e+00*/;
  int cse_v1 = (((int)blockIdx.y) * 16384);
  for (int k_0 = 0; k_0 < 4; ++k_0) {
    int cse_v2 = (((int)threadIdx.x) >> 3);
    int cse_v3 = (k_0 * 64);
    int cse_v4 = (((int)threadIdx.x) & 7);
    int cse_v5 = ((((int)threadIdx.x) >> 3) * 256);
    int cse_v6 = ((((int)threadIdx.x) & 7) * 8);
    int cse_v7 = ((((int)threadIdx.x) >> 3) * 8);
    __syncthreads();
    for (int ax0_ax1_fused_0 = 0; ax0_ax1_fused_0 < 4; ++ax0_ax1_fused_0) {
      *(uint4*)(((half*)buf_dyn_shmem_ptr) + ((((((int)threadIdx.x) & 7) * 512) + (ax0_ax1_fused_0 * 128)) + ((((int)threadIdx.x) >> 3) * 8))) = *(uint4*)(A_ptr + (((((((int)blockIdx.y) * 16384) + (ax0_ax1_fused_0 * 4096)) + ((((int)threadIdx.x) >> 3) * 256)) + (k_0 * 64)) + ((((int)threadIdx.x) & 7) * 8)));
    }
    for (int ax0_ax1_fused_0_1 = 0; ax0_ax1_fused_0_1 < 8; ++ax0_ax1_fused_0_1) {
      *(uint4*)(((half*)buf_dyn_shmem_ptr) + (((((((int)threadIdx.x) & 7) * 1024) + (ax0_ax1_fused_0_1 * 128)) + ((((int)threadIdx.x) >> 3) * 8)) + 4096)) = *(uint4*)(B_ptr + (((((((int)blockIdx.x) * 32768) + (ax0_ax1_fused_0_1 * 4096)) + ((((int)threadIdx.x) >> 3) * 256)) + (k_0 * 64)) + ((((int)threadIdx.x) & 7) * 8)));
    }
    tvm_builtin_ptx_fence_proxy_proxy_async_shared__cta();
    __syncthreads();
    for (int k_1 = 0; k_1 < 4; ++k_1) {
      ptx_wgmma_encode_matrix_descriptor((&(desc_a_ptr[0])), (&(((half*)buf_dyn_shmem_ptr)[(k_1 * 1024)])), 64, 8, 0);
      ptx_wgmma_encode_matrix_descriptor((&(desc_b_ptr[0])), (&(((half*)buf_dyn_shmem_ptr)[((k_1 * 2048) + 4096)])), 128, 8, 0);
      tvm_builtin_ptx_wgmma_fence_fence_sync_aligned();
      tvm_builtin_ptx_wgmma_f16_ss_mma_async_sync_aligned_m64n128k16_f32_f16_f16_1_1_0_0(C_local_ptr[0], C_local_ptr[1], C_local_ptr[2], C_local_ptr[3], C_local_ptr[4], C_local_ptr[5], C_local_ptr[6], C_local_ptr[7], C_local_ptr[8], C_local_ptr[9], C_local_ptr[10], C_local_ptr[11], C_local_ptr[12], C_local_ptr[13], C_local_ptr[14], C_local_ptr[15], C_local_ptr[16], C_local_ptr[17], C_local_ptr[18], C_local_ptr[19], C_local_ptr[20], C_local_ptr[21], C_local_ptr[22], C_local_ptr[23], C_local_ptr[24], C_local_ptr[25], C_local_ptr[26], C_local_ptr[27], C_local_ptr[28], C_local_ptr[29], C_local_ptr[30], C_local_ptr[31], C_local_ptr[32], C_local_ptr[33], C_local_ptr[34], C_local_ptr[35], C_local_ptr[36], C_local_ptr[37], C_local_ptr[38], C_local_ptr[39], C_local_ptr[40], C_local_ptr[41], C_local_ptr[42], C_local_ptr[43], C_local_ptr[44], C_local_ptr[45], C_local_ptr[46], C_local_ptr[47], C_local_ptr[48], C_local_ptr[49], C_local_ptr[50], C_local_ptr[51], C_local_ptr[52], C_local_ptr[53], C_local_ptr[54], C_local_ptr[55], C_local_ptr[56], C_local_ptr[57], C_local_ptr[58], C_local_ptr[59], C_local_ptr[60], C_local_ptr[61], C_local_ptr[62], C_local_ptr[63], desc_a_ptr[0], desc_b_ptr[0], (bool)1);
      tvm_builtin_ptx_wgmma_commit_group_commit_group_sync_aligned();
      tvm_builtin_ptx_wgmma_wait_group_wait_group_sync_aligned_0();
    }
  }
  int cse_v8 = (((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2));
  C_ptr[(((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2))] = C_local_ptr[0];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 1)] = C_local_ptr[1];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2048)] = C_local_ptr[2];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2049)] = C_local_ptr[3];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 8)] = C_local_ptr[4];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 9)] = C_local_ptr[5];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2056)] = C_local_ptr[6];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2057)] = C_local_ptr[7];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 16)] = C_local_ptr[8];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 17)] = C_local_ptr[9];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2064)] = C_local_ptr[10];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2065)] = C_local_ptr[11];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 24)] = C_local_ptr[12];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 25)] = C_local_ptr[13];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2072)] = C_local_ptr[14];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2073)] = C_local_ptr[15];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 32)] = C_local_ptr[16];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 33)] = C_local_ptr[17];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2080)] = C_local_ptr[18];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2081)] = C_local_ptr[19];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 40)] = C_local_ptr[20];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 41)] = C_local_ptr[21];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2088)] = C_local_ptr[22];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2089)] = C_local_ptr[23];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 48)] = C_local_ptr[24];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 49)] = C_local_ptr[25];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2096)] = C_local_ptr[26];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2097)] = C_local_ptr[27];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 56)] = C_local_ptr[28];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 57)] = C_local_ptr[29];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2104)] = C_local_ptr[30];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2105)] = C_local_ptr[31];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 64)] = C_local_ptr[32];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 65)] = C_local_ptr[33];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2112)] = C_local_ptr[34];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2113)] = C_local_ptr[35];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 72)] = C_local_ptr[36];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 73)] = C_local_ptr[37];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2120)] = C_local_ptr[38];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2121)] = C_local_ptr[39];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 80)] = C_local_ptr[40];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 81)] = C_local_ptr[41];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2128)] = C_local_ptr[42];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2129)] = C_local_ptr[43];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 88)] = C_local_ptr[44];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 89)] = C_local_ptr[45];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2136)] = C_local_ptr[46];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2137)] = C_local_ptr[47];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 96)] = C_local_ptr[48];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 97)] = C_local_ptr[49];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2144)] = C_local_ptr[50];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2145)] = C_local_ptr[51];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 104)] = C_local_ptr[52];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 105)] = C_local_ptr[53];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2152)] = C_local_ptr[54];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2153)] = C_local_ptr[55];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 112)] = C_local_ptr[56];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 113)] = C_local_ptr[57];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2160)] = C_local_ptr[58];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2161)] = C_local_ptr[59];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 120)] = C_local_ptr[60];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 121)] = C_local_ptr[61];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2168)] = C_local_ptr[62];
  C_ptr[((((((((int)blockIdx.y) * 16384) + ((((int)threadIdx.x) >> 5) * 4096)) + (((((int)threadIdx.x) & 31) >> 2) * 256)) + (((int)blockIdx.x) * 128)) + ((((int)threadIdx.x) & 3) * 2)) + 2169)] = C_local_ptr[63];
}

