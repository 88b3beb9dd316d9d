/* Causal GQA attention on tensor cores: bf16 inputs, fp32 accumulation,
 * head dims 64 and 128, FlashAttention-2's structure (the math is that of
 * attention.cu; the entry points there choose this kernel for bf16).
 *
 * Building block: mma.sync.m16n8k16 (sm_80+): D[16x8] += A[16x16] B[16x8],
 * A and B bf16, C/D fp32. With g = lane/4 and c = lane%4 a lane holds
 *   A: a0 = A[g][2c..2c+1], a1 = A[g+8][2c..], a2 = A[g][2c+8..],
 *      a3 = A[g+8][2c+8..]                  (two bf16 per 32-bit register)
 *   B: b0 = B[2c..2c+1][g], b1 = B[2c+8..2c+9][g]
 *   C: c0, c1 = C[g][2c], C[g][2c+1];  c2, c3 = C[g+8][2c], C[g+8][2c+1].
 * So the C fragments of two adjacent 8-column tiles of S are, converted to
 * bf16, exactly the A fragment of the 16x16 block of P they hold: P stays
 * in registers between S = Q K^T and O += P V.
 * B fragments whose pairs run along a row of a row-major smem tile (K for
 * Q K^T, where B[k][n] = K[n][k]) are plain 32-bit loads; those whose pairs
 * run down a column (V for P V, where B[k][n] = V[k][n]) come from
 * ldmatrix.trans. Smem rows are padded by 8 elements (16 bytes), which
 * puts the 8 rows a fragment load touches in 8 different bank quads.
 *
 * Forward: block = 64 query rows of one head (4 warps x 16 rows), loops over
 * key tiles of 64 up to the diagonal; online softmax per row (max and sum
 * kept per lane and combined across the row's 4 lanes at the end).
 * Backward: D = rowsum(dO * O) by a small kernel; then dQ by query tiles
 * (loop over key tiles) and dK/dV by key tiles (loop over the kv head's
 * query heads and query tiles): every gradient has one writer, no atomics. */
#include <stdint.h>

#include <stdio.h>

#include "kernels/cuda/common.cuh"

namespace {

/* ---- fragments and the mma ------------------------------------------------ */

/* tests/gpu/emulate/ runs this file on the host and supplies these two
 * warp-collective instructions itself (from the PTX ISA's layouts). */
#ifndef HXC_EMULATED_MMA
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8x8 bf16 matrices, transposed on the way: lanes 8i..8i+7 give the
 * row addresses of matrix i; r[i] receives M_i[2c][g], M_i[2c+1][g]. */
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                  const bf16 *row_addr) {
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(row_addr);
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr)
      : "memory");
}
#endif

/* Two adjacent bf16 as one register (the lower index in the low half). */
__device__ __forceinline__ uint32_t ld_pair(const bf16 *p) {
  return *reinterpret_cast<const uint32_t *>(p);
}
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* A fragment of rows [r, r+16) x cols [k, k+16) of a row-major matrix. */
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16 *m, long ld,
                                       int r, int k, int g, int c) {
  a[0] = ld_pair(m + (long)(r + g) * ld + k + 2 * c);
  a[1] = ld_pair(m + (long)(r + g + 8) * ld + k + 2 * c);
  a[2] = ld_pair(m + (long)(r + g) * ld + k + 2 * c + 8);
  a[3] = ld_pair(m + (long)(r + g + 8) * ld + k + 2 * c + 8);
}

/* B fragment of the product with a row-major smem tile read transposed
 * (B[k][n] = M[n0 + n][k0 + k]): pairs run along M's rows. */
__device__ __forceinline__ void load_b_rows(uint32_t &b0, uint32_t &b1,
                                            const bf16 *m, int ld, int n0,
                                            int k0, int g, int c) {
  b0 = ld_pair(m + (n0 + g) * ld + k0 + 2 * c);
  b1 = ld_pair(m + (n0 + g) * ld + k0 + 2 * c + 8);
}

/* B fragments of two adjacent n-tiles from a row-major smem tile read as is
 * (B[k][n] = M[k0 + k][n0 + n]), through ldmatrix.trans: b[0], b[1] for
 * columns n0..n0+7, b[2], b[3] for n0+8..n0+15. */
