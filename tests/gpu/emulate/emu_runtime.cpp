/* The emulated device of cuda_emu.h: the block scheduler (coroutines), the
 * warp-collective operations, and the CUDA runtime and cuBLASLt entry points
 * kernels/cuda/ and tests/gpu/check_kernels.cu call, on host memory.
 *
 * cublasLtMatmul is written here from the cuBLASLt documentation's
 * definition (column-major, D = alpha op(A) op(B) + beta C, C not read when
 * beta is 0), independently of kernels/cuda/linear.cu, so the row-major to
 * column-major mapping there is checked, not copied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <deque>
#include <vector>

/* A coroutine switch for x86-64 (what swapcontext does, without its
 * signal-mask system call and without the floating-point control words,
 * which no emulated thread changes): saves the callee-saved registers on
 * the current stack, stores the stack pointer in *from and resumes the
 * stack `to`. */
extern "C" void emu_switch(void **from, void *to);
asm(R"(
  .text
  .globl emu_switch
  .type emu_switch, @function
emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size emu_switch, .-emu_switch
)");

namespace emu {

thread_state *current;

namespace {

struct barrier {
  int arrived = 0, expected = 0;
  unsigned generation = 0;
};

/* What the lanes of one warp exchange in a collective. Each warp has two
 * sets used in turn, so one barrier per collective suffices: no lane can
 * write a set again before every lane has read it (that needs the next
 * collective's barrier, which waits for every lane). */
struct warp_slots {
  int kind[32]; /* which collective each lane is in: they must agree */
  float f[32];
  double d[32];
  uint32_t a[32][4], b[32][2];
  float c[32][4];
  const void *addr[32];
  unsigned computed; /* mma: generation whose D is in c (done once) */
};
enum { SHFL_F = 1, SHFL_D, MMA, LDMATRIX };

/* One cp.async in flight: its destination and the source's bytes as read
 * at issue (zero-filled past src_bytes). */
struct async_copy {
  void *dst;
  int bytes;
  unsigned char data[16];
};
typedef std::vector<async_copy> copy_group;

struct coro {
  void *sp; /* saved stack pointer while switched out */
  thread_state state;
  bool done;
  const barrier *wait; /* the barrier it waits on, and that barrier's */
  unsigned wait_gen;   /* generation when it arrived */
  int phase;           /* which of its warp's two slot sets is next */
  copy_group uncommitted;       /* cp.async since the last commit_group */
  std::deque<copy_group> groups; /* committed, oldest first */
};

const size_t STACK_BYTES = 256 * 1024;

void *scheduler_sp;
std::vector<coro> threads;
std::vector<char> stacks;
std::vector<barrier> warp_barriers;
std::vector<warp_slots> slots;
std::vector<unsigned char> shared_dynamic;
barrier block_bar;
coro *running;
const std::function<void()> *body;

int linear_tid() { return current->linear; }

bool runnable(const coro &t) {
  return !t.done && (t.wait == NULL || t.wait->generation != t.wait_gen);
}

/* Switches from the running thread to the next runnable one after it (in
 * thread order, wrapping), or back to the scheduler when none is: then the
 * block is finished, or deadlocked. */
void switch_to_next() {
  coro *from = running;
  size_t n = threads.size(), at = (size_t)(from - threads.data());
  for (size_t step = 1; step <= n; step++) {
    coro &t = threads[(at + step) % n];
    if (&t != from && runnable(t)) {
      running = &t;
      current = &t.state;
      emu_switch(&from->sp, t.sp);
      return;
    }
  }
  emu_switch(&from->sp, scheduler_sp);
}

/* Waits until every expected thread arrived (the last one releases). */
void arrive(barrier &b) {
  unsigned gen = b.generation;
  if (++b.arrived >= b.expected) {
    b.arrived = 0;
    b.generation++;
    return;
  }
  running->wait = &b;
  running->wait_gen = gen;
  while (b.generation == gen)
    switch_to_next();
  running->wait = NULL;
}

[[noreturn]] void thread_entry() {
  (*body)();
  running->done = true;
  /* An exited thread no longer holds up __syncthreads (as on the GPU). */
  block_bar.expected--;
  if (block_bar.arrived > 0 && block_bar.arrived >= block_bar.expected) {
    block_bar.arrived = 0;
    block_bar.generation++;
  }
  switch_to_next(); /* never resumed */
  abort();
}

/* A fresh stack that "returns" into thread_entry on its first switch: six
 * callee-saved registers, then the return address (at top - 16, so that
 * thread_entry starts with the stack of a function just called). */
void *initial_stack(char *base, size_t bytes) {
  uintptr_t top = ((uintptr_t)(base + bytes)) & ~(uintptr_t)15;
  void **ret = (void **)(top - 16);
  *ret = (void *)thread_entry;
  uint64_t *regs = (uint64_t *)ret - 6;
  memset(regs, 0, 6 * sizeof *regs);
  return regs;
}

[[noreturn]] void deadlock(const dim3 &blk) {
  fprintf(stderr,
          "emulator: deadlock in block (%u,%u,%u): a __syncthreads or a warp "
          "collective that not every thread reaches\n",
          blk.x, blk.y, blk.z);
  for (size_t i = 0; i < threads.size(); i++)
    if (!threads[i].done)
      fprintf(stderr, "  thread %zu waiting at a %s barrier\n", i,
              threads[i].wait == &block_bar ? "block" : "warp");
  exit(4);
}

void run_block(dim3 grid, dim3 block, dim3 blk) {
  int n = (int)(block.x * block.y * block.z);
  int nwarps = (n + 31) / 32;
  threads.assign((size_t)n, coro{});
  if (stacks.size() < (size_t)n * STACK_BYTES)
    stacks.resize((size_t)n * STACK_BYTES);
  warp_barriers.assign((size_t)nwarps, barrier{});
  for (int w = 0; w < nwarps; w++)
    warp_barriers[(size_t)w].expected = n - 32 * w < 32 ? n - 32 * w : 32;
  slots.assign((size_t)nwarps * 2, warp_slots{});
  block_bar = barrier{};
  block_bar.expected = n;
  /* Dynamic shared memory starts as NaN bytes: reading before writing shows. */
  memset(shared_dynamic.data(), 0xff, shared_dynamic.size());
  for (int i = 0; i < n; i++) {
    coro &t = threads[(size_t)i];
    t.state.thread_idx = make_uint3(i % block.x, (i / block.x) % block.y,
                                    i / (block.x * block.y));
    t.state.block_idx = make_uint3(blk.x, blk.y, blk.z);
    t.state.block_dim = block;
    t.state.grid_dim = grid;
    t.state.linear = i;
    t.sp = initial_stack(stacks.data() + (size_t)i * STACK_BYTES, STACK_BYTES);
  }
  running = &threads[0];
  current = &threads[0].state;
  emu_switch(&scheduler_sp, threads[0].sp);
  for (const auto &t : threads)
    if (!t.done)
      deadlock(blk);
}

} /* namespace */

void run_grid(dim3 grid, dim3 block, size_t smem,
              const std::function<void()> &fn) {
  unsigned long threads = (unsigned long)block.x * block.y * block.z;
  if (grid.x < 1 || grid.x > 2147483647u || grid.y < 1 || grid.y > 65535 ||
      grid.z < 1 || grid.z > 65535 || threads < 1 || threads > 1024) {
    fprintf(stderr,
            "emulator: launch of grid (%u, %u, %u) x block (%u, %u, %u): past "
            "the hardware's limits (grid x < 2^31, y, z <= 65535; 1024 "
            "threads a block)\n",
            grid.x, grid.y, grid.z, block.x, block.y, block.z);
    abort();
  }
  body = &fn;
  shared_dynamic.assign(smem, 0xff);
  for (unsigned z = 0; z < grid.z; z++)
    for (unsigned y = 0; y < grid.y; y++)
      for (unsigned x = 0; x < grid.x; x++)
        run_block(grid, block, dim3(x, y, z));
  current = NULL;
}

void block_barrier() { arrive(block_bar); }

void *dynamic_smem() { return shared_dynamic.data(); }

/* HEXIC_EMU_FREEZE_AFTER: the kernel after whose first launch the device's
 * memory is fixed; frozen_by names it once it ran. */
static const char *frozen_by;

void launched(const char *name) {
  const char *after = getenv("HEXIC_EMU_FREEZE_AFTER");
  if (!frozen_by && after && strcmp(after, name) == 0)
    frozen_by = name;
}

static void check_not_frozen(const char *call, size_t bytes) {
  if (!frozen_by)
    return;
  fprintf(stderr,
          "emulator: %s (%zu bytes) after the first launch of %s "
          "(HEXIC_EMU_FREEZE_AFTER): device memory is allocated at start, "
          "never in a step\n",
          call, bytes, frozen_by);
  fflush(stderr);
  abort();
}

float atomic_add(float *p, float v) {
  float old = *p; /* one OS thread, no switch inside: atomic */
  *p = old + v;
  return old;
}
int atomic_add(int *p, int v) {
  int old = *p;
  *p = old + v;
  return old;
}
unsigned long long atomic_add(unsigned long long *p, unsigned long long v) {
  unsigned long long old = *p;
  *p = old + v;
  return old;
}

void cp_async(void *dst, const void *src, int bytes, int src_bytes) {
  bool size_ok = bytes == 4 || bytes == 8 || bytes == 16;
  if (!size_ok || src_bytes < 0 || src_bytes > bytes ||
      (uintptr_t)dst % (uintptr_t)bytes != 0 ||
      (src_bytes > 0 && (uintptr_t)src % (uintptr_t)bytes != 0)) {
    fprintf(stderr, "emulator: cp.async of %d bytes (%d from the source) "
                    "with dst %p, src %p: size 4, 8 or 16, both aligned to it\n",
            bytes, src_bytes, dst, src);
    exit(4);
  }
  async_copy c;
  c.dst = dst;
  c.bytes = bytes;
  memset(c.data, 0, sizeof c.data);
  if (src_bytes > 0)
    memcpy(c.data, src, (size_t)src_bytes);
  memset(dst, 0xff, (size_t)bytes); /* in flight: not yet the source's */
  running->uncommitted.push_back(c);
}

void cp_async_commit() {
  running->groups.push_back(running->uncommitted);
  running->uncommitted.clear();
}

/* cp.async.wait_group N: every committed group but the newest N is done. */
void cp_async_wait(int newest_pending) {
  std::deque<copy_group> &g = running->groups;
  while ((int)g.size() > newest_pending) {
    for (const async_copy &c : g.front())
      memcpy(c.dst, c.data, (size_t)c.bytes);
    g.pop_front();
  }
}

void wait_flag(const int *flag, int value) {
  if (*flag != value) {
    fprintf(stderr,
            "emulator: block (%u,%u,%u) waits for a flag to hold %d, it holds "
            "%d: no earlier block sets it (on the GPU: a hang)\n",
            current->block_idx.x, current->block_idx.y, current->block_idx.z,
            value, *flag);
    exit(4);
  }
}

namespace {

/* A lane's side of a warp collective: its slot set, written before the
 * barrier, read after it. */
struct collective {
  warp_slots *s;
  barrier *bar;
  int lane;
};

collective enter(int kind) {
  int tid = linear_tid();
  collective c = {&slots[(size_t)(tid >> 5) * 2 + (size_t)running->phase],
                  &warp_barriers[(size_t)(tid >> 5)], tid & 31};
  running->phase ^= 1;
  c.s->kind[c.lane] = kind;
  return c;
}

/* After the barrier: every lane of the warp must be in the same collective
 * (as on the GPU, where anything else is undefined). */
void check_same(const collective &c) {
  int kind = c.s->kind[c.lane];
  for (int l = 0; l < c.bar->expected; l++)
    if (c.s->kind[l] != kind) {
      fprintf(stderr, "emulator: lanes %d and %d of a warp are in different "
                      "warp collectives\n", c.lane, l);
      exit(4);
    }
}

} /* namespace */

float shfl_xor(float x, int lane_mask) {
  collective c = enter(SHFL_F);
  c.s->f[c.lane] = x;
  arrive(*c.bar);
  check_same(c);
  return c.s->f[c.lane ^ lane_mask];
}
double shfl_xor(double x, int lane_mask) {
  collective c = enter(SHFL_D);
  c.s->d[c.lane] = x;
  arrive(*c.bar);
  check_same(c);
  return c.s->d[c.lane ^ lane_mask];
}

namespace {

float lo_half(uint32_t r) {
  __nv_bfloat16_raw raw;
  raw.x = (unsigned short)(r & 0xffffu);
  return __bfloat162float(__nv_bfloat16(raw));
}
float hi_half(uint32_t r) {
  __nv_bfloat16_raw raw;
  raw.x = (unsigned short)(r >> 16);
  return __bfloat162float(__nv_bfloat16(raw));
}

/* mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, with the fragment
 * layouts of the PTX ISA (g = lane/4, c = lane%4):
 *   A (16x16): a0 = (g, 2c..2c+1), a1 = (g+8, 2c..), a2 = (g, 2c+8..),
 *              a3 = (g+8, 2c+8..)
 *   B (16x8):  b0 = (2c..2c+1, g), b1 = (2c+8..2c+9, g)
 *   C/D (16x8): c0 = (g, 2c), c1 = (g, 2c+1), c2 = (g+8, 2c), c3 = (g+8, 2c+1)
 * a register's low half is the element with the lower index. */
void mma_all_lanes(warp_slots &s) {
  float A[16][16], B[16][8];
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, c = l & 3;
    const int rows[4] = {g, g + 8, g, g + 8};
    const int cols[4] = {2 * c, 2 * c, 2 * c + 8, 2 * c + 8};
    for (int i = 0; i < 4; i++) {
      A[rows[i]][cols[i]] = lo_half(s.a[l][i]);
      A[rows[i]][cols[i] + 1] = hi_half(s.a[l][i]);
    }
    B[2 * c][g] = lo_half(s.b[l][0]);
    B[2 * c + 1][g] = hi_half(s.b[l][0]);
    B[2 * c + 8][g] = lo_half(s.b[l][1]);
    B[2 * c + 9][g] = hi_half(s.b[l][1]);
  }
  for (int l = 0; l < 32; l++) {
    int g = l >> 2, c = l & 3;
    const int rows[4] = {g, g, g + 8, g + 8};
    const int cols[4] = {2 * c, 2 * c + 1, 2 * c, 2 * c + 1};
    for (int i = 0; i < 4; i++) {
      float sum = s.c[l][i];
      for (int k = 0; k < 16; k++)
        sum += A[rows[i]][k] * B[k][cols[i]];
      s.c[l][i] = sum;
    }
  }
}

} /* namespace */

