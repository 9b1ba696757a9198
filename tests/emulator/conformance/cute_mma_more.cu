// CuTe's MMA_Traits thread-value layouts for the mma.sync forms other than m16n8k16 f32.f16:
//   NAME_{A,B,C} THREAD VALUE INDEX   (thread, value) -> column-major index in the (M, K) / (N, K) / (M, N) tile
#include <cstdio>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm89.hpp>

using namespace cute;

template <class Layout>
void print_thr_val(char const* name, char const* side, Layout const& layout) {
  for (int t = 0; t < size<0>(layout); ++t)
    for (int v = 0; v < size<1>(layout); ++v)
      printf("%s %s %d %d %d\n", name, side, t, v, int(layout(t, v)));
}

template <class Traits>
void print_mma(char const* name) {
  print_thr_val(name, "A", typename Traits::ALayout{});
  print_thr_val(name, "B", typename Traits::BLayout{});
  print_thr_val(name, "C", typename Traits::CLayout{});
}

int main() {
  print_mma<MMA_Traits<SM80_16x8x8_F16F16F16F16_TN>>("m16n8k8.f16");
  print_mma<MMA_Traits<SM80_16x8x16_F16F16F16F16_TN>>("m16n8k16.f16");
  print_mma<MMA_Traits<SM80_16x8x8_F32BF16BF16F32_TN>>("m16n8k8.bf16");
  print_mma<MMA_Traits<SM80_16x8x8_F32TF32TF32F32_TN>>("m16n8k8.tf32");
  print_mma<MMA_Traits<SM80_16x8x16_S32S8S8S32_TN>>("m16n8k16.s8");
  print_mma<MMA_Traits<SM80_16x8x32_S32S8S8S32_TN>>("m16n8k32.s8");
  print_mma<MMA_Traits<SM89_16x8x32_F32E4M3E4M3F32_TN>>("m16n8k32.e4m3");
  return 0;
}