__device__ __forceinline__ void load_b_cols(uint32_t (&b)[4], const bf16 *m,
                                            int ld, int k0, int n0, int lane) {
  int i = lane >> 3, r = lane & 7;
  ldmatrix_x4_trans(b, m + (k0 + r + 8 * (i & 1)) * ld + n0 + 8 * (i >> 1));
}

/* The A fragment of the 16x16 block k of P (or dS) held as C fragments of
 * its 8-column tiles 2k and 2k+1. */
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&lo)[4],
                                       const float (&hi)[4]) {
  a[0] = pack_pair(lo[0], lo[1]);
  a[1] = pack_pair(lo[2], lo[3]);
  a[2] = pack_pair(hi[0], hi[1]);
  a[3] = pack_pair(hi[2], hi[3]);
}

/* Max and sum over the 4 lanes that hold one row of a C fragment. */
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* ---- tiles ----------------------------------------------------------------- */

/* Copies rows [r0, r0+rows) of one head (HD wide) of a token-major tensor
 * into smem tile[rows][HD + 8], 16 bytes at a time; rows past seq_len are
 * zero. */
template <int HD>
__device__ void copy_tile(bf16 *tile, const bf16 *base, long ld, int head,
                          int r0, int rows, int seq_len) {
  constexpr int LD = HD + 8, VEC = HD / 8;
  for (int e = threadIdx.x; e < rows * VEC; e += blockDim.x) {
    int r = e / VEC, v = e - r * VEC;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (r0 + r < seq_len)
      val = *reinterpret_cast<const uint4 *>(base + (long)(r0 + r) * ld +
                                             (long)head * HD + v * 8);
    *reinterpret_cast<uint4 *>(tile + r * LD + v * 8) = val;
  }
}

/* A fragments of a warp's 16 rows (whole head) straight from global memory,
 * rows past seq_len zero: the block's one-time load of Q (or dO). */
template <int HD>
__device__ void load_rows_a(uint32_t (&a)[HD / 16][4], const bf16 *base,
                            long ld, int head, int r0, int seq_len, int g,
                            int c) {
  const bf16 *m = base + (long)head * HD;
#pragma unroll
  for (int kk = 0; kk < HD / 16; kk++) {
    int k = kk * 16 + 2 * c;
    bool in0 = r0 + g < seq_len, in1 = r0 + g + 8 < seq_len;
    a[kk][0] = in0 ? ld_pair(m + (long)(r0 + g) * ld + k) : 0u;
    a[kk][1] = in1 ? ld_pair(m + (long)(r0 + g + 8) * ld + k) : 0u;
    a[kk][2] = in0 ? ld_pair(m + (long)(r0 + g) * ld + k + 8) : 0u;
    a[kk][3] = in1 ? ld_pair(m + (long)(r0 + g + 8) * ld + k + 8) : 0u;
  }
}

/* ---- warp-level products ---------------------------------------------------
 * A warp holds a 16-row strip; its lane is (g, c) = (lane/4, lane%4).
 * ------------------------------------------------------------------------- */
struct lane_id {
  int lane, g, c;
};

template <int N>
__device__ __forceinline__ void zero_frags(float (&x)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; j++)
    x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.0f;
}

/* s[16 x 8NS] += A T^T: A [16 x 16KS] as register fragments, T a row-major
 * smem tile whose rows 0..8NS-1 are the columns of the result. */
template <int KS, int NS>
__device__ __forceinline__ void mma_a_tt(float (&s)[NS][4],
                                         const uint32_t (&a)[KS][4],
                                         const bf16 *t, int ld, lane_id id) {
#pragma unroll
  for (int kk = 0; kk < KS; kk++)
#pragma unroll
    for (int j = 0; j < NS; j++) {
      uint32_t b0, b1;
      load_b_rows(b0, b1, t, ld, j * 8, kk * 16, id.g, id.c);
      mma_16816(s[j], a[kk], b0, b1);
    }
}

/* The same with A the rows r0..r0+15 of a row-major smem tile. */
template <int KS, int NS>
__device__ __forceinline__ void mma_smem_tt(float (&s)[NS][4], const bf16 *a,
                                            int r0, const bf16 *t, int ld,
                                            lane_id id) {
#pragma unroll
  for (int kk = 0; kk < KS; kk++) {
    uint32_t af[4];
    load_a(af, a, ld, r0, kk * 16, id.g, id.c);
#pragma unroll
    for (int j = 0; j < NS; j++) {
      uint32_t b0, b1;
      load_b_rows(b0, b1, t, ld, j * 8, kk * 16, id.g, id.c);
      mma_16816(s[j], af, b0, b1);
    }
  }
}