void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
               uint32_t b1) {
  collective c = enter(MMA);
  warp_slots &s = *c.s;
  memcpy(s.a[c.lane], a, sizeof a);
  memcpy(s.c[c.lane], d, sizeof d);
  s.b[c.lane][0] = b0;
  s.b[c.lane][1] = b1;
  arrive(*c.bar);
  check_same(c);
  if (s.computed != c.bar->generation) { /* the first lane out does all 32 */
    mma_all_lanes(s);
    s.computed = c.bar->generation;
  }
  memcpy(d, s.c[c.lane], sizeof d);
}

/* ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16: lanes 8i..8i+7 give the
 * addresses of rows 0..7 of matrix i (8 contiguous b16 each); with .trans
 * lane (g, c) receives in r[i] the elements (2c, g) and (2c+1, g) of
 * matrix i, the lower row in the low half. */
/* ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans): lane (g, c)
 * receives in r[i] the elements (g, 2c) and (g, 2c+1) of matrix i. */
/* The warp's 32 row addresses of one ldmatrix, every lane's in col.s->addr
 * once all have arrived (both forms share it). */
static collective ldmatrix_rows(const void *row_addr) {
  if ((uintptr_t)row_addr % 16 != 0) {
    fprintf(stderr, "emulator: ldmatrix row address not 16-byte aligned\n");
    exit(4);
  }
  collective col = enter(LDMATRIX);
  col.s->addr[col.lane] = row_addr;
  arrive(*col.bar);
  check_same(col);
  return col;
}

