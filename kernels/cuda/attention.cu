/* Causal GQA attention, forward and backward, flash-attention style
 * (kernels/cpu/attention.c computes the same with a T x T score matrix per
 * head; here nothing of size T^2 exists): key (or query) tiles are staged
 * in shared memory, the softmax is formed online, and the backward
 * recomputes the probabilities from the forward's log-sum-exp.
 *
 * This file holds the entry points and the tiled kernel that computes in
 * fp32 whatever the storage type (the fp32 exactness mode, any head dim of
 * 16/32/64/128, and the reference the tensor-core kernel of
 * attention_tc.cu is checked against).
 *
 * Thread layout of the tiled kernel: a "row group" of LPR lanes owns one
 * row (a query row in the forward and dQ pass, a key row in the dK/dV
 * pass); lane l of the group holds the dims c*4*LPR + 4*l + {0..3}, so a
 * dot product over the head is EPL multiply-adds per lane and log2(LPR)
 * shuffles. Every lane runs every loop trip (rows outside the sequence or
 * above the causal diagonal compute and are masked, never skipped), so the
 * full-warp shuffles are always legal. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/common.cuh"

template <int HD> struct tiled_cfg {
  static constexpr int LPR = HD >= 64 ? 16 : HD / 4; /* lanes per row */
  static constexpr int EPL = HD / LPR;               /* dims per lane */
  static constexpr int THREADS = 256;
  static constexpr int GROUPS = THREADS / LPR;
  static constexpr int BR = 64;            /* query rows per block */
  static constexpr int RQ = BR / GROUPS;   /* query rows per group */
  static constexpr int BC = HD == 128 ? 32 : 64; /* keys per smem tile */
  static constexpr int BK = HD == 128 ? 32 : 64; /* keys per dK/dV block */
  static constexpr int RK = BK / GROUPS >= 1 ? BK / GROUPS : 1;
  static constexpr int BQ = HD == 128 ? 32 : 64; /* queries per smem tile */
  static_assert(EPL % 4 == 0 && RQ >= 1 && GROUPS * RK == BK, "tile shape");
};

/* The dims lane `l` of a row group holds: e-th is dim_of<HD>(l, e). */
template <int HD>
__device__ __forceinline__ int dim_of(int l, int e) {
  constexpr int LPR = tiled_cfg<HD>::LPR;
  return (e / 4) * 4 * LPR + 4 * l + (e % 4);
}