/* acc[16 x 8NO] += P M: P [16 x 8NP] held as C fragments (rounded to bf16
 * A fragments 16 columns at a time), M a row-major smem tile of 8NP rows. */
template <int NP, int NO>
__device__ __forceinline__ void mma_c_m(float (&acc)[NO][4],
                                        const float (&p)[NP][4], const bf16 *m,
                                        int ld, int lane) {
#pragma unroll
  for (int kk = 0; kk < NP / 2; kk++) {
    uint32_t a[4];
    c_to_a(a, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
    for (int j = 0; j < NO; j += 2) {
      uint32_t b[4];
      load_b_cols(b, m, ld, kk * 16, j * 8, lane);
      mma_16816(acc[j], a, b[0], b[1]);
      mma_16816(acc[j + 1], a, b[2], b[3]);
    }
  }
}

/* ---- forward ---------------------------------------------------------------
 * Per query row t, over key tiles:  s = scale q_t.k_u (masked for u > t);
 * m' = max(m, max_u s);  l = l e^(m-m') + sum_u e^(s-m');
 * O = O e^(m-m') + P V with P = e^(s-m') (bf16);  at the end O / l and
 * lse = m + log l.
 * ------------------------------------------------------------------------- */

/* The running max and sum of a lane's two rows (g and g+8 of its warp's
 * strip); l is this lane's share until the end adds the row's 4 lanes. */
struct row_stats {
  float m0, m1, l0, l1;
};

/* Scores of a key tile: scaled, and -inf where the key is after the query
 * (rows qi0, qi1 of this lane) or past the sequence. */
template <int NS>
__device__ __forceinline__ void scale_and_mask(float (&s)[NS][4], int u0,
                                               int qi0, int qi1, int seq_len,
                                               float scale, int c) {
#pragma unroll
  for (int j = 0; j < NS; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int kj = u0 + j * 8 + 2 * c + (e & 1);
      int qi = e < 2 ? qi0 : qi1;
      s[j][e] = (kj > qi || kj >= seq_len) ? -INFINITY : s[j][e] * scale;
    }
}

/* The online softmax step: s becomes P = e^(s - m'), the running sums and
 * the accumulator are rescaled by e^(m - m'). */
template <int NS, int NO>
__device__ __forceinline__ void online_softmax(float (&s)[NS][4],
                                               float (&acc)[NO][4],
                                               struct row_stats &st) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < NS; j++) {
    mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
    mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
  }
  float mn0 = fmaxf(st.m0, quad_max(mx0)), mn1 = fmaxf(st.m1, quad_max(mx1));
  /* A row with every key masked so far keeps m = -inf: exponentiate
   * against 0 then, so that no -inf - -inf appears. */
  float base0 = mn0 == -INFINITY ? 0.0f : mn0;
  float base1 = mn1 == -INFINITY ? 0.0f : mn1;
  float corr0 = expf(st.m0 - base0), corr1 = expf(st.m1 - base1);
  st.m0 = mn0;
  st.m1 = mn1;
  float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
  for (int j = 0; j < NS; j++) {
    s[j][0] = expf(s[j][0] - base0);
    s[j][1] = expf(s[j][1] - base0);
    s[j][2] = expf(s[j][2] - base1);
    s[j][3] = expf(s[j][3] - base1);
    ps0 += s[j][0] + s[j][1];
    ps1 += s[j][2] + s[j][3];
  }
  st.l0 = st.l0 * corr0 + ps0;
  st.l1 = st.l1 * corr1 + ps1;
#pragma unroll
  for (int j = 0; j < NO; j++) {
    acc[j][0] *= corr0;
    acc[j][1] *= corr0;
    acc[j][2] *= corr1;
    acc[j][3] *= corr1;
  }
}

