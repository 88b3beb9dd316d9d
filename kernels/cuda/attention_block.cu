/* Block attention by global token positions (ring attention's building
 * block): the twins of hxk_attention_block_* of kernels/cpu/attention_block.c.
 *
 * Math. Query row t of a sequence sits at position q_pos[t], key row u at
 * k_pos[u]; t sees u iff k_pos[u] <= q_pos[t]. For one key block and a
 * query row, with s_u = q_t.k_u / sqrt(hd) over the visible u,
 *   lse_B = log sum_u e^{s_u},  o_B = sum_u e^{s_u - lse_B} v_u,
 * merged into the running state (o, lse) as
 *   lse' = log(e^lse + e^lse_B),  o' = o e^{lse - lse'} + o_B e^{lse_B - lse'}
 * (first: the state starts at o = 0, lse = -inf; a row that sees nothing
 * keeps it). Backward of a block from the FINAL lse and delta = rowsum(dO O):
 *   P = e^{s - lse},  dV += P^T dO,  dP = dO V^T,  dS = P (dP - delta),
 *   dQ += dS K / sqrt(hd),  dK += dS^T Q / sqrt(hd).
 *
 * Precision: q, k, v, dout are dt (fp32 or bf16), read as fp32; the running
 * state o, lse, the delta and the added-into gradients dq, dk, dv are fp32
 * whatever dt (they accumulate over the ring's hops).
 *
 * Thread layout: a block of 8 warps; a warp owns RW = 4 rows (query rows in
 * the forward and the dQ pass, key rows in the dK/dV pass), lane l holds
 * dims l, l+32, l+64, l+96 of a row (those < hd; any even hd <= 128). Tiles
 * of KT rows of the other side are staged in shared memory as fp32 with
 * their positions; a tile no row of the block can see is skipped (a shared
 * flag, set by any lane that finds a visible pair). Every visibility test
 * that guards a warp shuffle compares a warp-uniform position with a
 * tile-uniform one, so all 32 lanes always reach the same shuffles. */
#include <climits>

#include "kernels/cuda/common.cuh"

static constexpr int WARPS = 8;
static constexpr int THREADS = WARPS * 32;
static constexpr int RW = 4;            /* rows per warp */
static constexpr int ROWS = WARPS * RW; /* rows per block */
static constexpr int KT = 32;           /* rows of the other side per smem tile */
static constexpr int MAX_HD = 128;
static constexpr int EPL = MAX_HD / 32; /* dims per lane, at most */

/* Shapes of one block call. */
struct blk_shape {
  long nq_tok, nk_tok;
  int nq, nkv, hd;
  long ldq, ldkv; /* nq*hd, nkv*hd */
  struct hxc_kv_map map;
  float scale; /* 1/sqrt(hd) */
};

/* Position of row i (NULL: i). */
__device__ __forceinline__ int pos_of(const int *pos, long i) {
  return pos ? pos[i] : (int)i;
}

/* The local kv head that local query head h reads. */
__device__ __forceinline__ int kv_head_of(const blk_shape &sh, int h) {
  return (sh.map.q_begin + h) / sh.map.group - sh.map.kv_begin;
}

/* The lane's dims of one row (0 past hd, or for a row that does not exist). */
template <typename T>
__device__ __forceinline__ void load_lane_row(float *dst, const T *row,
                                              bool valid, int hd, int lane) {
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int d = lane + 32 * e;
    dst[e] = valid && d < hd ? load_f(row + d) : 0.0f;
  }
}

/* The lane's dims of row r of an smem tile [KT][hd]. */
__device__ __forceinline__ void tile_lane_row(float *dst, const float *tile,
                                              int r, int hd, int lane) {
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    int d = lane + 32 * e;
    dst[e] = d < hd ? tile[r * hd + d] : 0.0f;
  }
}

/* Rows [r0, r0 + count) of head `head` of a token-major tensor into an smem
 * tile [KT][hd] as fp32; rows past count become 0. */
template <typename T>
__device__ void load_tile(float *tile, const T *base, long ld, int head,
                          long r0, int count, int hd) {
  for (int e = threadIdx.x; e < KT * hd; e += blockDim.x) {
    int r = e / hd, d = e - r * hd;
    tile[e] = r < count ? load_f(base + (r0 + r) * ld + (long)head * hd + d)
                        : 0.0f;
  }
}