/* Sum over the LPR lanes of a row group (aligned, power of two). */
template <int LPR>
__device__ __forceinline__ float group_sum(float x) {
  for (int off = LPR / 2; off > 0; off >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/* Loads rows [r0, r0+rows) of head `head` (width HD) of a token-major
 * tensor with row stride ld into smem tile[rows][HD] as fp32; rows at or
 * past seq_len become 0. */
template <typename T, int HD>
__device__ void load_tile(float *tile, const T *base, long ld, int head,
                          int r0, int rows, int seq_len) {
  for (int e = threadIdx.x; e < rows * HD; e += blockDim.x) {
    int r = e / HD, d = e - r * HD;
    int t = r0 + r;
    tile[e] = t < seq_len ? load_f(base + (long)t * ld + (long)head * HD + d)
                          : 0.0f;
  }
}

/* Loads the EPL dims of row t (0 past the sequence) into registers. */
template <typename T, int HD>
__device__ __forceinline__ void load_row(float *dst, const T *base, long ld,
                                         int head, int t, int seq_len, int l) {
  constexpr int EPL = tiled_cfg<HD>::EPL;
#pragma unroll
  for (int e = 0; e < EPL; e++)
    dst[e] = t < seq_len
                 ? load_f(base + (long)t * ld + (long)head * HD + dim_of<HD>(l, e))
                 : 0.0f;
}

/* row[dims of lane l] += scale * vals (a gradient row, added into). */
template <typename T, int HD>
__device__ __forceinline__ void add_row(T *row, const float *vals, float scale,
                                        int l) {
  constexpr int EPL = tiled_cfg<HD>::EPL;
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    T *p = row + dim_of<HD>(l, e);
    store_f(p, load_f(p) + scale * vals[e]);
  }
}

/* The lane's dims of key row uu of the smem tiles sk and sv. */
template <int HD>
__device__ __forceinline__ void tile_row(float *kr, float *vr, const float *sk,
                                         const float *sv, int uu, int l) {
  constexpr int EPL = tiled_cfg<HD>::EPL;
#pragma unroll
  for (int e = 0; e < EPL; e++) {
    kr[e] = sk[uu * HD + dim_of<HD>(l, e)];
    vr[e] = sv[uu * HD + dim_of<HD>(l, e)];
  }
}

/* ---------------------------------------------------------------------------
 * Forward. Block = (query tile of BR rows, query head, sequence).
 *   for each key u <= t:  s = scale q_t.k_u;  m' = max(m, s);
 *     l = l e^(m - m') + e^(s - m');  o = o e^(m - m') + e^(s - m') v_u;
 *   o_t = o / l;  lse_t = m + log l.
 * ------------------------------------------------------------------------- */
template <typename T, int HD>
__global__ void __launch_bounds__(256)
attention_forward_tiled(T *o, float *lse, const T *q, const T *k, const T *v,
                        struct attn_shape sh) {
  typedef tiled_cfg<HD> C;
  __shared__ float sk[C::BC * HD], sv[C::BC * HD];
  int tile = gridDim.x - 1 - blockIdx.x; /* long (late) tiles first */
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = (sh.map.q_begin + h) / sh.map.group - sh.map.kv_begin;
  long tok0 = (long)seq * sh.seq_len;
  const T *qs = q + tok0 * sh.ldq, *ks = k + tok0 * sh.ldkv,
          *vs = v + tok0 * sh.ldkv;
  int grp = threadIdx.x / C::LPR, l = threadIdx.x % C::LPR;
  int row0 = tile * C::BR;

  float qr[C::RQ][C::EPL], acc[C::RQ][C::EPL], m[C::RQ], lsum[C::RQ];
#pragma unroll
  for (int j = 0; j < C::RQ; j++) {
    load_row<T, HD>(qr[j], qs, sh.ldq, h, row0 + grp + j * C::GROUPS,
                    sh.seq_len, l);
#pragma unroll
    for (int e = 0; e < C::EPL; e++)
      acc[j][e] = 0.0f;
    m[j] = -INFINITY;
    lsum[j] = 0.0f;
  }
  int key_end = min(sh.seq_len, row0 + C::BR); /* causal: no later keys */
  for (int u0 = 0; u0 < key_end; u0 += C::BC) {
    __syncthreads(); /* the previous tile is no longer read */
    load_tile<T, HD>(sk, ks, sh.ldkv, kvh, u0, C::BC, sh.seq_len);
    load_tile<T, HD>(sv, vs, sh.ldkv, kvh, u0, C::BC, sh.seq_len);
    __syncthreads();
    int ucount = min(C::BC, key_end - u0);
    for (int uu = 0; uu < ucount; uu++) {
      float kr[C::EPL], vr[C::EPL];
      tile_row<HD>(kr, vr, sk, sv, uu, l);
#pragma unroll
      for (int j = 0; j < C::RQ; j++) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < C::EPL; e++)
          dot += qr[j][e] * kr[e];
        float s = sh.scale * group_sum<C::LPR>(dot);
        int t = row0 + grp + j * C::GROUPS;
        if (u0 + uu > t) /* above the diagonal: masked, not skipped */
          continue;
        float m_new = fmaxf(m[j], s);
        float corr = expf(m[j] - m_new), p = expf(s - m_new);
        lsum[j] = lsum[j] * corr + p;
#pragma unroll
        for (int e = 0; e < C::EPL; e++)
          acc[j][e] = acc[j][e] * corr + p * vr[e];
        m[j] = m_new;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < C::RQ; j++) {
    int t = row0 + grp + j * C::GROUPS;
    if (t >= sh.seq_len)
      continue;
    float inv = 1.0f / lsum[j];
    T *orow = o + (tok0 + t) * sh.ldq + (long)h * HD;
#pragma unroll
    for (int e = 0; e < C::EPL; e++)
      store_f(orow + dim_of<HD>(l, e), acc[j][e] * inv);
    if (l == 0)
      lse[(tok0 + t) * sh.nq + h] = m[j] + logf(lsum[j]);
  }
}

/* ---------------------------------------------------------------------------
 * Backward, pass 1 (dQ). Block = (query tile, query head, sequence):
 *   D_t = dO_t . O_t  (written to dbuf for pass 2);
 *   for each key u <= t:  p = e^(scale q_t.k_u - lse_t);  dp = dO_t . v_u;
 *     ds = p (dp - D_t);  dq_t += ds k_u;
 *   dq_t (global) += scale dq_t.
 * ------------------------------------------------------------------------- */
template <typename T, int HD>
__global__ void __launch_bounds__(256)
attention_backward_dq_tiled(T *dq, float *dbuf, const T *dout, const T *q,
                            const T *k, const T *v, const T *o,
                            const float *lse, struct attn_shape sh) {
  typedef tiled_cfg<HD> C;
  __shared__ float sk[C::BC * HD], sv[C::BC * HD];
  int tile = gridDim.x - 1 - blockIdx.x;
  int h = blockIdx.y, seq = blockIdx.z;
  int kvh = (sh.map.q_begin + h) / sh.map.group - sh.map.kv_begin;
  long tok0 = (long)seq * sh.seq_len;
  const T *ks = k + tok0 * sh.ldkv, *vs = v + tok0 * sh.ldkv;
  int grp = threadIdx.x / C::LPR, l = threadIdx.x % C::LPR;
  int row0 = tile * C::BR;

  float qr[C::RQ][C::EPL], dor[C::RQ][C::EPL], dqr[C::RQ][C::EPL];
  float lrow[C::RQ], drow[C::RQ];
#pragma unroll
  for (int j = 0; j < C::RQ; j++) {
    int t = row0 + grp + j * C::GROUPS;
    float orow[C::EPL];
    load_row<T, HD>(qr[j], q + tok0 * sh.ldq, sh.ldq, h, t, sh.seq_len, l);
    load_row<T, HD>(dor[j], dout + tok0 * sh.ldq, sh.ldq, h, t, sh.seq_len, l);
    load_row<T, HD>(orow, o + tok0 * sh.ldq, sh.ldq, h, t, sh.seq_len, l);
    float dot = 0.0f;
#pragma unroll
    for (int e = 0; e < C::EPL; e++) {
      dot += dor[j][e] * orow[e];
      dqr[j][e] = 0.0f;
    }
    drow[j] = group_sum<C::LPR>(dot);
    lrow[j] = t < sh.seq_len ? lse[(tok0 + t) * sh.nq + h] : 0.0f;
    if (t < sh.seq_len && l == 0)
      dbuf[(tok0 + t) * sh.nq + h] = drow[j];
  }
  int key_end = min(sh.seq_len, row0 + C::BR);
  for (int u0 = 0; u0 < key_end; u0 += C::BC) {
    __syncthreads();
    load_tile<T, HD>(sk, ks, sh.ldkv, kvh, u0, C::BC, sh.seq_len);
    load_tile<T, HD>(sv, vs, sh.ldkv, kvh, u0, C::BC, sh.seq_len);
    __syncthreads();
    int ucount = min(C::BC, key_end - u0);
    for (int uu = 0; uu < ucount; uu++) {
      float kr[C::EPL], vr[C::EPL];
      tile_row<HD>(kr, vr, sk, sv, uu, l);
#pragma unroll
      for (int j = 0; j < C::RQ; j++) {
        float sdot = 0.0f, pdot = 0.0f;
#pragma unroll
        for (int e = 0; e < C::EPL; e++) {
          sdot += qr[j][e] * kr[e];
          pdot += dor[j][e] * vr[e];
        }
        float s = sh.scale * group_sum<C::LPR>(sdot);
        float dp = group_sum<C::LPR>(pdot);
        int t = row0 + grp + j * C::GROUPS;
        if (u0 + uu > t || t >= sh.seq_len)
          continue;
        float ds = expf(s - lrow[j]) * (dp - drow[j]);
#pragma unroll
        for (int e = 0; e < C::EPL; e++)
          dqr[j][e] += ds * kr[e];
      }
    }
  }
#pragma unroll
  for (int j = 0; j < C::RQ; j++) {
    int t = row0 + grp + j * C::GROUPS;
    if (t < sh.seq_len)
      add_row<T, HD>(dq + (tok0 + t) * sh.ldq + (long)h * HD, dqr[j], sh.scale,
                     l);
  }
}

/* ---------------------------------------------------------------------------
 * Backward, pass 2 (dK, dV). Block = (key tile of BK keys, kv head,
 * sequence); it walks every query head that reads this kv head and every
 * query t >= the tile's first key:
 *   p = e^(scale q_t.k_u - lse_t) (u <= t);  dv_u += p dO_t;
 *   ds = p (dO_t.v_u - D_t);  dk_u += ds q_t;
 *   dk_u (global) += scale dk_u;  dv_u (global) += dv_u.
 * The kv head's own loop sums its query heads: no atomics.
 * ------------------------------------------------------------------------- */
template <typename T, int HD>
__global__ void __launch_bounds__(256)
attention_backward_dkv_tiled(T *dk, T *dv, const float *dbuf, const T *dout,
                             const T *q, const T *k, const T *v,
                             const float *lse, struct attn_shape sh) {
  typedef tiled_cfg<HD> C;
  __shared__ float sq[C::BQ * HD], sdo[C::BQ * HD];
  __shared__ float slse[C::BQ], sd[C::BQ];
  int tile = blockIdx.x, kvh = blockIdx.y, seq = blockIdx.z;
  long tok0 = (long)seq * sh.seq_len;
  int grp = threadIdx.x / C::LPR, l = threadIdx.x % C::LPR;
  int key0 = tile * C::BK;

  float kr[C::RK][C::EPL], vr[C::RK][C::EPL], dkr[C::RK][C::EPL],
      dvr[C::RK][C::EPL];
#pragma unroll
  for (int j = 0; j < C::RK; j++) {
    int u = key0 + grp + j * C::GROUPS;
    load_row<T, HD>(kr[j], k + tok0 * sh.ldkv, sh.ldkv, kvh, u, sh.seq_len, l);
    load_row<T, HD>(vr[j], v + tok0 * sh.ldkv, sh.ldkv, kvh, u, sh.seq_len, l);
#pragma unroll
    for (int e = 0; e < C::EPL; e++)
      dkr[j][e] = dvr[j][e] = 0.0f;
  }
  /* Local query heads reading kv head kvh: (q_begin + h)/group == kv. */
  int kv_global = kvh + sh.map.kv_begin;
  int h_begin = max(0, kv_global * sh.map.group - sh.map.q_begin);
  int h_end = min(sh.nq, (kv_global + 1) * sh.map.group - sh.map.q_begin);
  for (int h = h_begin; h < h_end; h++) {
    for (int t0 = key0 / C::BQ * C::BQ; t0 < sh.seq_len; t0 += C::BQ) {
      __syncthreads();
      load_tile<T, HD>(sq, q + tok0 * sh.ldq, sh.ldq, h, t0, C::BQ, sh.seq_len);
      load_tile<T, HD>(sdo, dout + tok0 * sh.ldq, sh.ldq, h, t0, C::BQ,
                       sh.seq_len);
      for (int r = threadIdx.x; r < C::BQ; r += blockDim.x) {
        bool in = t0 + r < sh.seq_len;
        slse[r] = in ? lse[(tok0 + t0 + r) * sh.nq + h] : 0.0f;
        sd[r] = in ? dbuf[(tok0 + t0 + r) * sh.nq + h] : 0.0f;
      }
      __syncthreads();
      int tcount = min(C::BQ, sh.seq_len - t0);
      for (int tt = 0; tt < tcount; tt++) {
        float qv[C::EPL], dov[C::EPL];
        tile_row<HD>(qv, dov, sq, sdo, tt, l);
#pragma unroll
        for (int j = 0; j < C::RK; j++) {
          float sdot = 0.0f, pdot = 0.0f;
#pragma unroll
          for (int e = 0; e < C::EPL; e++) {
            sdot += qv[e] * kr[j][e];
            pdot += dov[e] * vr[j][e];
          }
          float s = sh.scale * group_sum<C::LPR>(sdot);
          float dp = group_sum<C::LPR>(pdot);
          int u = key0 + grp + j * C::GROUPS;
          if (u > t0 + tt || u >= sh.seq_len)
            continue;
          float p = expf(s - slse[tt]);
          float ds = p * (dp - sd[tt]);
#pragma unroll
          for (int e = 0; e < C::EPL; e++) {
            dvr[j][e] += p * dov[e];
            dkr[j][e] += ds * qv[e];
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < C::RK; j++) {
    int u = key0 + grp + j * C::GROUPS;
    if (u >= sh.seq_len)
      continue;
    long at = (tok0 + u) * sh.ldkv + (long)kvh * HD;
    add_row<T, HD>(dk + at, dkr[j], sh.scale, l);
    add_row<T, HD>(dv + at, dvr[j], 1.0f, l);
  }
}

/* ---------------------------------------------------------------------------
 * Entry points.
 * ------------------------------------------------------------------------- */
/* The process-wide choice; until set, the environment's HEXIC_ATTENTION
 * (tiled | tc | auto) decides, so a run can leave the tensor cores without
 * a rebuild. */
static enum hxc_attention_impl attention_impl = HXC_ATTN_AUTO;
static bool attention_impl_set;

void hxc_attention_set_impl(enum hxc_attention_impl impl) {
  attention_impl = impl;
  attention_impl_set = true;
}

static enum hxc_attention_impl current_impl(void) {
  if (!attention_impl_set) {
    const char *env = getenv("HEXIC_ATTENTION");
    if (env && strcmp(env, "tiled") == 0)
      attention_impl = HXC_ATTN_TILED;
    else if (env && strcmp(env, "tc") == 0)
      attention_impl = HXC_ATTN_TENSOR_CORE;
    attention_impl_set = true;
  }
  return attention_impl;
}

static bool tiled_supports(int hd) {
  return hd == 16 || hd == 32 || hd == 64 || hd == 128;
}

bool hxc_attention_supported(int hd, enum hxc_dtype dt,
                             enum hxc_attention_impl impl) {
  switch (impl) {
  case HXC_ATTN_TILED:
    return tiled_supports(hd);
  case HXC_ATTN_TENSOR_CORE:
    return hxc_attention_tc_supports(hd, dt);
  default:
    return tiled_supports(hd) || hxc_attention_tc_supports(hd, dt);
  }
}

/* The tensor-core kernel moves 16 bytes at a time: every tensor it reads
 * or writes must start on a 16-byte boundary. */
static bool aligned16(const void *const *ptrs, int count) {
  for (int i = 0; i < count; i++)
    if ((uintptr_t)ptrs[i] % 16 != 0)
      return false;
  return true;
}

/* AUTO takes the tensor cores where they apply and the operands are
 * aligned; a forced choice is checked by require_shape. */
static bool use_tensor_cores(int hd, enum hxc_dtype dt, bool aligned) {
  enum hxc_attention_impl impl = current_impl();
  if (impl == HXC_ATTN_TILED)
    return false;
  if (impl == HXC_ATTN_TENSOR_CORE)
    return true;
  return aligned && hxc_attention_tc_supports(hd, dt);
}

struct hxc_kv_map hxc_kv_map_of(const struct hxk_dims *d,
                                const struct hxk_shard *s) {
  struct hxc_kv_map map = {s->q_begin, d->heads / d->kv_heads, s->kv_begin};
  return map;
}

/* The tiled kernels' launches for nseq sequences (one chunk: nseq at most
 * hxc_attention_seq_chunk): block = (query or key tile, head, sequence). */
template <int HD>
static struct hxc_launch_dims tiled_forward_launch(int seq_len, int nq,
                                                   long nseq) {
  typedef tiled_cfg<HD> C;
  return launch_dims((unsigned long)(seq_len + C::BR - 1) / C::BR,
                     (unsigned long)nq, (unsigned long)nseq, C::THREADS, 0,
                     false);
}
template <int HD>
static struct hxc_launch_dims tiled_dkv_launch(int seq_len, int nkv,
                                               long nseq) {
  typedef tiled_cfg<HD> C;
  return launch_dims((unsigned long)(seq_len + C::BK - 1) / C::BK,
                     (unsigned long)nkv, (unsigned long)nseq, C::THREADS, 0,
                     false);
}

template <typename T, int HD>
static void forward_tiled(void *o, float *lse, const void *q, const void *k,
                          const void *v, const struct attn_shape &sh,
                          long nseq, cudaStream_t stream) {
  struct hxc_launch_dims l = tiled_forward_launch<HD>(sh.seq_len, sh.nq, nseq);
  attention_forward_tiled<T, HD><<<grid_of(l), l.threads, 0, stream>>>(
      (T *)o, lse, (const T *)q, (const T *)k, (const T *)v, sh);
  HXC_LAUNCHED("attention_forward_tiled");
}

template <typename T, int HD>
static void backward_tiled(void *dq, void *dk, void *dv, float *dbuf,
                           const void *dout, const void *q, const void *k,
                           const void *v, const void *o, const float *lse,
                           const struct attn_shape &sh, long nseq,
                           cudaStream_t stream) {
  struct hxc_launch_dims lq = tiled_forward_launch<HD>(sh.seq_len, sh.nq, nseq);
  attention_backward_dq_tiled<T, HD><<<grid_of(lq), lq.threads, 0, stream>>>(
      (T *)dq, dbuf, (const T *)dout, (const T *)q, (const T *)k,
      (const T *)v, (const T *)o, lse, sh);
  HXC_LAUNCHED("attention_backward_dq_tiled");
  struct hxc_launch_dims lk = tiled_dkv_launch<HD>(sh.seq_len, sh.nkv, nseq);
  attention_backward_dkv_tiled<T, HD><<<grid_of(lk), lk.threads, 0, stream>>>(
      (T *)dk, (T *)dv, dbuf, (const T *)dout, (const T *)q, (const T *)k,
      (const T *)v, lse, sh);
  HXC_LAUNCHED("attention_backward_dkv_tiled");
}

/* Calls F<T, HD>(args...) for the runtime head dim and dtype. */
#define TILED_DISPATCH(F, hd, dt, ...)                                        \
  do {                                                                        \
    switch (hd) {                                                             \
    case 16: HXC_DISPATCH(dt, T, F<T, 16>(__VA_ARGS__)); break;               \
    case 32: HXC_DISPATCH(dt, T, F<T, 32>(__VA_ARGS__)); break;               \
    case 64: HXC_DISPATCH(dt, T, F<T, 64>(__VA_ARGS__)); break;               \
    default: HXC_DISPATCH(dt, T, F<T, 128>(__VA_ARGS__)); break;              \
    }                                                                         \
  } while (0)

/* gridDim.z is the sequence of a launch, at most 65535 of them: a larger
 * micro-batch goes in launches over chunks of sequences (pointer offsets:
 * token n = s*T + t, so a chunk's rows are contiguous in every tensor).
 * The heads are gridDim.y: --target=cuda's hidden <= 16384 and head dim >=
 * 16 keep them at most 1024 (codegen/emit_cuda.c). */
#define SEQ_CHUNK_MAX 65535L
static long seq_chunk = SEQ_CHUNK_MAX;

void hxc_attention_set_seq_chunk(long n) {
  seq_chunk = n > 0 && n < SEQ_CHUNK_MAX ? n : SEQ_CHUNK_MAX;
}
long hxc_attention_seq_chunk(void) { return seq_chunk; }

static void require_shape(long nseq, int seq_len, int nq, int nkv, int hd,
                          enum hxc_dtype dt, bool tc, bool aligned) {
  (void)nseq;
  HXC_REQUIRE(nq < 65536 && nkv < 65536,
              "attention: grid limits (heads < 65536)");
  HXC_REQUIRE(seq_len > 0, "attention: seq_len > 0");
  if (tc) {
    HXC_REQUIRE(hxc_attention_tc_supports(hd, dt),
                "attention: the tensor-core kernel takes bf16, hd 64 or 128");
    HXC_REQUIRE(aligned, "attention: tensor-core operands 16-byte aligned");
  } else
    HXC_REQUIRE(tiled_supports(hd), "attention: head dim 16, 32, 64 or 128");
}

void hxc_attention_forward(void *o, float *lse, const void *q, const void *k,
                           const void *v, struct hxc_kv_map map, long nseq,
                           int seq_len, int nq, int nkv, int hd,
                           enum hxc_dtype dt, cudaStream_t stream) {
  if (nseq <= 0 || nq <= 0)
    return;
  const void *ptrs[] = {o, q, k, v};
  bool aligned = aligned16(ptrs, 4);
  bool tc = use_tensor_cores(hd, dt, aligned);
  require_shape(nseq, seq_len, nq, nkv, hd, dt, tc, aligned);
  struct attn_shape sh = attn_shape_of(map, seq_len, nq, nkv, hd);
  size_t es = hxc_dtype_bytes(dt);
  for (long s0 = 0; s0 < nseq; s0 += seq_chunk) {
    long ns = nseq - s0 < seq_chunk ? nseq - s0 : seq_chunk;
    long tok0 = s0 * seq_len;
    void *oc = (char *)o + (size_t)tok0 * sh.ldq * es;
    float *lc = lse + (size_t)tok0 * nq;
    const void *qc = (const char *)q + (size_t)tok0 * sh.ldq * es;
    const void *kc = (const char *)k + (size_t)tok0 * sh.ldkv * es;
    const void *vc = (const char *)v + (size_t)tok0 * sh.ldkv * es;
    if (tc)
      hxc_attention_tc_forward(oc, lc, qc, kc, vc, sh.map, ns, seq_len, nq,
                               nkv, hd, stream);
    else
      TILED_DISPATCH(forward_tiled, hd, dt, oc, lc, qc, kc, vc, sh, ns,
                     stream);
  }
}

void hxc_attention_backward(struct hxc_ctx *ctx, void *dq, void *dk, void *dv,
                            const void *dout, const void *q, const void *k,
                            const void *v, const void *o, const float *lse,
                            struct hxc_kv_map map, long nseq, int seq_len,
                            int nq, int nkv, int hd, enum hxc_dtype dt,
                            cudaStream_t stream) {
  if (nseq <= 0 || nq <= 0)
    return;
  const void *ptrs[] = {dq, dk, dv, dout, q, k, v, o};
  bool aligned = aligned16(ptrs, 8);
  bool tc = use_tensor_cores(hd, dt, aligned);
  require_shape(nseq, seq_len, nq, nkv, hd, dt, tc, aligned);
  struct attn_shape sh = attn_shape_of(map, seq_len, nq, nkv, hd);
  /* Tiled: D_t = dO_t . O_t per token and query head, from pass 1 to pass
   * 2. Tensor cores: D, the fp32 dQ accumulator and its flags, for one
   * chunk of sequences at a time (the chunks run in stream order). */
  long chunk = nseq < seq_chunk ? nseq : seq_chunk;
  size_t need = tc ? hxc_attention_tc_scratch(chunk, seq_len, nq, hd)
                   : (size_t)nseq * seq_len * nq * sizeof(float);
  void *scratch = hxc_ctx_scratch(ctx, need);
  float *dbuf = (float *)scratch;
  size_t es = hxc_dtype_bytes(dt);
  for (long s0 = 0; s0 < nseq; s0 += seq_chunk) {
    long ns = nseq - s0 < seq_chunk ? nseq - s0 : seq_chunk;
    size_t tok0 = (size_t)(s0 * seq_len);
    size_t qo = tok0 * sh.ldq * es, kvo = tok0 * sh.ldkv * es;
    void *dqc = (char *)dq + qo, *dkc = (char *)dk + kvo,
         *dvc = (char *)dv + kvo;
    const void *doc = (const char *)dout + qo, *qc = (const char *)q + qo,
               *kc = (const char *)k + kvo, *vc = (const char *)v + kvo,
               *oc = (const char *)o + qo;
    const float *lc = lse + tok0 * nq;
    float *dc = dbuf + tok0 * nq;
    if (tc)
      hxc_attention_tc_backward(dqc, dkc, dvc, scratch, doc, qc, kc, vc, oc,
                                lc, sh.map, ns, seq_len, nq, nkv, hd, stream);
    else
      TILED_DISPATCH(backward_tiled, hd, dt, dqc, dkc, dvc, dc, doc, qc, kc,
                     vc, oc, lc, sh, ns, stream);
  }
}

/* The most either kernel asks: the tiled D buffer, or the tensor-core
 * scratch at the largest head dim it takes (128: the caller does not say
 * the head dim; hd 64 needs about half) and every sequence in one chunk. */
size_t hxc_attention_backward_scratch(long nseq, int seq_len, int nq) {
  if (nseq <= 0 || seq_len <= 0 || nq <= 0)
    return 0;
  size_t tiled = (size_t)nseq * seq_len * nq * sizeof(float);
  size_t tc = hxc_attention_tc_scratch(nseq, seq_len, nq, 128);
  return tiled > tc ? tiled : tc;
}

template <int HD>
static void tiled_launches(const struct hxc_launch_shapes *s, long ns,
                           hxc_launch_fn fn, void *arg) {
  struct hxc_launch_dims f = tiled_forward_launch<HD>(s->seq_len, s->nq, ns);
  struct hxc_launch_dims k = tiled_dkv_launch<HD>(s->seq_len, s->nkv, ns);
  char name[64];
  snprintf(name, sizeof name, "attention_forward_tiled<%d>", HD);
  fn(arg, name, &f);
  snprintf(name, sizeof name, "attention_backward_dq_tiled<%d>", HD);
  fn(arg, name, &f);
  snprintf(name, sizeof name, "attention_backward_dkv_tiled<%d>", HD);
  fn(arg, name, &k);
}

HXC_LAUNCHES(hxc_attention_launches) {
  long ns = s->nseq < seq_chunk ? s->nseq : seq_chunk;
  switch (s->hd) {
  case 16: tiled_launches<16>(s, ns, fn, arg); break;
  case 32: tiled_launches<32>(s, ns, fn, arg); break;
  case 64: tiled_launches<64>(s, ns, fn, arg); break;
  case 128: tiled_launches<128>(s, ns, fn, arg); break;
  default: break;
  }
}