/* o = acc / l and lse = m + log l for the lane's rows inside the sequence. */
template <int NO>
__device__ __forceinline__ void store_output(bf16 *o, float *lse,
                                             const float (&acc)[NO][4],
                                             struct row_stats st, long tok0,
                                             int qi0, int qi1, int h,
                                             const struct attn_shape &sh,
                                             int c) {
  float l0 = quad_sum(st.l0), l1 = quad_sum(st.l1);
  float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  bf16 *row0 = o + (tok0 + qi0) * sh.ldq + (long)h * NO * 8 + 2 * c;
  bf16 *row1 = o + (tok0 + qi1) * sh.ldq + (long)h * NO * 8 + 2 * c;
#pragma unroll
  for (int j = 0; j < NO; j++) {
    if (qi0 < sh.seq_len)
      *reinterpret_cast<uint32_t *>(row0 + j * 8) =
          pack_pair(acc[j][0] * inv0, acc[j][1] * inv0);
    if (qi1 < sh.seq_len)
      *reinterpret_cast<uint32_t *>(row1 + j * 8) =
          pack_pair(acc[j][2] * inv1, acc[j][3] * inv1);
  }
  if (c == 0 && qi0 < sh.seq_len)
    lse[(tok0 + qi0) * sh.nq + h] = st.m0 + logf(l0);
  if (c == 0 && qi1 < sh.seq_len)
    lse[(tok0 + qi1) * sh.nq + h] = st.m1 + logf(l1);
}

template <int HD>
__global__ void __launch_bounds__(128)
attention_forward_tc(bf16 *o, float *lse, const bf16 *q, const bf16 *k,
                     const bf16 *v, struct attn_shape sh) {
  constexpr int BR = 64, BC = 64, LD = HD + 8, KS = HD / 16, NS = BC / 8,
                NO = HD / 8;
  __shared__ __align__(16) bf16 sk[BC * LD], sv[BC * LD];
  int tile = gridDim.x - 1 - blockIdx.x; /* long (late) tiles first */
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = (sh.map.q_begin + h) / sh.map.group - sh.map.kv_begin;
  long tok0 = (long)seq * sh.seq_len;
  int lane = threadIdx.x & 31;
  lane_id id = {lane, lane >> 2, lane & 3};
  int row0 = tile * BR, wrow = row0 + (int)(threadIdx.x >> 5) * 16;
  int qi0 = wrow + id.g, qi1 = qi0 + 8; /* this lane's two rows */

  uint32_t qf[KS][4];
  load_rows_a<HD>(qf, q + tok0 * sh.ldq, sh.ldq, h, wrow, sh.seq_len, id.g,
                  id.c);
  float acc[NO][4];
  zero_frags(acc);
  struct row_stats st = {-INFINITY, -INFINITY, 0.0f, 0.0f};
  int key_end = min(sh.seq_len, row0 + BR); /* causal: no later keys */
  for (int u0 = 0; u0 < key_end; u0 += BC) {
    __syncthreads(); /* the previous tile is no longer read */
    copy_tile<HD>(sk, k + tok0 * sh.ldkv, sh.ldkv, kvh, u0, BC, sh.seq_len);
    copy_tile<HD>(sv, v + tok0 * sh.ldkv, sh.ldkv, kvh, u0, BC, sh.seq_len);
    __syncthreads();
    float s[NS][4];
    zero_frags(s);
    mma_a_tt(s, qf, sk, LD, id); /* S = Q K^T */
    scale_and_mask(s, u0, qi0, qi1, sh.seq_len, sh.scale, id.c);
    online_softmax(s, acc, st);
    mma_c_m(acc, s, sv, LD, lane); /* O += P V */
  }
  store_output(o, lse, acc, st, tok0, qi0, qi1, h, sh, id.c);
}

/* ---- backward: D_t = dO_t . O_t, one warp per (token, head) ------------------ */
template <int HD>
__global__ void attention_rowdot_tc(float *dbuf, const bf16 *dout,
                                    const bf16 *o, long rows) {
  long warps = blockDim.x / 32;
  int lane = threadIdx.x & 31;
  /* r is uniform per warp; the grid is capped, warps loop over the rows */
  for (long r = blockIdx.x * warps + threadIdx.x / 32; r < rows;
       r += gridDim.x * warps) {
    float dot = 0.0f;
    for (int d = lane; d < HD; d += 32)
      dot += __bfloat162float(dout[r * HD + d]) *
             __bfloat162float(o[r * HD + d]);
    dot = warp_sum(dot);
    if (lane == 0)
      dbuf[r] = dot;
  }
}

/* Adds (x0, x1) into a bf16 pair of a gradient row. */
__device__ __forceinline__ void add_pair(bf16 *row, float x0, float x1) {
  __nv_bfloat162 *p = reinterpret_cast<__nv_bfloat162 *>(row);
  float2 old = __bfloat1622float2(*p);
  *p = __floats2bfloat162_rn(old.x + x0, old.y + x1);
}