/* The positions of key rows [j0, j0 + kc) into skpos (INT_MAX past kc: seen
 * by none), and whether any query row of the block (the warp's positions
 * qp, INT_MIN for a row that sees nothing) sees one of them: a shared flag,
 * so every thread of the block returns the same. Every thread calls it; the
 * first barrier lets the previous tile and flag go. */
__device__ __forceinline__ bool stage_key_positions(int *skpos, int *sany,
                                                    const int *k_pos, long j0,
                                                    int kc, const int *qp,
                                                    int lane) {
  __syncthreads();
  if (threadIdx.x < KT)
    skpos[threadIdx.x] =
        (int)threadIdx.x < kc ? pos_of(k_pos, j0 + threadIdx.x) : INT_MAX;
  if (threadIdx.x == 0)
    *sany = 0;
  __syncthreads();
  bool vis = false;
#pragma unroll
  for (int j = 0; j < RW; j++)
    vis = vis || skpos[lane] <= qp[j]; /* lane < KT: one key per lane */
  if (vis)
    *sany = 1;
  __syncthreads();
  return *sany != 0;
}

__device__ __forceinline__ float dot_lanes(const float *a, const float *b) {
  float s = 0.0f;
#pragma unroll
  for (int e = 0; e < EPL; e++)
    s += a[e] * b[e];
  return warp_sum(s);
}

/* ---------------------------------------------------------------------------
 * Forward. Block = (ROWS query rows, query head, sequence); per row, over
 * the visible keys u in order:  s = scale q.k_u;  m' = max(m, s);
 *   l = l e^(m - m') + e^(s - m');  acc = acc e^(m - m') + e^(s - m') v_u;
 * then (o_B, lse_B) = (acc / l, m + log l) merged into (o, lse).
 * ------------------------------------------------------------------------- */
