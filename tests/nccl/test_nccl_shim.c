/* The NCCL shim (nccl_shim.c) on MPI, host memory, no emulator:
 *   test_nccl_shim ok         (4 ranks) every call's result: init over the
 *                             world and over two of its ranks, user rank and
 *                             count, split (keys reorder, one rank without a
 *                             colour), all-reduce in and out of place,
 *                             broadcast, reduce, a send/receive ring in one
 *                             group, rooted collectives fused in a group (the
 *                             ZeRO-1 pattern), a side stream's op completing
 *                             in the background, errors and abort;
 *   test_nccl_shim order      (2 ranks) AllReduce then Broadcast on rank 0,
 *                             the reverse on rank 1: reported, exit 3;
 *   test_nccl_shim count      (2 ranks) all-reduces of 4 and 8 floats: reported;
 *   test_nccl_shim missing    (2 ranks) rank 1 never calls the collective;
 *   test_nccl_shim unmatched  (2 ranks) a send in a group with no receive.
 * run_shim_tests.sh runs them and checks the reports. */
#include <nccl.h>

#include <mpi.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

uint64_t hx_nccl_shim_mark(cudaStream_t stream);
int hx_nccl_shim_reached(cudaStream_t stream, uint64_t ticket, int wait);

/* One side stream, as the emulator's cudaStreamCreateWithFlags makes them. */
static int side_token;
#define SIDE ((cudaStream_t)&side_token)
int hx_emu_stream_side(cudaStream_t stream) { return stream == SIDE; }

static int rank, size, failures;

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "rank %d: %s:%d: check failed: %s\n", rank, __FILE__, __LINE__, #cond);      \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)
#define NCCL(call) CHECK((call) == ncclSuccess)