/* Adds scale * acc (a strip of 16 rows, HD = 8 NO wide) into rows r0, r1 of
 * a bf16 gradient (row stride ld, head offset col); rows past seq_len are
 * left alone. */
template <int NO>
__device__ __forceinline__ void add_rows(bf16 *grad, long ld, long col,
                                         const float (&acc)[NO][4], float scale,
                                         long tok0, int r0, int r1,
                                         int seq_len, int c) {
#pragma unroll
  for (int j = 0; j < NO; j++) {
    long d = col + j * 8 + 2 * c;
    if (r0 < seq_len)
      add_pair(grad + (tok0 + r0) * ld + d, scale * acc[j][0],
               scale * acc[j][1]);
    if (r1 < seq_len)
      add_pair(grad + (tok0 + r1) * ld + d, scale * acc[j][2],
               scale * acc[j][3]);
  }
}

/* ---- backward, dQ: block = 64 query rows of one head; per key tile
 *   P = e^(scale Q K^T - lse) (masked), dP = dO V^T, dS = P (dP - D),
 *   dQ += dS K;  at the end dq += scale dQ.
 * ------------------------------------------------------------------------- */
template <int HD> struct dq_cfg {
  static constexpr int BC = HD == 128 ? 32 : 64; /* keys per tile */
};

/* dS = P (dP - D) in place of s, P = e^(scale s - lse) and 0 where masked;
 * the lane's rows qi0, qi1 have lse (l0, l1) and D (d0, d1). */
template <int NS>
__device__ __forceinline__ void ds_rows(float (&s)[NS][4],
                                        const float (&dp)[NS][4], int u0,
                                        int qi0, int qi1, float l0, float l1,
                                        float d0, float d1,
                                        const struct attn_shape &sh, int c) {
#pragma unroll
  for (int j = 0; j < NS; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int kj = u0 + j * 8 + 2 * c + (e & 1);
      int qi = e < 2 ? qi0 : qi1;
      bool in = kj <= qi && kj < sh.seq_len;
      float p = in ? expf(s[j][e] * sh.scale - (e < 2 ? l0 : l1)) : 0.0f;
      s[j][e] = p * (dp[j][e] - (e < 2 ? d0 : d1));
    }
}

template <int HD>
__global__ void __launch_bounds__(128)
attention_backward_dq_tc(bf16 *dq, const float *dbuf, const bf16 *dout,
                         const bf16 *q, const bf16 *k, const bf16 *v,
                         const float *lse, struct attn_shape sh) {
  constexpr int BR = 64, BC = dq_cfg<HD>::BC, LD = HD + 8, KS = HD / 16,
                NS = BC / 8, NO = HD / 8;
  __shared__ __align__(16) bf16 sk[BC * LD], sv[BC * LD];
  int tile = gridDim.x - 1 - blockIdx.x;
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = (sh.map.q_begin + h) / sh.map.group - sh.map.kv_begin;
  long tok0 = (long)seq * sh.seq_len;
  int lane = threadIdx.x & 31;
  lane_id id = {lane, lane >> 2, lane & 3};
  int row0 = tile * BR, wrow = row0 + (int)(threadIdx.x >> 5) * 16;
  int qi0 = wrow + id.g, qi1 = qi0 + 8;

  uint32_t qf[KS][4], df[KS][4];
  load_rows_a<HD>(qf, q + tok0 * sh.ldq, sh.ldq, h, wrow, sh.seq_len, id.g,
                  id.c);
  load_rows_a<HD>(df, dout + tok0 * sh.ldq, sh.ldq, h, wrow, sh.seq_len, id.g,
                  id.c);
  bool in0 = qi0 < sh.seq_len, in1 = qi1 < sh.seq_len;
  float l0 = in0 ? lse[(tok0 + qi0) * sh.nq + h] : 0.0f;
  float l1 = in1 ? lse[(tok0 + qi1) * sh.nq + h] : 0.0f;
  float d0 = in0 ? dbuf[(tok0 + qi0) * sh.nq + h] : 0.0f;
  float d1 = in1 ? dbuf[(tok0 + qi1) * sh.nq + h] : 0.0f;
  float acc[NO][4];
  zero_frags(acc);
  int key_end = min(sh.seq_len, row0 + BR);
  for (int u0 = 0; u0 < key_end; u0 += BC) {
    __syncthreads();
    copy_tile<HD>(sk, k + tok0 * sh.ldkv, sh.ldkv, kvh, u0, BC, sh.seq_len);
    copy_tile<HD>(sv, v + tok0 * sh.ldkv, sh.ldkv, kvh, u0, BC, sh.seq_len);
    __syncthreads();
    float s[NS][4], dp[NS][4];
    zero_frags(s);
    zero_frags(dp);
    mma_a_tt(s, qf, sk, LD, id);  /* S = Q K^T */
    mma_a_tt(dp, df, sv, LD, id); /* dP = dO V^T */
    ds_rows(s, dp, u0, qi0, qi1, l0, l1, d0, d1, sh, id.c);
    mma_c_m(acc, s, sk, LD, lane); /* dQ += dS K */
  }
  add_rows(dq, sh.ldq, (long)h * HD, acc, sh.scale, tok0, qi0, qi1,
           sh.seq_len, id.c);
}

