// Prints CuTe's own tables of the encodings that tvm_twill/emulator/encodings.py writes down
// independently; tests/emulator/test_encodings.py compiles this host program with nvcc against the
// CuTe headers of the nvidia-cutlass wheel, runs it and compares line by line.
//
// Output, one fact per line (all numbers decimal):
//   mma NAME THREAD VALUE INDEX          MMA_Traits layouts: (thread, value) -> column-major index
//   ldsm NAME src|dst THREAD VALUE BIT   Copy_Traits<SM75_*_LDSM_*>: (thread, value bit) -> bit
//   gmmadesc START LBO SBO BASE LAYOUT DESC   GmmaDescriptor bitfield -> 64-bit value
//   opdesc NAME KB START LBO SBO LAYOUT  make_gmma_desc of a 16-wide K slice of a canonical tile
//   opaddr NAME KB ROW K BYTE            byte offset CuTe addresses for element (ROW, K) of that slice
#include <cstdio>

#include <cute/tensor.hpp>
#include <cute/atom/mma_traits_sm80.hpp>
#include <cute/atom/mma_traits_sm90_gmma.hpp>
#include <cute/atom/copy_traits_sm75.hpp>

using namespace cute;

template <class Layout>
void print_thr_val(char const* tag, char const* name, Layout const& layout) {
  for (int t = 0; t < size<0>(layout); ++t)
    for (int v = 0; v < size<1>(layout); ++v)
      printf("%s %s %d %d %d\n", tag, name, t, v, int(layout(t, v)));
}

template <class Traits>
void print_mma(char const* name) {
  print_thr_val("mma", (std::string(name) + "_A").c_str(), typename Traits::ALayout{});
  print_thr_val("mma", (std::string(name) + "_B").c_str(), typename Traits::BLayout{});
  print_thr_val("mma", (std::string(name) + "_C").c_str(), typename Traits::CLayout{});
}

template <class Op>
void print_ldsm(char const* name) {
  using T = Copy_Traits<Op>;
  auto src = typename T::SrcLayout{};
  auto dst = typename T::DstLayout{};
  for (int t = 0; t < size<0>(src); ++t)
    for (int v = 0; v < size<1>(src); ++v)
      printf("ldsm %s src %d %d %d\n", name, t, v, int(src(t, v)));
  for (int t = 0; t < size<0>(dst); ++t)
    for (int v = 0; v < size<1>(dst); ++v)
      printf("ldsm %s dst %d %d %d\n", name, t, v, int(dst(t, v)));
}

void print_desc(int start, int lbo, int sbo, int base, int layout) {
  GmmaDescriptor d;
  d.bitfield.start_address_ = start >> 4;
  d.bitfield.leading_byte_offset_ = lbo >> 4;
  d.bitfield.stride_byte_offset_ = sbo >> 4;
  d.bitfield.base_offset_ = base;
  d.bitfield.layout_type_ = layout;
  printf("gmmadesc %d %d %d %d %d %llu\n", start, lbo, sbo, base, layout, (unsigned long long)d.desc_);
}

// A canonical R x KT fp16 tile built from a GMMA layout atom, cut into 16-wide K slices (one wgmma
// k16 step each): the descriptor make_gmma_desc writes for each slice and where CuTe puts each element.
template <GMMA::Major Major, class Atom, int R, int KT>
void print_operand(char const* name) {
  alignas(1024) static half_t buf[R * KT];
  auto tile = make_tensor(make_smem_ptr(buf), tile_to_shape(Atom{}, Shape<Int<R>, Int<KT>>{}));
  for (int kb = 0; kb < KT / 16; ++kb) {
    auto s = local_tile(tile, Shape<Int<R>, _16>{}, make_coord(0, kb));
    GmmaDescriptor d = SM90::GMMA::make_gmma_desc<Major>(s);
    long start = (char const*)raw_pointer_cast(s.data()) - (char const*)buf;
    printf("opdesc %s %d %ld %d %d %d\n", name, kb, start, int(d.bitfield.leading_byte_offset_) << 4,
           int(d.bitfield.stride_byte_offset_) << 4, int(d.bitfield.layout_type_));
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < 16; ++k)
        printf("opaddr %s %d %d %d %ld\n", name, kb, r, k, (char const*)&s(r, k) - (char const*)buf);
  }
}

int main() {
  print_mma<MMA_Traits<SM80_16x8x16_F32F16F16F32_TN>>("sm80_16x8x16_f32f16f16f32_tn");
  print_thr_val("mma", "gmma_64x128x16_C", MMA_Traits<SM90_64x128x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>>::CLayout{});
  print_thr_val("mma", "gmma_64x64x16_C", MMA_Traits<SM90_64x64x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>>::CLayout{});
  print_thr_val("mma", "gmma_64x128x16_rs_A", MMA_Traits<SM90_64x128x16_F32F16F16_RS<GMMA::Major::K, GMMA::Major::K>>::ALayout{});
  print_ldsm<SM75_U32x1_LDSM_N>("x1");
  print_ldsm<SM75_U32x2_LDSM_N>("x2");
  print_ldsm<SM75_U32x4_LDSM_N>("x4");
  print_ldsm<SM75_U16x2_LDSM_T>("x1_trans");
  print_ldsm<SM75_U16x4_LDSM_T>("x2_trans");
  print_ldsm<SM75_U16x8_LDSM_T>("x4_trans");
  print_desc(0, 16, 1024, 0, 1);
  print_desc(0x3fff0, 0x3fff0, 0x3fff0, 7, 3);
  print_desc(1024 + 32, 128, 256, 0, 0);
  print_desc(49152, 16, 1024, 0, 2);
  print_operand<GMMA::Major::K, GMMA::Layout_K_INTER_Atom<half_t>, 64, 64>("k_inter_64");
  print_operand<GMMA::Major::K, GMMA::Layout_K_INTER_Atom<half_t>, 128, 32>("k_inter_128");
  print_operand<GMMA::Major::K, GMMA::Layout_K_SW32_Atom<half_t>, 64, 32>("k_sw32_64");
  print_operand<GMMA::Major::K, GMMA::Layout_K_SW64_Atom<half_t>, 64, 32>("k_sw64_64");
  print_operand<GMMA::Major::K, GMMA::Layout_K_SW128_Atom<half_t>, 64, 64>("k_sw128_64");
  print_operand<GMMA::Major::K, GMMA::Layout_K_SW128_Atom<half_t>, 128, 64>("k_sw128_128");
  print_operand<GMMA::Major::MN, GMMA::Layout_MN_INTER_Atom<half_t>, 64, 32>("mn_inter_64");
  print_operand<GMMA::Major::MN, GMMA::Layout_MN_SW32_Atom<half_t>, 64, 32>("mn_sw32_64");
  print_operand<GMMA::Major::MN, GMMA::Layout_MN_SW64_Atom<half_t>, 128, 32>("mn_sw64_128");
  print_operand<GMMA::Major::MN, GMMA::Layout_MN_SW128_Atom<half_t>, 128, 32>("mn_sw128_128");
  return 0;
}
