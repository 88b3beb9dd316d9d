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
 * Every other fragment comes from shared memory by ldmatrix.x4 (four 8x8
 * matrices a warp instruction): plain where the fragment's pairs run along
 * a smem row (A of Q, B of K for Q K^T), .trans where they run down a
 * column (B of V for P V, A of dS^T for dS K). Smem rows are padded by 8
 * elements (16 bytes), which puts the 8 rows an ldmatrix matrix reads in 8
 * different bank quads. Tiles move global -> smem by cp.async (16 bytes a
 * thread, zero-filled past the sequence), double-buffered: the next tile's
 * copy is in flight while the tensor cores work on this one.
 *
 * Forward: block = 128 query rows of one head (8 warps x 16 rows), Q staged
 * once, loops over key tiles (64 keys at hd 64, 32 at hd 128) up to the
 * diagonal; online softmax in base 2 with the scale folded in (one FFMA and
 * one EX2 an element); only tiles that cross the diagonal or the sequence's
 * end are masked, and a warp whose rows all precede a tile skips it.
 * Backward (FlashAttention-2's: five products, each once): D = rowsum(dO*O)
 * by a small kernel; then a block per 64-key tile (4 warps x 16 keys) walks
 * every query head of its kv head and every query tile (64 rows at hd 64,
 * 32 at hd 128) from its first key on: S^T = K Q^T, dP^T = V dO^T, P^T and
 * dS^T, dV += P^T dO, dK += dS^T Q in registers, and dQ_tile = dS K added
 * into an fp32 dQ accumulator. Determinism: the key tiles add into a query
 * tile in key order (0, 1, 2, ...), each waiting for a per-(query tile,
 * head) flag the previous one sets; blocks take their key tile from a
 * ticket counter, so the tile a block waits for belongs to a block that
 * started earlier and never waits on a later one (no hang whatever order
 * the GPU schedules blocks in). The fp32 sums are then the same bits every
 * run. A last elementwise kernel adds scale * dQ into dq.
 *
 * Budgets (launch bounds; gpu.resources checks them from ptxas): forward
 * 256 threads, 2 blocks an SM (<= 128 registers), 55 KiB (hd 64) / 68 KiB
 * (hd 128) of shared memory; backward 128 threads, 2 blocks an SM (<= 255
 * registers), 64 / 74 KiB. Two blocks an SM fit sm_80's and sm_90's shared
 * memory; sm_89 (100 KiB an SM) holds one. Speed is unmeasured on this
 * design until bench/gpu_throughput.sh runs on a GPU: the design expects
 * FlashAttention-2-class throughput (about 50-70% of the dense bf16 peak
 * forward on sm_80/sm_90 without wgmma), which the figures must confirm. */
#include <stdint.h>

#include <stdio.h>

#include "kernels/cuda/common.cuh"

namespace {

#define LOG2E 1.4426950408889634f

/* ---- inline PTX ------------------------------------------------------------
 * tests/gpu/emulate/ runs this file on the host and supplies these itself
 * (from the PTX ISA's definitions). */
#ifndef HXC_EMULATED_MMA
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4],
                                          uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8x8 bf16 matrices: lanes 8i..8i+7 give the row addresses of matrix
 * i; r[i] receives M_i[g][2c], M_i[g][2c+1] (plain) or M_i[2c][g],
 * M_i[2c+1][g] (.trans). */
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4],
                                            const bf16 *row_addr) {
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(row_addr);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4],
                                                  const bf16 *row_addr) {
  uint32_t addr = (uint32_t)__cvta_generic_to_shared(row_addr);
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(addr)
      : "memory");
}

/* cp.async of 16 (global -> L2 -> smem, .cg) or 4 bytes (.ca); !valid
 * zero-fills the destination and reads nothing (src-size 0). */
__device__ __forceinline__ void cp_async_16(void *dst, const void *src,
                                            bool valid) {
  uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d),
               "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_4(void *dst, const void *src,
                                           bool valid) {
  uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d),
               "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/* Every committed group but the newest N has landed (this thread's). */
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* The ordered dQ accumulation's flags: acquire / release at GPU scope. */
__device__ __forceinline__ void wait_flag(const int *flag, int value) {
  int v;
  do {
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n"
                 : "=r"(v)
                 : "l"(flag)
                 : "memory");
  } while (v != value);
}
__device__ __forceinline__ void set_flag(int *flag, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value)
               : "memory");
}
#endif

__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

/* ---- fragments from shared memory (lane i = lane/8 addresses matrix i,
 * row r = lane%8 of it) ----------------------------------------------------- */

/* A fragment of rows [r0, r0+16) x cols [k0, k0+16) of a row-major tile:
 * matrices (r0, k0), (r0+8, k0), (r0, k0+8), (r0+8, k0+8). */
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const bf16 *m, int ld,
                                       int r0, int k0, int lane) {
  int i = lane >> 3, r = lane & 7;
  ldmatrix_x4(a, m + (r0 + r + 8 * (i & 1)) * ld + k0 + 8 * (i >> 1));
}