/* ---- backward, dK and dV: block = 64 keys of one kv head (4 warps x 16
 * keys); over every query head reading it and every query tile from the
 * block's first key on:
 *   P^T = e^(scale K Q^T - lse) (masked), dV += P^T dO,
 *   dP^T = V dO^T, dS^T = P^T (dP^T - D), dK += dS^T Q;
 *   at the end dk += scale dK, dv += dV.
 * K, V, the query tile, dO tile, lse and D live in dynamic shared memory.
 * ------------------------------------------------------------------------- */
template <int HD> struct dkv_cfg {
  static constexpr int BK = 64;                  /* keys per block */
  static constexpr int BQ = HD == 128 ? 32 : 64; /* queries per tile */
  static constexpr int LD = HD + 8;
  static constexpr size_t SMEM =
      (size_t)(2 * BK + 2 * BQ) * LD * sizeof(bf16) + 2 * BQ * sizeof(float);
};

/* P^T in s and dS^T in dp (rows keys kj0, kj1 of this lane, columns the
 * queries t0 + col), from S^T, dP^T and the tile's lse and D. */
template <int NS>
__device__ __forceinline__ void ds_cols(float (&s)[NS][4], float (&dp)[NS][4],
                                        int t0, int kj0, int kj1,
                                        const float *slse, const float *sd,
                                        const struct attn_shape &sh, int c) {
#pragma unroll
  for (int j = 0; j < NS; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int col = j * 8 + 2 * c + (e & 1);
      int qi = t0 + col, kj = e < 2 ? kj0 : kj1;
      bool in = kj <= qi && qi < sh.seq_len && kj < sh.seq_len;
      float p = in ? expf(s[j][e] * sh.scale - slse[col]) : 0.0f;
      s[j][e] = p;
      dp[j][e] = p * (dp[j][e] - sd[col]);
    }
}

/* Loads query tile t0 of head h (q, dO, lse, D) into shared memory. */
template <int HD>
__device__ void load_query_tile(bf16 *sq, bf16 *sdo, float *slse, float *sd,
                                const bf16 *q, const bf16 *dout,
                                const float *lse, const float *dbuf, int h,
                                int t0, long tok0, const struct attn_shape &sh) {
  constexpr int BQ = dkv_cfg<HD>::BQ;
  copy_tile<HD>(sq, q + tok0 * sh.ldq, sh.ldq, h, t0, BQ, sh.seq_len);
  copy_tile<HD>(sdo, dout + tok0 * sh.ldq, sh.ldq, h, t0, BQ, sh.seq_len);
  for (int r = threadIdx.x; r < BQ; r += blockDim.x) {
    bool in = t0 + r < sh.seq_len;
    slse[r] = in ? lse[(tok0 + t0 + r) * sh.nq + h] : 0.0f;
    sd[r] = in ? dbuf[(tok0 + t0 + r) * sh.nq + h] : 0.0f;
  }
}