template <typename T>
__global__ void __launch_bounds__(THREADS)
block_forward_kernel(float *o, float *lse, const T *q, const int *q_pos,
                     const T *k, const T *v, const int *k_pos, blk_shape sh,
                     bool first) {
  __shared__ float sk[KT * MAX_HD], sv[KT * MAX_HD];
  __shared__ int skpos[KT];
  __shared__ int sany;
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = kv_head_of(sh, h);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  long qrow0 = (long)seq * sh.nq_tok, krow0 = (long)seq * sh.nk_tok;

  float qr[RW][EPL], acc[RW][EPL], m[RW], l[RW];
  int qp[RW];
#pragma unroll
  for (int j = 0; j < RW; j++) {
    long i = (long)blockIdx.x * ROWS + warp * RW + j;
    bool valid = i < sh.nq_tok;
    qp[j] = valid ? pos_of(q_pos, i) : INT_MIN; /* INT_MIN sees no key */
    load_lane_row<T>(qr[j], q + (qrow0 + i) * sh.ldq + (long)h * sh.hd, valid,
                     sh.hd, lane);
#pragma unroll
    for (int e = 0; e < EPL; e++)
      acc[j][e] = 0.0f;
    m[j] = -INFINITY;
    l[j] = 0.0f;
  }
  for (long j0 = 0; j0 < sh.nk_tok; j0 += KT) {
    int kc = (int)(sh.nk_tok - j0 < KT ? sh.nk_tok - j0 : KT);
    if (!stage_key_positions(skpos, &sany, k_pos, j0, kc, qp, lane))
      continue; /* uniform over the block */
    load_tile<T>(sk, k + krow0 * sh.ldkv, sh.ldkv, kvh, j0, kc, sh.hd);
    load_tile<T>(sv, v + krow0 * sh.ldkv, sh.ldkv, kvh, j0, kc, sh.hd);
    __syncthreads();
    for (int u = 0; u < kc; u++) {
      float kr[EPL], vr[EPL];
      tile_lane_row(kr, sk, u, sh.hd, lane);
      tile_lane_row(vr, sv, u, sh.hd, lane);
      int kp = skpos[u];
#pragma unroll
      for (int j = 0; j < RW; j++) {
        if (kp > qp[j]) /* warp-uniform */
          continue;
        float s = sh.scale * dot_lanes(qr[j], kr);
        float m_new = fmaxf(m[j], s);
        float corr = expf(m[j] - m_new), p = expf(s - m_new);
        l[j] = l[j] * corr + p;
#pragma unroll
        for (int e = 0; e < EPL; e++)
          acc[j][e] = acc[j][e] * corr + p * vr[e];
        m[j] = m_new;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < RW; j++) {
    long i = (long)blockIdx.x * ROWS + warp * RW + j;
    if (i >= sh.nq_tok)
      continue; /* warp-uniform */
    long row = qrow0 + i;
    float *orow = o + row * sh.ldq + (long)h * sh.hd;
    float *lrow = lse + row * sh.nq + h;
    /* Every lane reads the old lse before lane 0 may write it: the shuffle
     * of warp_max orders the reads before the write. */
    float old = warp_max(first ? -INFINITY : *lrow);
    if (l[j] == 0.0f) { /* this block showed the row no key */
      if (first) {
#pragma unroll
        for (int e = 0; e < EPL; e++)
          if (lane + 32 * e < sh.hd)
            orow[lane + 32 * e] = 0.0f;
        if (lane == 0)
          *lrow = -INFINITY;
      }
      continue;
    }
    float lse_b = m[j] + logf(l[j]);
    float merged = old == -INFINITY
                       ? lse_b
                       : fmaxf(old, lse_b) + log1pf(expf(-fabsf(old - lse_b)));
    float w_old = old == -INFINITY ? 0.0f : expf(old - merged);
    float w_new = expf(lse_b - merged) / l[j];
#pragma unroll
    for (int e = 0; e < EPL; e++) {
      int d = lane + 32 * e;
      if (d < sh.hd)
        orow[d] = (first ? 0.0f : orow[d] * w_old) + acc[j][e] * w_new;
    }
    if (lane == 0)
      *lrow = merged;
  }
}

/* ---------------------------------------------------------------------------
 * delta[r] = sum_d dout[r, d] o[r, d] for every (token, head) row r of hd
 * elements: one thread per row.
 * ------------------------------------------------------------------------- */
template <typename T>
__global__ void block_delta_kernel(float *delta, const T *dout, const float *o,
                                   long rows, int hd) {
  for (long r = (long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
       r += (long)gridDim.x * blockDim.x) {
    float s = 0.0f;
    for (int d = 0; d < hd; d++)
      s += load_f(dout + r * hd + d) * o[r * hd + d];
    delta[r] = s;
  }
}

/* ---------------------------------------------------------------------------
 * Backward, dQ. Block = (ROWS query rows, query head, sequence); per row and
 * visible key u:  p = e^(scale q.k_u - lse);  dp = dO.v_u;
 *   dq += p (dp - delta) k_u;  at the end dQ (global) += scale dq.
 * Rows with lse = -inf saw no key in any block: they take no part.
 * ------------------------------------------------------------------------- */
template <typename T>
__global__ void __launch_bounds__(THREADS)
block_backward_dq_kernel(float *dq, const T *dout, const T *q,
                         const int *q_pos, const T *k, const T *v,
                         const int *k_pos, const float *lse,
                         const float *delta, blk_shape sh) {
  __shared__ float sk[KT * MAX_HD], sv[KT * MAX_HD];
  __shared__ int skpos[KT];
  __shared__ int sany;
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = kv_head_of(sh, h);
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  long qrow0 = (long)seq * sh.nq_tok, krow0 = (long)seq * sh.nk_tok;

  float qr[RW][EPL], dor[RW][EPL], dqr[RW][EPL], lrow[RW], drow[RW];
  int qp[RW];
#pragma unroll
  for (int j = 0; j < RW; j++) {
    long i = (long)blockIdx.x * ROWS + warp * RW + j;
    bool valid = i < sh.nq_tok;
    long row = qrow0 + i;
    lrow[j] = valid ? lse[row * sh.nq + h] : -INFINITY;
    drow[j] = valid ? delta[row * sh.nq + h] : 0.0f;
    valid = valid && lrow[j] != -INFINITY;
    qp[j] = valid ? pos_of(q_pos, i) : INT_MIN;
    load_lane_row<T>(qr[j], q + row * sh.ldq + (long)h * sh.hd, valid, sh.hd,
                     lane);
    load_lane_row<T>(dor[j], dout + row * sh.ldq + (long)h * sh.hd, valid,
                     sh.hd, lane);
#pragma unroll
    for (int e = 0; e < EPL; e++)
      dqr[j][e] = 0.0f;
  }
  for (long j0 = 0; j0 < sh.nk_tok; j0 += KT) {
    int kc = (int)(sh.nk_tok - j0 < KT ? sh.nk_tok - j0 : KT);
    if (!stage_key_positions(skpos, &sany, k_pos, j0, kc, qp, lane))
      continue; /* uniform over the block */
    load_tile<T>(sk, k + krow0 * sh.ldkv, sh.ldkv, kvh, j0, kc, sh.hd);
    load_tile<T>(sv, v + krow0 * sh.ldkv, sh.ldkv, kvh, j0, kc, sh.hd);
    __syncthreads();
    for (int u = 0; u < kc; u++) {
      float kr[EPL], vr[EPL];
      tile_lane_row(kr, sk, u, sh.hd, lane);
      tile_lane_row(vr, sv, u, sh.hd, lane);
      int kp = skpos[u];
#pragma unroll
      for (int j = 0; j < RW; j++) {
        if (kp > qp[j])
          continue;
        float s = sh.scale * dot_lanes(qr[j], kr);
        float dp = dot_lanes(dor[j], vr);
        float ds = expf(s - lrow[j]) * (dp - drow[j]);
#pragma unroll
        for (int e = 0; e < EPL; e++)
          dqr[j][e] += ds * kr[e];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < RW; j++) {
    if (qp[j] == INT_MIN)
      continue;
    long i = (long)blockIdx.x * ROWS + warp * RW + j;
    float *grow = dq + (qrow0 + i) * sh.ldq + (long)h * sh.hd;
#pragma unroll
    for (int e = 0; e < EPL; e++)
      if (lane + 32 * e < sh.hd)
        grow[lane + 32 * e] += sh.scale * dqr[j][e];
  }
}

/* ---------------------------------------------------------------------------
 * Backward, dK and dV. Block = (ROWS key rows, kv head, sequence); it walks
 * every local query head that reads this kv head and every query tile:
 *   for each query t that sees key u:  p = e^(scale q_t.k_u - lse_t);
 *     dv += p dO_t;  dk += p (dO_t.v_u - delta_t) q_t;
 *   dK (global) += scale dk;  dV (global) += dv.
 * The kv head's own loop sums its query heads: no atomics.
 * ------------------------------------------------------------------------- */
template <typename T>
__global__ void __launch_bounds__(THREADS)
block_backward_dkv_kernel(float *dk, float *dv, const T *dout, const T *q,
                          const int *q_pos, const T *k, const T *v,
                          const int *k_pos, const float *lse,
                          const float *delta, blk_shape sh) {
  __shared__ float sq[KT * MAX_HD], sdo[KT * MAX_HD];
  __shared__ int sqpos[KT];
  __shared__ float slse[KT], sd[KT];
  __shared__ int sany;
  int kvh = blockIdx.y, seq = blockIdx.z;
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  long qrow0 = (long)seq * sh.nq_tok, krow0 = (long)seq * sh.nk_tok;

  float kr[RW][EPL], vr[RW][EPL], dkr[RW][EPL], dvr[RW][EPL];
  int kp[RW];
#pragma unroll
  for (int j = 0; j < RW; j++) {
    long u = (long)blockIdx.x * ROWS + warp * RW + j;
    bool valid = u < sh.nk_tok;
    kp[j] = valid ? pos_of(k_pos, u) : INT_MAX; /* INT_MAX: seen by none */
    long at = (krow0 + u) * sh.ldkv + (long)kvh * sh.hd;
    load_lane_row<T>(kr[j], k + at, valid, sh.hd, lane);
    load_lane_row<T>(vr[j], v + at, valid, sh.hd, lane);
#pragma unroll
    for (int e = 0; e < EPL; e++)
      dkr[j][e] = dvr[j][e] = 0.0f;
  }
  /* Local query heads reading kv head kvh: (q_begin + h) / group == kv. */
  int kv_global = kvh + sh.map.kv_begin;
  int h_begin = max(0, kv_global * sh.map.group - sh.map.q_begin);
  int h_end = min(sh.nq, (kv_global + 1) * sh.map.group - sh.map.q_begin);
  for (int h = h_begin; h < h_end; h++) {
    for (long i0 = 0; i0 < sh.nq_tok; i0 += KT) {
      int qc = (int)(sh.nq_tok - i0 < KT ? sh.nq_tok - i0 : KT);
      __syncthreads();
      if (threadIdx.x < KT) {
        int r = threadIdx.x;
        long row = qrow0 + i0 + r;
        float l = r < qc ? lse[row * sh.nq + h] : -INFINITY;
        /* a query that saw no key anywhere (lse -inf) sees none here */
        sqpos[r] = l != -INFINITY ? pos_of(q_pos, i0 + r) : INT_MIN;
        slse[r] = l;
        sd[r] = r < qc ? delta[row * sh.nq + h] : 0.0f;
      }
      if (threadIdx.x == 0)
        sany = 0;
      __syncthreads();
      bool vis = false;
#pragma unroll
      for (int j = 0; j < RW; j++)
        vis = vis || kp[j] <= sqpos[lane];
      if (vis)
        sany = 1;
      __syncthreads();
      if (!sany)
        continue;
      load_tile<T>(sq, q + qrow0 * sh.ldq, sh.ldq, h, i0, qc, sh.hd);
      load_tile<T>(sdo, dout + qrow0 * sh.ldq, sh.ldq, h, i0, qc, sh.hd);
      __syncthreads();
      for (int t = 0; t < qc; t++) {
        int qpt = sqpos[t];
        float qv[EPL], dov[EPL];
        tile_lane_row(qv, sq, t, sh.hd, lane);
        tile_lane_row(dov, sdo, t, sh.hd, lane);
#pragma unroll
        for (int j = 0; j < RW; j++) {
          if (kp[j] > qpt) /* warp-uniform */
            continue;
          float s = sh.scale * dot_lanes(qv, kr[j]);
          float dp = dot_lanes(dov, vr[j]);
          float p = expf(s - slse[t]);
          float ds = p * (dp - sd[t]);
#pragma unroll
          for (int e = 0; e < EPL; e++) {
            dvr[j][e] += p * dov[e];
            dkr[j][e] += ds * qv[e];
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < RW; j++) {
    long u = (long)blockIdx.x * ROWS + warp * RW + j;
    if (u >= sh.nk_tok)
      continue;
    long at = (krow0 + u) * sh.ldkv + (long)kvh * sh.hd;
#pragma unroll
    for (int e = 0; e < EPL; e++) {
      int d = lane + 32 * e;
      if (d < sh.hd) {
        dk[at + d] += sh.scale * dkr[j][e];
        dv[at + d] += dvr[j][e];
      }
    }
  }
}

/* ---------------------------------------------------------------------------
 * Entry points.
 * ------------------------------------------------------------------------- */
static blk_shape blk_shape_of(long nq_tok, long nk_tok, struct hxc_kv_map map,
                              int nq, int nkv, int hd) {
  blk_shape sh;
  sh.nq_tok = nq_tok;
  sh.nk_tok = nk_tok;
  sh.nq = nq;
  sh.nkv = nkv;
  sh.hd = hd;
  sh.ldq = (long)nq * hd;
  sh.ldkv = (long)nkv * hd;
  sh.map = map;
  sh.scale = (float)(1.0 / sqrt((double)hd));
  return sh;
}

/* gridDim.z is the sequence: more than hxc_attention_seq_chunk sequences
 * go in several launches over pointer offsets (as attention.cu does). */
static void require_block_shape(long nseq, int nq, int nkv, int hd) {
  (void)nseq;
  HXC_REQUIRE(nq < 65536 && nkv < 65536,
              "attention_block: grid limits (heads < 65536)");
  HXC_REQUIRE(hd > 0 && hd <= MAX_HD && hd % 2 == 0,
              "attention_block: even head dim at most 128");
}

static unsigned tiles_of(long rows) {
  return (unsigned)((rows + ROWS - 1) / ROWS);
}

/* Block = (tile of ROWS rows, head, sequence) for ns <= the chunk. */
static struct hxc_launch_dims block_launch(long rows, int heads, long ns) {
  return launch_dims(tiles_of(rows), (unsigned long)heads, (unsigned long)ns,
                     THREADS, 0, false);
}

static long chunk_of(long nseq, long s0) {
  long c = hxc_attention_seq_chunk();
  return nseq - s0 < c ? nseq - s0 : c;
}

void hxc_attention_block_forward(float *o, float *lse, const void *q,
                                 const int *q_pos, long nq_tok, const void *k,
                                 const void *v, const int *k_pos, long nk_tok,
                                 struct hxc_kv_map map, long nseq, int nq,
                                 int nkv, int hd, bool first,
                                 enum hxc_dtype dt, cudaStream_t stream) {
  if (nseq <= 0 || nq <= 0 || nq_tok <= 0)
    return;
  require_block_shape(nseq, nq, nkv, hd);
  blk_shape sh = blk_shape_of(nq_tok, nk_tok, map, nq, nkv, hd);
  size_t es = hxc_dtype_bytes(dt);
  for (long s0 = 0; s0 < nseq; s0 += hxc_attention_seq_chunk()) {
    struct hxc_launch_dims l = block_launch(nq_tok, nq, chunk_of(nseq, s0));
    size_t qr = (size_t)(s0 * nq_tok), kr = (size_t)(s0 * nk_tok);
    float *oc = o + qr * sh.ldq, *lc = lse + qr * nq;
    const void *qc = (const char *)q + qr * sh.ldq * es;
    const void *kc = (const char *)k + kr * sh.ldkv * es;
    const void *vc = (const char *)v + kr * sh.ldkv * es;
    HXC_DISPATCH(dt, T,
                 block_forward_kernel<T><<<grid_of(l), l.threads, 0, stream>>>(
                     oc, lc, (const T *)qc, q_pos, (const T *)kc,
                     (const T *)vc, k_pos, sh, first));
    HXC_LAUNCHED("block_forward_kernel");
  }
}

void hxc_attention_block_delta(float *delta, const void *dout, const float *o,
                               long n, int nq, int hd, enum hxc_dtype dt,
                               cudaStream_t stream) {
  long rows = n * nq;
  if (rows <= 0)
    return;
  struct hxc_launch_dims l = ew_launch(rows);
  HXC_DISPATCH(dt, T,
               block_delta_kernel<T><<<grid_of(l), l.threads, 0, stream>>>(
                   delta, (const T *)dout, o, rows, hd));
  HXC_LAUNCHED("block_delta_kernel");
}

void hxc_attention_block_backward(float *dq, float *dk, float *dv,
                                  const void *dout, const void *q,
                                  const int *q_pos, long nq_tok, const void *k,
                                  const void *v, const int *k_pos, long nk_tok,
                                  const float *lse, const float *delta,
                                  struct hxc_kv_map map, long nseq, int nq,
                                  int nkv, int hd, enum hxc_dtype dt,
                                  cudaStream_t stream) {
  if (nseq <= 0 || nq <= 0 || nq_tok <= 0 || nk_tok <= 0)
    return;
  require_block_shape(nseq, nq, nkv, hd);
  blk_shape sh = blk_shape_of(nq_tok, nk_tok, map, nq, nkv, hd);
  size_t es = hxc_dtype_bytes(dt);
  for (long s0 = 0; s0 < nseq; s0 += hxc_attention_seq_chunk()) {
    long ns = chunk_of(nseq, s0);
    size_t qr = (size_t)(s0 * nq_tok), kr = (size_t)(s0 * nk_tok);
    float *dqc = dq + qr * sh.ldq, *dkc = dk + kr * sh.ldkv,
          *dvc = dv + kr * sh.ldkv;
    const void *doc = (const char *)dout + qr * sh.ldq * es,
               *qc = (const char *)q + qr * sh.ldq * es,
               *kc = (const char *)k + kr * sh.ldkv * es,
               *vc = (const char *)v + kr * sh.ldkv * es;
    const float *lc = lse + qr * nq, *dc = delta + qr * nq;
    struct hxc_launch_dims lq = block_launch(nq_tok, nq, ns);
    HXC_DISPATCH(dt, T,
                 block_backward_dq_kernel<T>
                 <<<grid_of(lq), lq.threads, 0, stream>>>(
                     dqc, (const T *)doc, (const T *)qc, q_pos, (const T *)kc,
                     (const T *)vc, k_pos, lc, dc, sh));
    HXC_LAUNCHED("block_backward_dq_kernel");
    struct hxc_launch_dims lk = block_launch(nk_tok, nkv, ns);
    HXC_DISPATCH(dt, T,
                 block_backward_dkv_kernel<T>
                 <<<grid_of(lk), lk.threads, 0, stream>>>(
                     dkc, dvc, (const T *)doc, (const T *)qc, q_pos,
                     (const T *)kc, (const T *)vc, k_pos, lc, dc, sh));
    HXC_LAUNCHED("block_backward_dkv_kernel");
  }
}

/* The block kernels at a whole-sequence block (nq_tok = nk_tok = seq_len,
 * the most a ring step holds). */
HXC_LAUNCHES(hxc_attention_block_launches) {
  long ns = chunk_of(s->nseq, 0), n = s->nseq * s->seq_len;
  struct hxc_launch_dims q = block_launch(s->seq_len, s->nq, ns);
  struct hxc_launch_dims k = block_launch(s->seq_len, s->nkv, ns);
  struct hxc_launch_dims d = ew_launch(n * s->nq);
  fn(arg, "block_forward_kernel", &q);
  fn(arg, "block_delta_kernel", &d);
  fn(arg, "block_backward_dq_kernel", &q);
  fn(arg, "block_backward_dkv_kernel", &k);
}