/* A fragment of A = M^T (A[m][k] = M[k0 + k][m0 + m]), M row-major. */
__device__ __forceinline__ void load_a_trans(uint32_t (&a)[4], const bf16 *m,
                                             int ld, int m0, int k0, int lane) {
  int i = lane >> 3, r = lane & 7;
  ldmatrix_x4_trans(a, m + (k0 + r + 8 * (i >> 1)) * ld + m0 + 8 * (i & 1));
}

/* B fragments of two adjacent n-tiles with B[k][n] = M[n0 + n][k0 + k] (a
 * row-major tile read transposed: K for Q K^T): b[0], b[1] for columns
 * n0..n0+7, b[2], b[3] for n0+8..n0+15. */
__device__ __forceinline__ void load_b_rows(uint32_t (&b)[4], const bf16 *m,
                                            int ld, int n0, int k0, int lane) {
  int i = lane >> 3, r = lane & 7;
  ldmatrix_x4(b, m + (n0 + r + 8 * (i >> 1)) * ld + k0 + 8 * (i & 1));
}

/* The same with B[k][n] = M[k0 + k][n0 + n] (read as is: V for P V). */
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

template <int N>
__device__ __forceinline__ void zero_frags(float (&x)[N][4]) {
#pragma unroll
  for (int j = 0; j < N; j++)
    x[j][0] = x[j][1] = x[j][2] = x[j][3] = 0.0f;
}

/* ---- warp-level products (a warp holds a 16-row strip) -------------------- */

/* s[16 x 8NS] += A T^T: A the rows r0..r0+15 (16KS wide) of row-major smem
 * tile `a`, T a row-major smem tile whose rows 0..8NS-1 are the columns of
 * the result (same width). UNROLL: the k-steps unrolled (the backward at hd
 * 128 keeps the loop rolled: unrolled, ptxas hoists fragment loads past
 * its 255 registers and spills; the forward spills rolled). */
template <int KS, int NS, int UNROLL = KS>
__device__ __forceinline__ void mma_rows_tt(float (&s)[NS][4], const bf16 *a,
                                            int r0, const bf16 *t, int ld,
                                            int lane) {
  static_assert(NS % 2 == 0, "n-tiles come in pairs");
#pragma unroll UNROLL
  for (int kk = 0; kk < KS; kk++) {
    uint32_t af[4];
    load_a(af, a, ld, r0, kk * 16, lane);
#pragma unroll
    for (int j = 0; j < NS; j += 2) {
      uint32_t b[4];
      load_b_rows(b, t, ld, j * 8, kk * 16, lane);
      mma_16816(s[j], af, b[0], b[1]);
      mma_16816(s[j + 1], af, b[2], b[3]);
    }
  }
}

/* acc[16 x 8NO] += P M: P [16 x 8NP] held as C fragments (rounded to bf16
 * A fragments 16 columns at a time), M a row-major smem tile of 8NP rows
 * (columns from n0). */