template <int HD>
__global__ void __launch_bounds__(128)
attention_backward_dkv_tc(bf16 *dk, bf16 *dv, const float *dbuf,
                          const bf16 *dout, const bf16 *q, const bf16 *k,
                          const bf16 *v, const float *lse, struct attn_shape sh) {
  typedef dkv_cfg<HD> C;
  constexpr int BK = C::BK, BQ = C::BQ, LD = C::LD, KS = HD / 16,
                NS = BQ / 8, NO = HD / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *sk = reinterpret_cast<bf16 *>(smem);
  bf16 *sv = sk + BK * LD, *sq = sv + BK * LD, *sdo = sq + BQ * LD;
  float *slse = reinterpret_cast<float *>(sdo + BQ * LD), *sd = slse + BQ;
  int tile = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  long tok0 = (long)seq * sh.seq_len;
  int lane = threadIdx.x & 31;
  lane_id id = {lane, lane >> 2, lane & 3};
  int key0 = tile * BK, wkey = (int)(threadIdx.x >> 5) * 16; /* warp's keys */
  int kj0 = key0 + wkey + id.g, kj1 = kj0 + 8; /* this lane's two keys */

  copy_tile<HD>(sk, k + tok0 * sh.ldkv, sh.ldkv, kvh, key0, BK, sh.seq_len);
  copy_tile<HD>(sv, v + tok0 * sh.ldkv, sh.ldkv, kvh, key0, BK, sh.seq_len);
  float dka[NO][4], dva[NO][4];
  zero_frags(dka);
  zero_frags(dva);
  /* Local query heads reading kv head kvh: (q_begin + h)/group == kv. */
  int kv_global = kvh + sh.map.kv_begin;
  int h_begin = max(0, kv_global * sh.map.group - sh.map.q_begin);
  int h_end = min(sh.nq, (kv_global + 1) * sh.map.group - sh.map.q_begin);
  for (int h = h_begin; h < h_end; h++)
    for (int t0 = key0; t0 < sh.seq_len; t0 += BQ) {
      __syncthreads(); /* the previous query tile is no longer read */
      load_query_tile<HD>(sq, sdo, slse, sd, q, dout, lse, dbuf, h, t0, tok0,
                          sh);
      __syncthreads();
      float s[NS][4], dp[NS][4]; /* rows keys, columns queries */
      zero_frags(s);
      zero_frags(dp);
      mma_smem_tt<KS>(s, sk, wkey, sq, LD, id);   /* S^T = K Q^T */
      mma_smem_tt<KS>(dp, sv, wkey, sdo, LD, id); /* dP^T = V dO^T */
      ds_cols(s, dp, t0, kj0, kj1, slse, sd, sh, id.c);
      mma_c_m(dva, s, sdo, LD, lane); /* dV += P^T dO */
      mma_c_m(dka, dp, sq, LD, lane); /* dK += dS^T Q */
    }
  add_rows(dk, sh.ldkv, (long)kvh * HD, dka, sh.scale, tok0, kj0, kj1,
           sh.seq_len, id.c);
  add_rows(dv, sh.ldkv, (long)kvh * HD, dva, 1.0f, tok0, kj0, kj1, sh.seq_len,
           id.c);
}

/* The launches for nseq sequences (one chunk of attention.cu's split):
 * block = (64-row query tile or BK-row key tile, head, sequence), 4 warps;
 * the delta rows D_t one warp each, 8 per block. The dK/dV pass stages
 * its tiles in dynamic shared memory, above 48 KiB: it opts in. */
#define TC_THREADS 128
template <int HD>
struct hxc_launch_dims tc_query_launch(int seq_len, int nq, long nseq) {
  return launch_dims((unsigned long)(seq_len + 63) / 64, (unsigned long)nq,
                     (unsigned long)nseq, TC_THREADS, 0, false);
}
static struct hxc_launch_dims tc_rowdot_launch(long rows) {
  return launch_dims(grid_for(rows, 8), 1, 1, 256, 0, false);
}
template <int HD>
struct hxc_launch_dims tc_dkv_launch(int seq_len, int nkv, long nseq) {
  return launch_dims(
      (unsigned long)(seq_len + dkv_cfg<HD>::BK - 1) / dkv_cfg<HD>::BK,
      (unsigned long)nkv, (unsigned long)nseq, TC_THREADS,
      dkv_cfg<HD>::SMEM, true);
}

template <int HD>
void forward_tc(void *o, float *lse, const void *q, const void *k,
                const void *v, const struct attn_shape &sh, long nseq,
                cudaStream_t stream) {
  struct hxc_launch_dims l = tc_query_launch<HD>(sh.seq_len, sh.nq, nseq);
  attention_forward_tc<HD><<<grid_of(l), l.threads, 0, stream>>>(
      (bf16 *)o, lse, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, sh);
  HXC_LAUNCHED("attention_forward_tc");
}

