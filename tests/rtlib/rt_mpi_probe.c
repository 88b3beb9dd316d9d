/* A stand-in for a generated rank program, driven by the mpirun tests:
 *   world SELF|N PLAN_RANKS FINGERPRINT   the launch check (N: claim rank N)
 *   hang                                  rank 1 stops answering mid-run
 *   die                                   rank 1 exits mid-run
 *   chain                                 4 ranks: a stall traced to rank 3
 *   transport_fault                       rank 1's transport fault hook fires
 *   wait_until                            a wait on a condition, traced to rank 1
 *   ckpt DIR                              collective save / resume
 * It uses only the rtlib API a generated program uses. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rtlib/rt_ckpt.h"
#include "rtlib/rt_init.h"

static int run_world(int argc, char **argv) {
  if (argc != 5)
    return 2;
  int compiled = !strcmp(argv[2], "self") ? hx_rt_rank() : atoi(argv[2]);
  hx_rt_check_world(compiled, atoi(argv[3]), argv[4]);
  if (hx_rt_rank() == 0)
    hx_rt_log_banner("world ok: %d ranks", hx_rt_world_size());
  return 0;
}

/* Ping-pong between ranks 0 and 1 for `rounds` rounds, marking progress as
 * a generated program does after each completed operation. */
static void ping_pong(int rounds) {
  int peer = 1 - hx_rt_rank(), token = 0;
  for (int i = 0; i < rounds; i++) {
    if (hx_rt_rank() == 0) {
      hx_rt_mpi_check(MPI_Send(&token, 1, MPI_INT, peer, 0, MPI_COMM_WORLD), "MPI_Send");
      hx_rt_mpi_check(MPI_Recv(&token, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
    } else {
      hx_rt_mpi_check(MPI_Recv(&token, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
      token++;
      hx_rt_mpi_check(MPI_Send(&token, 1, MPI_INT, peer, 0, MPI_COMM_WORLD), "MPI_Send");
    }
    hx_rt_progress();
  }
}

/* Rank 1 fails after some healthy rounds: it hangs without answering (its
 * own watchdog switched off, so only rank 0's can end the job) or dies. */
static int run_fault(bool die) {
  if (hx_rt_world_size() != 2)
    return 2;
  ping_pong(50);
  if (hx_rt_rank() == 1) {
    if (die) {
      fprintf(stderr, "probe: rank 1 exits mid-run\n");
      _exit(9);
    }
    fprintf(stderr, "probe: rank 1 stops answering\n");
    hx_rt_watchdog_stop();
    sleep(120);
    return 0;
  }
  ping_pong(1); /* never completes */
  fprintf(stderr, "probe: rank 0 finished a round that should never end\n");
  return 0;
}

/* A chain of waits ending at a rank that stopped (issue 10, item 11): rank
 * 3 stops answering; rank 2 waits to receive from it; ranks 1 and 2 meet in
 * an all-reduce that rank 2 never joins; rank 0 waits to receive from rank
 * 1. Rank 0 starts waiting first, so its wait times out first, yet the
 * report must name rank 3, found through rank 1's collective and rank 2's
 * receive. */
static int run_chain(void) {
  if (hx_rt_world_size() != 4)
    return 2;
  int rank = hx_rt_rank(), token = 0;
  MPI_Comm pair;
  MPI_Comm_split(MPI_COMM_WORLD, rank == 1 || rank == 2 ? 0 : MPI_UNDEFINED, rank, &pair);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 3) {
    fprintf(stderr, "probe: rank 3 stops answering\n");
    hx_rt_watchdog_stop();
    sleep(120);
    return 0;
  }
  usleep(500000 * (unsigned)rank); /* rank 0 waits longest (and less than HEXIC_TIMEOUT_S) */
  hx_rt_progress();
  MPI_Request req;
  const int members[2] = {1, 2};
  struct hx_rt_wait w = {"probe receive", rank, rank + 1, 0, NULL};
  if (rank == 1) {
    w = (struct hx_rt_wait){"probe all-reduce", -1, -1, 2, members};
    MPI_Iallreduce(MPI_IN_PLACE, &token, 1, MPI_INT, MPI_SUM, pair, &req);
  } else {
    MPI_Irecv(&token, 1, MPI_INT, rank + 1, 0, MPI_COMM_WORLD, &req);
  }
  hx_rt_wait_all(1, &req, &w);
  fprintf(stderr, "probe: rank %d finished a wait that should never end\n", rank);
  return 0;
}

/* The fault hooks a transport with errors of its own installs (the NCCL
 * one: ncclCommGetAsyncError, ncclCommAbort), faked: rank 1's check reports
 * a fault a second after it is installed, while rank 1 keeps making
 * progress and rank 0 waits on it; the watchdog thread must print the
 * fault, run the abort hook and end rank 1 (HX_RT_EXIT_MPI), and mpirun the
 * job, long before HEXIC_TIMEOUT_S. */
static _Atomic double g_fault_at;

static bool fake_check(char *msg, size_t size) {
  if (hx_rt_now_s() < atomic_load(&g_fault_at))
    return false;
  snprintf(msg, size, "probe: a fake transport fault");
  return true;
}

static void fake_abort(void) { fprintf(stderr, "probe: rank %d: abort hook ran\n", hx_rt_rank()); }

static int run_transport_fault(void) {
  if (hx_rt_world_size() != 2)
    return 2;
  ping_pong(10);
  if (hx_rt_rank() == 1) {
    atomic_store(&g_fault_at, hx_rt_now_s() + 1.0);
    hx_rt_set_fault_hooks(fake_check, fake_abort);
    for (int i = 0; i < 600; i++) { /* busy, not hung: only the fault can end it */
      usleep(100000);
      hx_rt_progress();
    }
    fprintf(stderr, "probe: rank 1 outlived its transport fault\n");
    return 0;
  }
  ping_pong(1); /* never completes */
  return 0;
}

/* hx_rt_wait_until (a wait on a transport's own condition, NCCL's events)
 * stalls on rank 1, which stops answering: rank 0's report must name rank 1
 * as a wait on MPI requests does, and run the transport's abort hook. */
static bool never(void *arg) {
  (void)arg;
  return false;
}

static int run_wait_until(void) {
  if (hx_rt_world_size() != 2)
    return 2;
  ping_pong(10);
  if (hx_rt_rank() == 1) {
    fprintf(stderr, "probe: rank 1 stops answering\n");
    hx_rt_watchdog_stop();
    sleep(120);
    return 0;
  }
  hx_rt_set_fault_hooks(NULL, fake_abort);
  hx_rt_wait_until(never, NULL, &(struct hx_rt_wait){"probe event", 0, 1, 0, NULL});
  fprintf(stderr, "probe: rank 0 finished a wait that should never end\n");
  return 0;
}

enum { NT = 2 };

static void fill(float (*buf)[3][16], int rank, int64_t step) {
  for (int i = 0; i < NT; i++)
    for (int k = 0; k < 3; k++)
      for (int e = 0; e < 16; e++)
        buf[i][k][e] = (float)(rank * 100 + step) + 0.01f * (float)(i * 48 + k * 16 + e);
}

static void bind(struct hx_rt_ckpt_tensor *t, float (*buf)[3][16], int rank) {
  for (int i = 0; i < NT; i++)
    t[i] = (struct hx_rt_ckpt_tensor){
        .param = buf[i][0], .adam_m = buf[i][1], .adam_v = buf[i][2], .n = 8 + rank + i};
}

static int run_ckpt(const char *dir) {
  int rank = hx_rt_rank();
  const char *fp = "probe-plan";
  float buf[NT][3][16], want[NT][3][16];
  struct hx_rt_ckpt_tensor t[NT];
  bind(t, buf, rank);
  struct hx_rt_ckpt_state st = {.ntensors = NT, .tensors = t, .schedule_steps = 3};
  if (hx_rt_ckpt_resume(MPI_COMM_WORLD, dir, fp, &st) != 0)
    return 3; /* an empty directory: a fresh start */
  for (int64_t step = 1; step <= 3; step++) {
    fill(buf, rank, step);
    st.step = step;
    if (!hx_rt_ckpt_save(MPI_COMM_WORLD, dir, fp, &st))
      return 4;
  }
  /* Damage the newest: every rank must fall back to step 2 together. */
  if (rank == 0) {
    char path[512];
    hx_rt_ckpt_rank_path(path, sizeof path, dir, 3, 1);
    FILE *f = fopen(path, "r+b");
    if (!f || fseek(f, -1, SEEK_END) || fputc('X', f) == EOF || fclose(f))
      return 5;
  }
  MPI_Barrier(MPI_COMM_WORLD);
  memset(buf, 0, sizeof buf);
  st.step = 0;
  int64_t resumed = hx_rt_ckpt_resume(MPI_COMM_WORLD, dir, fp, &st);
  fill(want, rank, 2);
  bool same = true;
  for (int i = 0; i < NT; i++)
    for (int k = 0; k < 3; k++)
      same = same && !memcmp(buf[i][k], want[i][k], sizeof(float) * (size_t)t[i].n);
  if (resumed != 2 || st.step != 2 || !same) {
    fprintf(stderr, "probe: rank %d resumed step %lld, data %s\n", rank, (long long)resumed,
            same ? "same" : "different");
    return 6;
  }
  if (rank == 0)
    hx_rt_log_banner("ckpt ok: resumed step %lld", (long long)resumed);
  return 0;
}

int main(int argc, char **argv) {
  hx_rt_init(&argc, &argv);
  int rc = 2;
  if (argc >= 2 && !strcmp(argv[1], "world"))
    rc = run_world(argc, argv);
  else if (argc == 2 && (!strcmp(argv[1], "hang") || !strcmp(argv[1], "die")))
    rc = run_fault(!strcmp(argv[1], "die"));
  else if (argc == 2 && !strcmp(argv[1], "chain"))
    rc = run_chain();
  else if (argc == 2 && !strcmp(argv[1], "transport_fault"))
    rc = run_transport_fault();
  else if (argc == 2 && !strcmp(argv[1], "wait_until"))
    rc = run_wait_until();
  else if (argc == 3 && !strcmp(argv[1], "ckpt"))
    rc = run_ckpt(argv[2]);
  else
    fprintf(stderr,
            "usage: rt_mpi_probe world SELF|N PLAN_RANKS FP | hang | die | chain | transport_fault | "
            "wait_until | ckpt DIR\n");
  hx_rt_finalize();
  return rc;
}