void ldmatrix_x4(uint32_t (&r)[4], const void *row_addr) {
  collective col = ldmatrix_rows(row_addr);
  int g = col.lane >> 2, c = col.lane & 3;
  for (int i = 0; i < 4; i++) {
    const uint16_t *row = (const uint16_t *)col.s->addr[8 * i + g];
    r[i] = (uint32_t)row[2 * c] | ((uint32_t)row[2 * c + 1] << 16);
  }
}

void ldmatrix_x4_trans(uint32_t (&r)[4], const void *row_addr) {
  collective col = ldmatrix_rows(row_addr);
  int g = col.lane >> 2, c = col.lane & 3;
  for (int i = 0; i < 4; i++) {
    const uint16_t *row0 = (const uint16_t *)col.s->addr[8 * i + 2 * c];
    const uint16_t *row1 = (const uint16_t *)col.s->addr[8 * i + 2 * c + 1];
    r[i] = (uint32_t)row0[g] | ((uint32_t)row1[g] << 16);
  }
}

} /* namespace emu */

/* ---- the CUDA runtime, on host memory ------------------------------------ */
extern "C" {

cudaError_t cudaGetDeviceCount(int *count) {
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
  (void)device;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "host emulation (tests/gpu/emulate)");
  prop->major = 8;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int *device) {
  *device = 0;
  return cudaSuccess;
}