static ncclComm_t init_world(void) {
  ncclUniqueId id;
  if (rank == 0)
    NCCL(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t c = NULL;
  NCCL(ncclCommInitRank(&c, size, id, rank));
  return c;
}

static void test_ok(void) {
  ncclComm_t world = init_world();
  int r = -1, n = -1;
  NCCL(ncclCommUserRank(world, &r));
  NCCL(ncclCommCount(world, &n));
  CHECK(r == rank && n == size);

  /* all-reduce: in place (float sum) and out of place (int32 max) */
  float x[5];
  for (int i = 0; i < 5; i++)
    x[i] = (float)(rank + i);
  NCCL(ncclAllReduce(x, x, 5, ncclFloat, ncclSum, world, NULL));
  for (int i = 0; i < 5; i++)
    CHECK(x[i] == (float)(size * (size - 1) / 2 + size * i));
  int32_t a = 10 * rank, m = -1;
  NCCL(ncclAllReduce(&a, &m, 1, ncclInt32, ncclMax, world, NULL));
  CHECK(m == 10 * (size - 1));

  /* broadcast from rank 2, out of place; reduce to rank 1 */
  unsigned char src[3] = {(unsigned char)(7 + rank), 8, 9}, dst[3] = {0, 0, 0};
  NCCL(ncclBroadcast(src, dst, 3, ncclUint8, 2, world, NULL));
  CHECK(dst[0] == 9 && dst[1] == 8 && dst[2] == 9);
  double d = rank + 1.0, sum = -1;
  NCCL(ncclReduce(&d, rank == 1 ? &sum : NULL, 1, ncclDouble, ncclSum, 1, world, NULL));
  if (rank == 1)
    CHECK(sum == size * (size + 1) / 2.0);

  /* split: colour rank % 2, keys reversing the order, rank 3 outside */
  ncclComm_t half = NULL;
  NCCL(ncclCommSplit(world, rank == 3 ? NCCL_SPLIT_NOCOLOR : rank % 2, -rank, &half, NULL));
  if (rank == 3) {
    CHECK(half == NULL);
  } else {
    NCCL(ncclCommUserRank(half, &r));
    NCCL(ncclCommCount(half, &n));
    CHECK(n == (rank % 2 == 0 ? 2 : 1) && r == (rank == 2 ? 0 : rank == 0 ? 1 : 0));
    float h = (float)rank;
    NCCL(ncclAllReduce(&h, &h, 1, ncclFloat, ncclSum, half, NULL));
    CHECK(h == (rank % 2 == 0 ? 2.0f : 1.0f));
  }

  /* a ring of sends and receives in one group (would deadlock without it) */
  int out[64], in[64];
  for (int i = 0; i < 64; i++)
    out[i] = 1000 * rank + i, in[i] = -1;
  NCCL(ncclGroupStart());
  NCCL(ncclSend(out, 64, ncclInt32, (rank + 1) % size, world, NULL));
  NCCL(ncclRecv(in, 64, ncclInt32, (rank + size - 1) % size, world, NULL));
  NCCL(ncclGroupEnd());
  for (int i = 0; i < 64; i++)
    CHECK(in[i] == 1000 * ((rank + size - 1) % size) + i);

  /* ZeRO-1's uneven reduce-scatter and all-gather: one rooted collective per
   * member's block (counts 1, 2, 3, 4), fused in a group */
  float full[10], mine[4];
  long counts[4] = {1, 2, 3, 4};
  for (int i = 0; i < 10; i++)
    full[i] = (float)(i + rank);
  NCCL(ncclGroupStart());
  for (int i = 0, at = 0; i < size; at += (int)counts[i], i++)
    NCCL(ncclReduce(full + at, i == rank ? mine : NULL, (size_t)counts[i], ncclFloat, ncclSum, i,
                    world, NULL));
  NCCL(ncclGroupEnd());
  int first = 0;
  for (int i = 0; i < rank; i++)
    first += (int)counts[i];
  for (int j = 0; j < counts[rank]; j++)
    CHECK(mine[j] == (float)(size * (first + j) + size * (size - 1) / 2));
  for (int j = 0; j < counts[rank]; j++)
    full[first + j] = (float)(100 * rank + j);
  NCCL(ncclGroupStart());
  for (int i = 0, at = 0; i < size; at += (int)counts[i], i++)
    NCCL(ncclBroadcast(full + at, full + at, (size_t)counts[i], ncclFloat, i, world, NULL));
  NCCL(ncclGroupEnd());
  for (int i = 0, at = 0; i < size; at += (int)counts[i], i++)
    for (int j = 0; j < counts[i]; j++)
      CHECK(full[at + j] == (float)(100 * i + j));

  /* a communicator of two ranks, made by its members alone (world 1 makes
   * the id, world 3 joins) */
  if (rank == 1 || rank == 3) {
    ncclUniqueId id;
    if (rank == 1) {
      NCCL(ncclGetUniqueId(&id));
      MPI_Send(&id, sizeof id, MPI_BYTE, 3, 5, MPI_COMM_WORLD);
    } else {
      MPI_Recv(&id, sizeof id, MPI_BYTE, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    ncclComm_t pair = NULL;
    NCCL(ncclCommInitRank(&pair, 2, id, rank == 1 ? 0 : 1));
    float p = (float)rank;
    NCCL(ncclAllReduce(&p, &p, 1, ncclFloat, ncclSum, pair, NULL));
    CHECK(p == 4.0f);
    NCCL(ncclCommDestroy(pair));
  }

  /* a side stream's all-reduce runs in the background: the even rank of each
   * pair starts it, then receives from the odd one, which sends first and
   * joins the all-reduce after (one at the call would deadlock here) */
  ncclComm_t duo = NULL;
  NCCL(ncclCommSplit(world, rank / 2, rank, &duo, NULL));
  float g[3] = {1.0f * rank, 2, 3};
  int msg = 0;
  if (rank % 2 == 0) {
    NCCL(ncclAllReduce(g, g, 3, ncclFloat, ncclSum, duo, SIDE));
    uint64_t t = hx_nccl_shim_mark(SIDE);
    NCCL(ncclRecv(&msg, 1, ncclInt32, 1, duo, NULL));
    CHECK(msg == 42);
    hx_nccl_shim_reached(SIDE, t, 1);
  } else {
    msg = 42;
    NCCL(ncclSend(&msg, 1, ncclInt32, 0, duo, NULL));
    NCCL(ncclAllReduce(g, g, 3, ncclFloat, ncclSum, duo, SIDE));
    CHECK(hx_nccl_shim_reached(SIDE, hx_nccl_shim_mark(SIDE), 1) == 1);
  }
  CHECK(g[0] == (float)(2 * (rank / 2) * 2 + 1) && g[1] == 4.0f && g[2] == 6.0f);

  /* errors, abort, destroy */
  ncclResult_t async = ncclInternalError;
  NCCL(ncclCommGetAsyncError(world, &async));
  CHECK(async == ncclSuccess);
  CHECK(strlen(ncclGetErrorString(ncclInvalidArgument)) > 0);
  NCCL(ncclCommAbort(duo));
  if (half)
    NCCL(ncclCommDestroy(half));
  NCCL(ncclCommDestroy(world));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const char *mode = argc > 1 ? argv[1] : "ok";
  if (strcmp(mode, "ok") == 0) {
    if (size != 4) {
      fprintf(stderr, "test_nccl_shim ok: run it on 4 ranks\n");
      return 2;
    }
    test_ok();
  } else {
    ncclComm_t world = init_world();
    float x[8] = {0};
    if (strcmp(mode, "order") == 0) {
      if (rank == 0) {
        ncclAllReduce(x, x, 4, ncclFloat, ncclSum, world, NULL);
        ncclBroadcast(x, x, 4, ncclFloat, 0, world, NULL);
      } else {
        ncclBroadcast(x, x, 4, ncclFloat, 0, world, NULL);
        ncclAllReduce(x, x, 4, ncclFloat, ncclSum, world, NULL);
      }
    } else if (strcmp(mode, "count") == 0) {
      ncclAllReduce(x, x, rank == 0 ? 4 : 8, ncclFloat, ncclSum, world, NULL);
    } else if (strcmp(mode, "missing") == 0) {
      if (rank == 0)
        ncclAllReduce(x, x, 4, ncclFloat, ncclSum, world, NULL);
      else
        sleep(30); /* mpirun ends it when rank 0 fails */
    } else if (strcmp(mode, "unmatched") == 0) {
      ncclGroupStart();
      if (rank == 0)
        ncclSend(x, 8, ncclFloat, 1, world, NULL);
      ncclGroupEnd();
      if (rank == 1)
        sleep(30);
    } else {
      fprintf(stderr, "test_nccl_shim: unknown mode '%s'\n", mode);
      return 2;
    }
    fprintf(stderr, "rank %d: the shim did not report the %s case\n", rank, mode);
    MPI_Finalize();
    return 1;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0 && failures == 0)
    printf("test_nccl_shim ok: every call as NCCL's (%d ranks)\n", size);
  MPI_Finalize();
  return failures ? 1 : 0;
}