template <int NP, int NO>
__device__ __forceinline__ void mma_c_m(float (&acc)[NO][4],
                                        const float (&p)[NP][4], const bf16 *m,
                                        int ld, int n0, int lane) {
#pragma unroll
  for (int kk = 0; kk < NP / 2; kk++) {
    uint32_t a[4];
    c_to_a(a, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
    for (int j = 0; j < NO; j += 2) {
      uint32_t b[4];
      load_b_cols(b, m, ld, kk * 16, n0 + j * 8, lane);
      mma_16816(acc[j], a, b[0], b[1]);
      mma_16816(acc[j + 1], a, b[2], b[3]);
    }
  }
}

/* acc[16 x 8NO] += T^T M: rows m0..m0+15 of T^T (T row-major [16KS][..],
 * read transposed by ldmatrix.trans), M row-major [16KS][..] from column
 * n0. */
template <int KS, int NO>
__device__ __forceinline__ void mma_tt_m(float (&acc)[NO][4], const bf16 *t,
                                         int ldt, int m0, const bf16 *m,
                                         int ldm, int n0, int lane) {
#pragma unroll
  for (int kk = 0; kk < KS; kk++) {
    uint32_t a[4];
    load_a_trans(a, t, ldt, m0, kk * 16, lane);
#pragma unroll
    for (int j = 0; j < NO; j += 2) {
      uint32_t b[4];
      load_b_cols(b, m, ldm, kk * 16, n0 + j * 8, lane);
      mma_16816(acc[j], a, b[0], b[1]);
      mma_16816(acc[j + 1], a, b[2], b[3]);
    }
  }
}

/* ---- tiles ----------------------------------------------------------------- */

/* Starts copying rows [r0, r0+rows) of one head (HD wide) of a token-major
 * tensor into smem tile[rows][HD + 8], 16 bytes a thread and copy; rows
 * past seq_len become zero. The caller commits and waits. */
template <int HD>
__device__ __forceinline__ void load_tile_async(bf16 *tile, const bf16 *base,
                                                long ld, int head, int r0,
                                                int rows, int seq_len) {
  constexpr int LD = HD + 8, CHUNKS = HD / 8; /* 16-byte chunks a row */
  for (int e = threadIdx.x; e < rows * CHUNKS; e += blockDim.x) {
    int r = e / CHUNKS, v = e - r * CHUNKS;
    bool in = r0 + r < seq_len;
    const bf16 *src =
        in ? base + (long)(r0 + r) * ld + (long)head * HD + v * 8 : base;
    cp_async_16(tile + r * LD + v * 8, src, in);
  }
}

/* ---- forward ---------------------------------------------------------------
 * Per query row t, over key tiles (s raw scores q_t.k_u, masked -inf for
 * u > t; c = scale log2 e):  m' = max(m, max_u s);
 * l = l 2^(c(m-m')) + sum_u 2^(c s - c m');  O = O 2^(c(m-m')) + P V with
 * P = 2^(c s - c m') (bf16);  at the end O / l and lse = scale m + ln l.
 * ------------------------------------------------------------------------- */
template <int HD> struct fwd_cfg {
  static constexpr int BR = 128, THREADS = 256; /* 8 warps x 16 rows */
  static constexpr int BC = HD == 128 ? 32 : 64; /* keys per tile */
  static constexpr int LD = HD + 8;
  /* Q [BR], K and V [2][BC] (double-buffered) */
  static constexpr size_t SMEM = (size_t)(BR + 4 * BC) * LD * sizeof(bf16);
};

/* The running max (raw scores) and sum of a lane's two rows (g and g+8 of
 * its warp's strip); l is this lane's share until the end adds the row's 4
 * lanes. */
struct row_stats {
  float m0, m1, l0, l1;
};

/* -inf where the key is after the query (rows qi0, qi1 of this lane) or
 * past the sequence: only tiles crossing the diagonal or the end. */
template <int NS>
__device__ __forceinline__ void mask_scores(float (&s)[NS][4], int u0, int qi0,
                                            int qi1, int seq_len, int c) {
#pragma unroll
  for (int j = 0; j < NS; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int kj = u0 + j * 8 + 2 * c + (e & 1);
      int qi = e < 2 ? qi0 : qi1;
      if (kj > qi || kj >= seq_len)
        s[j][e] = -INFINITY;
    }
}

/* The online softmax step: s becomes P = 2^(c s - c m'), the running sums
 * and the accumulator are rescaled by 2^(c (m - m')). */
template <int NS, int NO>
__device__ __forceinline__ void online_softmax(float (&s)[NS][4],
                                               float (&acc)[NO][4],
                                               struct row_stats &st, float c2) {
  float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < NS; j++) {
    mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
    mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
  }
  float mn0 = fmaxf(st.m0, quad_max(mx0)), mn1 = fmaxf(st.m1, quad_max(mx1));
  /* A row with every key masked so far keeps m = -inf: exponentiate
   * against 0 then, so that no -inf - -inf appears. */
  float base0 = mn0 == -INFINITY ? 0.0f : mn0 * c2;
  float base1 = mn1 == -INFINITY ? 0.0f : mn1 * c2;
  float corr0 = exp2f(st.m0 * c2 - base0), corr1 = exp2f(st.m1 * c2 - base1);
  st.m0 = mn0;
  st.m1 = mn1;
  float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
  for (int j = 0; j < NS; j++) {
    s[j][0] = exp2f(fmaf(s[j][0], c2, -base0));
    s[j][1] = exp2f(fmaf(s[j][1], c2, -base0));
    s[j][2] = exp2f(fmaf(s[j][2], c2, -base1));
    s[j][3] = exp2f(fmaf(s[j][3], c2, -base1));
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

/* o = acc / l and lse = scale m + ln l for the lane's rows inside the
 * sequence. */
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
    lse[(tok0 + qi0) * sh.nq + h] = st.m0 * sh.scale + logf(l0);
  if (c == 0 && qi1 < sh.seq_len)
    lse[(tok0 + qi1) * sh.nq + h] = st.m1 * sh.scale + logf(l1);
}

template <int HD>
__global__ void __launch_bounds__(256, 2)
attention_forward_tc(bf16 *o, float *lse, const bf16 *q, const bf16 *k,
                     const bf16 *v, struct attn_shape sh) {
  typedef fwd_cfg<HD> C;
  constexpr int BR = C::BR, BC = C::BC, LD = C::LD, KS = HD / 16,
                NS = BC / 8, NO = HD / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *sq = reinterpret_cast<bf16 *>(smem);
  bf16 *sk = sq + BR * LD, *sv = sk + 2 * BC * LD; /* [2][BC][LD] each */
  int tile = gridDim.x - 1 - blockIdx.x; /* long (late) tiles first */
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = (sh.map.q_begin + h) / sh.map.group - sh.map.kv_begin;
  long tok0 = (long)seq * sh.seq_len;
  const bf16 *ks = k + tok0 * sh.ldkv, *vs = v + tok0 * sh.ldkv;
  int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  int wr = (int)(threadIdx.x >> 5) * 16; /* the warp's rows in the tile */
  int row0 = tile * BR, wrow = row0 + wr;
  int qi0 = wrow + g, qi1 = qi0 + 8; /* this lane's two rows */

  load_tile_async<HD>(sq, q + tok0 * sh.ldq, sh.ldq, h, row0, BR, sh.seq_len);
  load_tile_async<HD>(sk, ks, sh.ldkv, kvh, 0, BC, sh.seq_len);
  load_tile_async<HD>(sv, vs, sh.ldkv, kvh, 0, BC, sh.seq_len);
  cp_async_commit();
  float acc[NO][4];
  zero_frags(acc);
  struct row_stats st = {-INFINITY, -INFINITY, 0.0f, 0.0f};
  const float c2 = sh.scale * LOG2E;
  int key_end = min(sh.seq_len, row0 + BR); /* causal: no later keys */
  int ntiles = (key_end + BC - 1) / BC;
  bool warp_live = wrow < sh.seq_len;
  for (int it = 0; it < ntiles; it++) {
    int u0 = it * BC;
    if (it + 1 < ntiles) { /* the next tile's copy overlaps this one */
      int nb = (it + 1) & 1;
      load_tile_async<HD>(sk + nb * BC * LD, ks, sh.ldkv, kvh, u0 + BC, BC,
                          sh.seq_len);
      load_tile_async<HD>(sv + nb * BC * LD, vs, sh.ldkv, kvh, u0 + BC, BC,
                          sh.seq_len);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads(); /* tile it (and Q) landed, for every thread */
    /* Warp-uniform: a warp whose rows all precede the tile skips it. */
    if (warp_live && u0 <= wrow + 15) {
      const bf16 *tk = sk + (it & 1) * BC * LD, *tv = sv + (it & 1) * BC * LD;
      float s[NS][4];
      zero_frags(s);
      mma_rows_tt<KS, NS>(s, sq, wr, tk, LD, lane); /* S = Q K^T */
      if (u0 + BC - 1 > wrow || u0 + BC > sh.seq_len)
        mask_scores(s, u0, qi0, qi1, sh.seq_len, c);
      online_softmax(s, acc, st, c2);
      mma_c_m(acc, s, tv, LD, 0, lane); /* O += P V */
    }
    __syncthreads(); /* buffer it&1 is free for tile it+2's copy */
  }
  if (warp_live)
    store_output(o, lse, acc, st, tok0, qi0, qi1, h, sh, c);
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

/* ---- backward: block = 64 keys of one kv head (4 warps x 16 keys); over
 * every query head h reading it and every query tile t0 from the block's
 * first key on (c = scale log2 e):
 *   S^T = K Q^T, dP^T = V dO^T,  P^T = 2^(c S^T - lse log2 e) (masked),
 *   dS^T = P^T (dP^T - D),  dV += P^T dO,  dK += dS^T Q,
 *   dQ_acc[t0 tile] += dS K (fp32, in key-tile order);
 *   at the end dk += scale dK, dv += dV; dq += scale dQ_acc afterwards.
 * ------------------------------------------------------------------------- */
template <int HD> struct bwd_cfg {
  static constexpr int BK = 64, THREADS = 128;   /* 4 warps x 16 keys */
  static constexpr int BQ = HD == 128 ? 32 : 64; /* queries per tile */
  static constexpr int LD = HD + 8, LDS = BQ + 8;
  /* dQ = dS K over the block's 4 warps: QROWS strips of 16 query rows x
   * QCOLS column groups of HD / QCOLS. */
  static constexpr int QROWS = BQ / 16, QCOLS = 4 / QROWS;
  static constexpr int NOQ = HD / 8 / QCOLS;
  /* K, V [BK]; Q, dO [2][BQ]; dS^T [BK][LDS]; lse, D [2][BQ] */
  static constexpr size_t SMEM =
      ((size_t)2 * BK * LD + 4 * BQ * LD + BK * LDS) * sizeof(bf16) +
      4 * BQ * sizeof(float);
};

/* The scratch of one backward over nseq sequences: D [n, nq], the dQ
 * accumulator [n, nq, hd] (fp32), the ticket counter (64-bit: key tiles x
 * kv heads x sequences passes 2^31 at the largest shapes) and the flags
 * [nseq, nq, query tiles]. */
struct tc_scratch {
  float *dbuf, *dq_acc;
  unsigned long long *ticket;
  int *flags;
  size_t flag_count;
};
static size_t align256(size_t b) { return (b + 255) / 256 * 256; }
static size_t tc_flag_count(long nseq, int seq_len, int nq, int hd) {
  int bq = hd == 128 ? bwd_cfg<128>::BQ : bwd_cfg<64>::BQ;
  return (size_t)nseq * nq * (size_t)((seq_len + bq - 1) / bq);
}
static size_t tc_scratch_bytes(long nseq, int seq_len, int nq, int hd) {
  size_t rows = (size_t)nseq * seq_len * nq;
  return align256(rows * sizeof(float)) +
         align256(rows * hd * sizeof(float)) +
         align256(sizeof(unsigned long long) +
                  tc_flag_count(nseq, seq_len, nq, hd) * sizeof(int));
}
static struct tc_scratch tc_scratch_at(void *base, long nseq, int seq_len,
                                       int nq, int hd) {
  size_t rows = (size_t)nseq * seq_len * nq;
  char *at = (char *)base;
  struct tc_scratch s;
  s.dbuf = (float *)at;
  at += align256(rows * sizeof(float));
  s.dq_acc = (float *)at;
  at += align256(rows * hd * sizeof(float));
  s.flag_count = tc_flag_count(nseq, seq_len, nq, hd);
  s.ticket = (unsigned long long *)at;
  s.flags = (int *)(s.ticket + 1);
  return s;
}

/* Starts the copies of query tile t0 of head h (q, dO, lse, D) into stage
 * buffers; rows past the sequence are zero. */
template <int HD>
__device__ __forceinline__ void load_query_tile(
    bf16 *sq, bf16 *sdo, float *slse, float *sd, const bf16 *q,
    const bf16 *dout, const float *lse, const float *dbuf, int h, int t0,
    long tok0, const struct attn_shape &sh) {
  constexpr int BQ = bwd_cfg<HD>::BQ;
  load_tile_async<HD>(sq, q + tok0 * sh.ldq, sh.ldq, h, t0, BQ, sh.seq_len);
  load_tile_async<HD>(sdo, dout + tok0 * sh.ldq, sh.ldq, h, t0, BQ,
                      sh.seq_len);
  for (int r = threadIdx.x; r < BQ; r += blockDim.x) {
    bool in = t0 + r < sh.seq_len;
    long at = in ? (tok0 + t0 + r) * sh.nq + h : 0;
    cp_async_4(slse + r, lse + at, in);
    cp_async_4(sd + r, dbuf + at, in);
  }
}

/* P^T in s and dS^T in dp (rows the keys kj0, kj1 of this lane, columns
 * the queries t0 + col), from S^T, dP^T and the tile's lse and D; masked
 * (P = 0) past the diagonal or the sequence when `edge`. */
template <int NS>
__device__ __forceinline__ void p_ds(float (&s)[NS][4], float (&dp)[NS][4],
                                     int t0, int kj0, int kj1,
                                     const float *slse, const float *sd,
                                     float c2, bool edge,
                                     const struct attn_shape &sh, int c) {
#pragma unroll
  for (int j = 0; j < NS; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      int col = j * 8 + 2 * c + (e & 1);
      int qi = t0 + col, kj = e < 2 ? kj0 : kj1;
      float p = exp2f(fmaf(s[j][e], c2, -slse[col] * LOG2E));
      if (edge && (kj > qi || qi >= sh.seq_len || kj >= sh.seq_len))
        p = 0.0f;
      s[j][e] = p;
      dp[j][e] = p * (dp[j][e] - sd[col]);
    }
}

/* dS^T's C fragments (this warp's 16 keys from row wk) into smem, bf16. */
template <int NS>
__device__ __forceinline__ void store_ds(bf16 *sds, int lds, int wk,
                                         const float (&ds)[NS][4], int g,
                                         int c) {
#pragma unroll
  for (int j = 0; j < NS; j++) {
    *reinterpret_cast<uint32_t *>(sds + (wk + g) * lds + j * 8 + 2 * c) =
        pack_pair(ds[j][0], ds[j][1]);
    *reinterpret_cast<uint32_t *>(sds + (wk + g + 8) * lds + j * 8 + 2 * c) =
        pack_pair(ds[j][2], ds[j][3]);
  }
}

/* Adds a warp's dQ part (rows t0+m0.., columns n0.. of head h) into the
 * fp32 accumulator. The caller holds the tile's turn, so the adds of the
 * key tiles happen in key order (an atomic add each: no lost updates,
 * L2-coherent, and in a fixed order the same bits every run). */
template <int NO>
__device__ __forceinline__ void add_dq(float *dq_acc, const float (&acc)[NO][4],
                                       long tok0, int r0, int h, int n0,
                                       const struct attn_shape &sh, int hd,
                                       int g, int c) {
#pragma unroll
  for (int half = 0; half < 2; half++) {
    int r = r0 + g + 8 * half;
    if (r >= sh.seq_len)
      continue;
    float *row = dq_acc + ((tok0 + r) * sh.nq + h) * (long)hd + n0 + 2 * c;
#pragma unroll
    for (int j = 0; j < NO; j++) {
      atomicAdd(row + j * 8, acc[j][2 * half]);
      atomicAdd(row + j * 8 + 1, acc[j][2 * half + 1]);
    }
  }
}

template <int HD>
__global__ void __launch_bounds__(128, 2)
attention_backward_tc(bf16 *dk, bf16 *dv, struct tc_scratch scr,
                      const bf16 *dout, const bf16 *q, const bf16 *k,
                      const bf16 *v, const float *lse, struct attn_shape sh) {
  typedef bwd_cfg<HD> C;
  constexpr int BK = C::BK, BQ = C::BQ, LD = C::LD, LDS = C::LDS,
                KS = HD / 16, NS = BQ / 8, NO = HD / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  bf16 *sk = reinterpret_cast<bf16 *>(smem);
  bf16 *sv = sk + BK * LD, *sq = sv + BK * LD; /* sq, sdo: [2][BQ][LD] */
  bf16 *sdo = sq + 2 * BQ * LD, *sds = sdo + 2 * BQ * LD;
  float *slse = reinterpret_cast<float *>(sds + BK * LDS); /* [2][BQ] */
  float *sd = slse + 2 * BQ;
  __shared__ unsigned long long ticket;
  /* The block's (key tile, kv head, sequence) comes from a ticket, in the
   * order blocks start, not from blockIdx: the tile it waits for in dQ's
   * order has a smaller ticket, taken by a block that is running or done.
   * Key tiles vary fastest. */
  if (threadIdx.x == 0)
    ticket = atomicAdd(scr.ticket, 1ull);
  __syncthreads();
  int nkt = (sh.seq_len + BK - 1) / BK, nqt = (sh.seq_len + BQ - 1) / BQ;
  int jt = (int)(ticket % nkt), kvh = (int)(ticket / nkt % sh.nkv);
  long seq = (long)(ticket / nkt / sh.nkv);
  long tok0 = (long)seq * sh.seq_len;
  int lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  int warp = (int)(threadIdx.x >> 5);
  int key0 = jt * BK, wk = warp * 16; /* the warp's keys in the tile */
  int kj0 = key0 + wk + g, kj1 = kj0 + 8; /* this lane's two keys */
  /* dQ's split of the warps: 16 query rows x HD / QCOLS columns each. */
  int qm0 = (warp % C::QROWS) * 16, qn0 = (warp / C::QROWS) * C::NOQ * 8;
  const float c2 = sh.scale * LOG2E;

  load_tile_async<HD>(sk, k + tok0 * sh.ldkv, sh.ldkv, kvh, key0, BK,
                      sh.seq_len);
  load_tile_async<HD>(sv, v + tok0 * sh.ldkv, sh.ldkv, kvh, key0, BK,
                      sh.seq_len);
  /* Local query heads reading kv head kvh: (q_begin + h)/group == kv. */
  int kv_global = kvh + sh.map.kv_begin;
  int h_begin = max(0, kv_global * sh.map.group - sh.map.q_begin);
  int h_end = min(sh.nq, (kv_global + 1) * sh.map.group - sh.map.q_begin);
  int tiles_per_head = nqt - key0 / BQ; /* query tiles from key0 on */
  int items = (h_end - h_begin) * tiles_per_head;
  if (items > 0)
    load_query_tile<HD>(sq, sdo, slse, sd, q, dout, lse, scr.dbuf, h_begin,
                        key0, tok0, sh);
  cp_async_commit(); /* group 0: K, V and the first query tile */
  float dka[NO][4], dva[NO][4];
  zero_frags(dka);
  zero_frags(dva);
  for (int it = 0; it < items; it++) {
    int h = h_begin + it / tiles_per_head;
    int t0 = key0 + (it % tiles_per_head) * BQ;
    int b = it & 1;
    if (it + 1 < items) { /* the next query tile's copy overlaps this one */
      int hn = h_begin + (it + 1) / tiles_per_head;
      int tn = key0 + ((it + 1) % tiles_per_head) * BQ;
      load_query_tile<HD>(sq + (b ^ 1) * BQ * LD, sdo + (b ^ 1) * BQ * LD,
                          slse + (b ^ 1) * BQ, sd + (b ^ 1) * BQ, q, dout, lse,
                          scr.dbuf, hn, tn, tok0, sh);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads(); /* tile `it` landed for every thread */
    const bf16 *tq = sq + b * BQ * LD, *tdo = sdo + b * BQ * LD;
    const float *tl = slse + b * BQ, *td = sd + b * BQ;
    {
      float s[NS][4], dp[NS][4]; /* rows keys, columns queries */
      zero_frags(s);
      zero_frags(dp);
      mma_rows_tt<KS, NS, 1>(s, sk, wk, tq, LD, lane);   /* S^T = K Q^T */
      mma_rows_tt<KS, NS, 1>(dp, sv, wk, tdo, LD, lane); /* dP^T = V dO^T */
      /* Warp-uniform: masks only where the tile crosses the diagonal
       * (a query before one of the warp's keys) or an end. */
      bool edge = t0 < key0 + wk + 15 || t0 + BQ > sh.seq_len ||
                  key0 + wk + 16 > sh.seq_len;
      p_ds(s, dp, t0, kj0, kj1, tl, td, c2, edge, sh, c);
      mma_c_m(dva, s, tdo, LD, 0, lane); /* dV += P^T dO */
      mma_c_m(dka, dp, tq, LD, 0, lane); /* dK += dS^T Q */
      store_ds(sds, LDS, wk, dp, g, c);
    }
    __syncthreads(); /* dS^T complete */
    float dqa[C::NOQ][4];
    zero_frags(dqa);
    mma_tt_m<BK / 16, C::NOQ>(dqa, sds, LDS, qm0, sk, LD, qn0,
                              lane); /* dQ = dS K */
    /* This key tile's turn at query tile t0 of head h: after tiles 0..jt-1. */
    int *flag = scr.flags + ((long)seq * sh.nq + h) * nqt + t0 / BQ;
    if (threadIdx.x == 0)
      wait_flag(flag, jt);
    __syncthreads();
    add_dq(scr.dq_acc, dqa, tok0, t0 + qm0, h, qn0, sh, HD, g, c);
    __threadfence(); /* the adds are visible before the flag moves on */
    __syncthreads(); /* ... and every thread's; dS^T, Q, dO buffers free */
    if (threadIdx.x == 0)
      set_flag(flag, jt + 1);
  }
  cp_async_wait<0>(); /* a block with no query tile still waits for K, V */
  add_rows(dk, sh.ldkv, (long)kvh * HD, dka, sh.scale, tok0, kj0, kj1,
           sh.seq_len, c);
  add_rows(dv, sh.ldkv, (long)kvh * HD, dva, 1.0f, tok0, kj0, kj1, sh.seq_len,
           c);
}

/* dq += scale dQ_acc, elementwise over n * nq * hd (both token-major). */
__global__ void attention_dq_finish_tc(bf16 *dq, const float *dq_acc,
                                       long pairs, float scale) {
  for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < pairs;
       i += (long)gridDim.x * blockDim.x)
    add_pair(dq + 2 * i, scale * dq_acc[2 * i], scale * dq_acc[2 * i + 1]);
}

/* The launches for nseq sequences (one chunk of attention.cu's split). The
 * forward and the backward stage their tiles in dynamic shared memory,
 * above 48 KiB: they opt in. */
template <int HD>
struct hxc_launch_dims tc_forward_launch(int seq_len, int nq, long nseq) {
  typedef fwd_cfg<HD> C;
  return launch_dims((unsigned long)(seq_len + C::BR - 1) / C::BR,
                     (unsigned long)nq, (unsigned long)nseq, C::THREADS,
                     C::SMEM, true);
}
static struct hxc_launch_dims tc_rowdot_launch(long rows) {
  return launch_dims(grid_for(rows, 8), 1, 1, 256, 0, false);
}
/* The backward's grid only sizes the launch (its blocks take tickets). */
template <int HD>
struct hxc_launch_dims tc_backward_launch(int seq_len, int nkv, long nseq) {
  typedef bwd_cfg<HD> C;
  return launch_dims((unsigned long)(seq_len + C::BK - 1) / C::BK,
                     (unsigned long)nkv, (unsigned long)nseq, C::THREADS,
                     C::SMEM, true);
}
static struct hxc_launch_dims tc_finish_launch(long pairs) {
  return launch_dims(grid_for(pairs, EW_THREADS), 1, 1, EW_THREADS, 0, false);
}

template <int HD>
void forward_tc(void *o, float *lse, const void *q, const void *k,
                const void *v, const struct attn_shape &sh, long nseq,
                cudaStream_t stream) {
  struct hxc_launch_dims l = tc_forward_launch<HD>(sh.seq_len, sh.nq, nseq);
  /* Above 48 KiB a kernel must opt in to its dynamic shared memory. */
  HXC_CHECK(cudaFuncSetAttribute(attention_forward_tc<HD>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)l.smem));
  attention_forward_tc<HD><<<grid_of(l), l.threads, l.smem, stream>>>(
      (bf16 *)o, lse, (const bf16 *)q, (const bf16 *)k, (const bf16 *)v, sh);
  HXC_LAUNCHED("attention_forward_tc");
}

template <int HD>
void backward_tc(void *dq, void *dk, void *dv, void *scratch, const void *dout,
                 const void *q, const void *k, const void *v, const void *o,
                 const float *lse, const struct attn_shape &sh, long nseq,
                 cudaStream_t stream) {
  struct tc_scratch scr = tc_scratch_at(scratch, nseq, sh.seq_len, sh.nq, HD);
  long rows = nseq * sh.seq_len * sh.nq; /* (token, head) rows of HD */
  HXC_CHECK(cudaMemsetAsync(scr.dq_acc, 0, (size_t)rows * HD * sizeof(float),
                            stream));
  HXC_CHECK(cudaMemsetAsync(scr.ticket, 0,
                            sizeof *scr.ticket + scr.flag_count * sizeof(int),
                            stream));
  struct hxc_launch_dims lr = tc_rowdot_launch(rows);
  attention_rowdot_tc<HD><<<grid_of(lr), lr.threads, 0, stream>>>(
      scr.dbuf, (const bf16 *)dout, (const bf16 *)o, rows);
  HXC_LAUNCHED("attention_rowdot_tc");
  struct hxc_launch_dims lb = tc_backward_launch<HD>(sh.seq_len, sh.nkv, nseq);
  HXC_CHECK(cudaFuncSetAttribute(attention_backward_tc<HD>,
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)lb.smem));
  attention_backward_tc<HD><<<grid_of(lb), lb.threads, lb.smem, stream>>>(
      (bf16 *)dk, (bf16 *)dv, scr, (const bf16 *)dout, (const bf16 *)q,
      (const bf16 *)k, (const bf16 *)v, lse, sh);
  HXC_LAUNCHED("attention_backward_tc");
  long pairs = rows * HD / 2;
  struct hxc_launch_dims lf = tc_finish_launch(pairs);
  attention_dq_finish_tc<<<grid_of(lf), lf.threads, 0, stream>>>(
      (bf16 *)dq, scr.dq_acc, pairs, sh.scale);
  HXC_LAUNCHED("attention_dq_finish_tc");
}

} /* namespace */