/* Fresh memory is NaN bytes, so a kernel reading what nobody wrote shows. */
cudaError_t cudaMalloc(void **p, size_t bytes) {
  emu::check_not_frozen("cudaMalloc", bytes);
  *p = aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!*p)
    return cudaErrorMemoryAllocation;
  memset(*p, 0xff, bytes);
  return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
  if (p)
    emu::check_not_frozen("cudaFree", 0);
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes,
                       enum cudaMemcpyKind kind) {
  (void)kind;
  memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                            enum cudaMemcpyKind kind, cudaStream_t stream) {
  (void)stream;
  return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) {
  memset(p, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes,
                            cudaStream_t stream) {
  (void)stream;
  return cudaMemset(p, value, bytes);
}

cudaError_t cudaDeviceSynchronize(void) {
  emu::check_not_frozen("cudaDeviceSynchronize", 0);
  return cudaSuccess;
}
cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr,
                                 int value) {
  (void)func, (void)attr, (void)value;
  return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t error) {
  return error == cudaSuccess ? "no error" : "emulated error";
}
const char *cudaGetErrorName(cudaError_t error) {
  return error == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated";
}

/* ---- cuBLASLt, from its documented semantics ---------------------------- */
struct emu_desc {
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};
struct emu_layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = (cublasLtHandle_t)malloc(1);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  free(handle);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  emu_desc *d = new emu_desc;
  d->compute = compute;
  d->scale = scale;
  *desc = (cublasLtMatmulDesc_t)d;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size) {
  emu_desc *d = (emu_desc *)desc;
  if (size != sizeof(int32_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_DESC_TRANSA)
    memcpy(&d->trans_a, buf, size);
  else if (attr == CUBLASLT_MATMUL_DESC_TRANSB)
    memcpy(&d->trans_b, buf, size);
  else
    return CUBLAS_STATUS_NOT_SUPPORTED;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete (emu_desc *)desc;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (ld < (int64_t)rows)
    return CUBLAS_STATUS_INVALID_VALUE; /* column-major: ld >= rows */
  *layout = (cublasLtMatrixLayout_t) new emu_layout{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete (emu_layout *)layout;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  *pref = (cublasLtMatmulPreference_t)malloc(1);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    const void *buf, size_t size) {
  (void)pref, (void)attr, (void)buf, (void)size;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  free(pref);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
    cublasLtMatmulPreference_t pref, int requested,
    cublasLtMatmulHeuristicResult_t results[], int *found) {
  (void)handle, (void)op, (void)a, (void)b, (void)c, (void)d, (void)pref;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  memset(&results[0], 0, sizeof results[0]);
  results[0].state = CUBLAS_STATUS_SUCCESS;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static double element(const void *base, cudaDataType t, int64_t i) {
  if (t == CUDA_R_16BF)
    return __bfloat162float(((const __nv_bfloat16 *)base)[i]);
  return ((const float *)base)[i];
}

static void store(void *base, cudaDataType t, int64_t i, double v) {
  if (t == CUDA_R_16BF)
    ((__nv_bfloat16 *)base)[i] = __float2bfloat16_rn((float)v);
  else
    ((float *)base)[i] = (float)v;
}

/* op(X)[i][p] of a column-major stored matrix. */
static double op_at(const void *x, const emu_layout *l, bool trans, int64_t i,
                    int64_t p) {
  return trans ? element(x, l->type, p + i * l->ld)
               : element(x, l->type, i + p * l->ld);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t op,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cdesc,
                              void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream) {
  (void)handle, (void)algo, (void)workspace, (void)workspace_bytes, (void)stream;
  const emu_desc *o = (const emu_desc *)op;
  const emu_layout *la = (const emu_layout *)Adesc, *lb = (const emu_layout *)Bdesc;
  const emu_layout *lc = (const emu_layout *)Cdesc, *ld = (const emu_layout *)Ddesc;
  bool ta = o->trans_a == CUBLAS_OP_T, tb = o->trans_b == CUBLAS_OP_T;
  int64_t m = (int64_t)lc->rows, n = (int64_t)lc->cols;
  int64_t k = (int64_t)(ta ? la->rows : la->cols);
  bool shapes_agree = (int64_t)(ta ? la->cols : la->rows) == m &&
                      (int64_t)(tb ? lb->cols : lb->rows) == k &&
                      (int64_t)(tb ? lb->rows : lb->cols) == n &&
                      ld->rows == lc->rows && ld->cols == lc->cols;
  if (!shapes_agree || o->compute != CUBLAS_COMPUTE_32F ||
      o->scale != CUDA_R_32F || la->type != lb->type)
    return CUBLAS_STATUS_INVALID_VALUE;
  float al = *(const float *)alpha, be = *(const float *)beta;
  std::vector<double> out((size_t)(m * n));
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++) {
      double sum = 0.0;
      for (int64_t p = 0; p < k; p++)
        sum += op_at(A, la, ta, i, p) * op_at(B, lb, tb, p, j);
      double acc = al * sum;
      if (be != 0.0f) /* beta 0: C is not read (it may hold NaN) */
        acc += be * element(C, lc->type, i + j * lc->ld);
      out[(size_t)(i + j * m)] = acc;
    }
  for (int64_t j = 0; j < n; j++)
    for (int64_t i = 0; i < m; i++)
      store(D, ld->type, i + j * ld->ld, out[(size_t)(i + j * m)]);
  return CUBLAS_STATUS_SUCCESS;
}

} /* extern "C" */