template <int HD>
void backward_tc(void *dq, void *dk, void *dv, float *dbuf, const void *dout,
                 const void *q, const void *k, const void *v, const void *o,
                 const float *lse, const struct attn_shape &sh, long nseq,
                 cudaStream_t stream) {
  long rows = nseq * sh.seq_len * sh.nq; /* (token, head) rows of HD */
  struct hxc_launch_dims lr = tc_rowdot_launch(rows);
  attention_rowdot_tc<HD><<<grid_of(lr), lr.threads, 0, stream>>>(
      dbuf, (const bf16 *)dout, (const bf16 *)o, rows);
  HXC_LAUNCHED("attention_rowdot_tc");
  struct hxc_launch_dims lq = tc_query_launch<HD>(sh.seq_len, sh.nq, nseq);
  attention_backward_dq_tc<HD><<<grid_of(lq), lq.threads, 0, stream>>>(
      (bf16 *)dq, dbuf, (const bf16 *)dout, (const bf16 *)q, (const bf16 *)k,
      (const bf16 *)v, lse, sh);
  HXC_LAUNCHED("attention_backward_dq_tc");
  /* Above 48 KiB a kernel must opt in to its dynamic shared memory. */
  struct hxc_launch_dims lk = tc_dkv_launch<HD>(sh.seq_len, sh.nkv, nseq);
  HXC_CHECK(cudaFuncSetAttribute(attention_backward_dkv_tc<HD>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)lk.smem));
  attention_backward_dkv_tc<HD><<<grid_of(lk), lk.threads, lk.smem, stream>>>(
      (bf16 *)dk, (bf16 *)dv, dbuf, (const bf16 *)dout, (const bf16 *)q,
      (const bf16 *)k, (const bf16 *)v, lse, sh);
  HXC_LAUNCHED("attention_backward_dkv_tc");
}

} /* namespace */

bool hxc_attention_tc_supports(int hd, enum hxc_dtype dt) {
  return dt == HXC_BF16 && (hd == 64 || hd == 128);
}

void hxc_attention_tc_forward(void *o, float *lse, const void *q,
                              const void *k, const void *v,
                              struct hxc_kv_map map, long nseq, int seq_len,
                              int nq, int nkv, int hd, cudaStream_t stream) {
  struct attn_shape sh = attn_shape_of(map, seq_len, nq, nkv, hd);
  if (hd == 64)
    forward_tc<64>(o, lse, q, k, v, sh, nseq, stream);
  else
    forward_tc<128>(o, lse, q, k, v, sh, nseq, stream);
}

void hxc_attention_tc_backward(void *dq, void *dk, void *dv, float *dbuf,
                               const void *dout, const void *q, const void *k,
                               const void *v, const void *o, const float *lse,
                               struct hxc_kv_map map, long nseq, int seq_len,
                               int nq, int nkv, int hd, cudaStream_t stream) {
  struct attn_shape sh = attn_shape_of(map, seq_len, nq, nkv, hd);
  if (hd == 64)
    backward_tc<64>(dq, dk, dv, dbuf, dout, q, k, v, o, lse, sh, nseq, stream);
  else
    backward_tc<128>(dq, dk, dv, dbuf, dout, q, k, v, o, lse, sh, nseq,
                     stream);
}

template <int HD>
static void tc_launches(const struct hxc_launch_shapes *s, long ns,
                        hxc_launch_fn fn, void *arg) {
  struct hxc_launch_dims q = tc_query_launch<HD>(s->seq_len, s->nq, ns);
  struct hxc_launch_dims r = tc_rowdot_launch(ns * s->seq_len * s->nq);
  struct hxc_launch_dims k = tc_dkv_launch<HD>(s->seq_len, s->nkv, ns);
  char name[64];
  snprintf(name, sizeof name, "attention_forward_tc<%d>", HD);
  fn(arg, name, &q);
  snprintf(name, sizeof name, "attention_rowdot_tc<%d>", HD);
  fn(arg, name, &r);
  snprintf(name, sizeof name, "attention_backward_dq_tc<%d>", HD);
  fn(arg, name, &q);
  snprintf(name, sizeof name, "attention_backward_dkv_tc<%d>", HD);
  fn(arg, name, &k);
}

HXC_LAUNCHES(hxc_attention_tc_launches) {
  long ns = s->nseq < hxc_attention_seq_chunk() ? s->nseq
                                                : hxc_attention_seq_chunk();
  if (s->hd == 64)
    tc_launches<64>(s, ns, fn, arg);
  else if (s->hd == 128)
    tc_launches<128>(s, ns, fn, arg);
}