bool hxc_attention_tc_supports(int hd, enum hxc_dtype dt) {
  return dt == HXC_BF16 && (hd == 64 || hd == 128);
}

size_t hxc_attention_tc_scratch(long nseq, int seq_len, int nq, int hd) {
  if (nseq <= 0 || seq_len <= 0 || nq <= 0)
    return 0;
  return tc_scratch_bytes(nseq, seq_len, nq, hd);
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

void hxc_attention_tc_backward(void *dq, void *dk, void *dv, void *scratch,
                               const void *dout, const void *q, const void *k,
                               const void *v, const void *o, const float *lse,
                               struct hxc_kv_map map, long nseq, int seq_len,
                               int nq, int nkv, int hd, cudaStream_t stream) {
  struct attn_shape sh = attn_shape_of(map, seq_len, nq, nkv, hd);
  if (hd == 64)
    backward_tc<64>(dq, dk, dv, scratch, dout, q, k, v, o, lse, sh, nseq,
                    stream);
  else
    backward_tc<128>(dq, dk, dv, scratch, dout, q, k, v, o, lse, sh, nseq,
                     stream);
}

template <int HD>
static void tc_launches(const struct hxc_launch_shapes *s, long ns,
                        hxc_launch_fn fn, void *arg) {
  long rows = ns * s->seq_len * s->nq;
  struct hxc_launch_dims f = tc_forward_launch<HD>(s->seq_len, s->nq, ns);
  struct hxc_launch_dims r = tc_rowdot_launch(rows);
  struct hxc_launch_dims b = tc_backward_launch<HD>(s->seq_len, s->nkv, ns);
  struct hxc_launch_dims d = tc_finish_launch(rows * HD / 2);
  char name[64];
  snprintf(name, sizeof name, "attention_forward_tc<%d>", HD);
  fn(arg, name, &f);
  snprintf(name, sizeof name, "attention_rowdot_tc<%d>", HD);
  fn(arg, name, &r);
  snprintf(name, sizeof name, "attention_backward_tc<%d>", HD);
  fn(arg, name, &b);
  fn(arg, "attention_dq_finish_tc", &d);
}

HXC_LAUNCHES(hxc_attention_tc_launches) {
  long ns = s->nseq < hxc_attention_seq_chunk() ? s->nseq
                                                : hxc_attention_seq_chunk();
  if (s->hd == 64)
    tc_launches<64>(s, ns, fn, arg);
  else if (s->hd == 128)
    tc_launches<128>(s, ns, fn, arg);
}
