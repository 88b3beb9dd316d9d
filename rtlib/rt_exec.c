/* hx_rt_main: what every generated rank program runs. Start-up and world
 * check, the backend's device and transport (rt_backend.h: whichever the
 * program was linked with), parameters, data, then per optimizer step the
 * rank's schedule table, the gradient sync, clipping by the global norm,
 * AdamW, one log line and the checkpoints. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/hf_llama.h"
#include "ckpt/user_file.h"
#include "rt_exec_internal.h"
#include "rt_init.h"
#include "seq/rt_seq.h"

struct rt_args {
  const char *data;
  int64_t steps;
  const char *checkpoint_dir;
  int64_t checkpoint_every;
  int resume;
  int reschedule;           /* --reschedule: resume under another --steps */
  const char *dump_weights; /* NULL: none */
  int emulate;              /* --emulate: the cluster file's speeds (rt_exec_ops.c) */
  const char *init_from;    /* --init-from FILE.safetensors: initial weights; NULL: the spec's */
  int checkpoint_overwrite; /* --checkpoint-overwrite: write over another run's checkpoints */
  int64_t resumed_step;     /* the step resumed from; -1: none */
  const char *memory_report; /* --memory-report FILE or $HEXIC_MEMORY: JSON by rank and kind */
  /* --checkpoint-dir given: the last step's checkpoint is written even
   * without --checkpoint-every (the spec's checkpoint_dir, which hexic
   * always fills, is only where they go) */
  bool checkpoint_dir_named;
  const char *val_data; /* --val-data FILE; NULL: none */
  int64_t val_every;    /* --val-every N; 0: after the last step only */
  int64_t val_batches;  /* --val-batches K */
  bool val_batches_set; /* given on the command line */
  bool eval_only;       /* --eval-only: the loss of the loaded weights, no update */
  bool checkpoint_dir_existed; /* before this run made it (check_checkpoint_dir) */
  const char *metrics;  /* --metrics FILE.jsonl; NULL: none */
  bool metrics_append;  /* --metrics-append: add to an existing FILE */
};

/* --val-batches' default: enough batches that the loss is not one batch's. */
enum { DEFAULT_VAL_BATCHES = 8 };

static const char usage_text[] =
    "options: --data FILE  --steps N  --checkpoint-dir DIR  --checkpoint-every N  --resume  "
    "--checkpoint-overwrite  --reschedule  --emulate  --dump-weights FILE  "
    "--init-from FILE.safetensors  --memory-report FILE  --val-data FILE  --val-every N  "
    "--val-batches K  --eval-only  --metrics FILE.jsonl  --metrics-append";

static int64_t parse_count(const char *opt, const char *text) {
  char *end;
  long long v = strtoll(text, &end, 10);
  if (!*text || *end || v < 0 || v > INT32_MAX)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "%s wants a non-negative integer, not '%s'", opt, text);
  return v;
}

/* Evaluation options that would do nothing are refused rather than
 * ignored: every rank parses the same line, so every rank exits alike. */
static void check_eval_args(const struct rt_args *a) {
  if (a->val_batches < 1)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--val-batches wants at least 1 batch, not %lld",
                (long long)a->val_batches);
  if (a->val_data && !*a->val_data)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--val-data wants a file name, not an empty one");
  if (!a->val_data && a->val_every > 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--val-every %lld needs --val-data FILE (the tokens to evaluate)",
                (long long)a->val_every);
  if (!a->val_data && a->val_batches_set && !a->eval_only)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "--val-batches needs --val-data FILE or --eval-only (nothing is evaluated)");
  if (a->metrics && !*a->metrics)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--metrics wants a file name, not an empty one");
  if (a->metrics_append && !a->metrics)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--metrics-append needs --metrics FILE.jsonl");
  if (a->eval_only && a->val_every > 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--eval-only trains nothing: --val-every has no step to act on");
}

static void parse_args(const struct hx_rt_rank_config *c, int argc, char **argv,
                       struct rt_args *a) {
  *a = (struct rt_args){.data = c->train->data,
                        .steps = c->train->steps,
                        .checkpoint_dir = c->train->checkpoint_dir,
                        .checkpoint_every = c->train->checkpoint_every,
                        .resumed_step = -1,
                        .memory_report = getenv("HEXIC_MEMORY"),
                        .val_batches = DEFAULT_VAL_BATCHES};
  if (a->memory_report && !*a->memory_report)
    a->memory_report = NULL;
  if (!a->checkpoint_dir)
    a->checkpoint_dir = "checkpoints";
  for (int i = 1; i < argc; i++) {
    const char *opt = argv[i];
    int has_value = i + 1 < argc;
    if (!strcmp(opt, "--resume")) {
      a->resume = 1;
    } else if (!strcmp(opt, "--checkpoint-overwrite")) {
      a->checkpoint_overwrite = 1;
    } else if (!strcmp(opt, "--reschedule")) {
      a->reschedule = 1;
    } else if (!strcmp(opt, "--emulate")) {
      a->emulate = 1;
    } else if (!strcmp(opt, "--data") && has_value) {
      a->data = argv[++i];
    } else if (!strcmp(opt, "--steps") && has_value) {
      a->steps = parse_count(opt, argv[++i]);
    } else if (!strcmp(opt, "--checkpoint-dir") && has_value) {
      a->checkpoint_dir = argv[++i];
      a->checkpoint_dir_named = true;
    } else if (!strcmp(opt, "--eval-only")) {
      a->eval_only = true;
    } else if (!strcmp(opt, "--metrics-append")) {
      a->metrics_append = true;
    } else if (!strcmp(opt, "--metrics") && has_value) {
      a->metrics = argv[++i];
    } else if (!strcmp(opt, "--val-data") && has_value) {
      a->val_data = argv[++i];
    } else if (!strcmp(opt, "--val-every") && has_value) {
      a->val_every = parse_count(opt, argv[++i]);
    } else if (!strcmp(opt, "--val-batches") && has_value) {
      a->val_batches = parse_count(opt, argv[++i]);
      a->val_batches_set = true;
    } else if (!strcmp(opt, "--dump-weights") && has_value) {
      a->dump_weights = argv[++i];
    } else if (!strcmp(opt, "--init-from") && has_value) {
      a->init_from = argv[++i];
    } else if (!strcmp(opt, "--memory-report") && has_value) {
      a->memory_report = argv[++i];
    } else if (!strcmp(opt, "--checkpoint-every") && has_value) {
      a->checkpoint_every = parse_count(opt, argv[++i]);
    } else {
      hx_rt_fatal(HX_RT_EXIT_ERROR, "unknown or incomplete option '%s'; %s", opt, usage_text);
    }
  }
  check_eval_args(a);
}

/* This rank's TP shard: its query heads and ffn columns from the stage's
 * boundary tables (uneven splits allowed; the kernels derive the kv heads). */
static void make_shard(struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  if (c->tp < 1 || c->tp_rank < 0 || c->tp_rank >= c->tp)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "TP rank %d of degree %d is not a valid place", c->tp_rank,
                c->tp);
  int r = c->tp_rank;
  if (!hxk_shard_make(&e->dims, c->head_bounds[r], c->head_bounds[r + 1], c->ffn_bounds[r],
                      c->ffn_bounds[r + 1], &e->shard))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "cannot build the TP shard: heads [%d, %d), ffn [%d, %d)",
                c->head_bounds[r], c->head_bounds[r + 1], c->ffn_bounds[r], c->ffn_bounds[r + 1]);
}

static void set_up_shapes(struct rt_exec *e) {
  const struct hx_rt_model *m = e->cfg->model;
  e->dims = (struct hxk_dims){.dim = m->hidden,
                              .ffn = m->ffn,
                              .heads = m->heads,
                              .kv_heads = m->kv_heads,
                              .vocab = m->vocab,
                              .seq_len = m->seq_len,
                              .layers = m->layers,
                              .norm_eps = (float)m->norm_eps,
                              .rope_theta = m->rope_theta,
                              .rope_factor = m->rope_factor,
                              .rope_low_freq_factor = m->rope_low_freq_factor,
                              .rope_high_freq_factor = m->rope_high_freq_factor,
                              .rope_original_max_len = m->rope_original_max_len};
  if (!hxk_dims_check(&e->dims))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "the model's shape is not a valid Llama shape");
  make_shard(e);
  /* a HexiSeq rank holds only its tokens of each sequence */
  long local = e->cfg->seq ? rt_seq_local_tokens(e->cfg->seq) : m->seq_len;
  e->tokens = (long)e->cfg->micro_batch_size * local;
}

static void open_data(struct rt_exec *e, const struct rt_args *a) {
  char err[512];
  const struct hx_rt_train *t = e->cfg->train;
  if (!hx_rt_data_open(&e->data, a->data, HX_DATA_AUTO, e->dims.vocab, e->dims.seq_len,
                       (int64_t)t->seed, err, sizeof err))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "%s", err);
  if (e->cfg->rank == 0) {
    char desc[512];
    hx_rt_data_describe(&e->data, a->data, desc, sizeof desc);
    hx_rt_log_banner("data: %s", desc);
  }
}

/* The step's global loss and gradient norm (sum of squares), host scalars
 * every rank holds alike. */
struct step_totals {
  double loss, sumsq;
};

/* Both in one reduction over the world. A rank whose loss or norm is not
 * finite passes it on (a NaN or Inf in a sum stays one), so every rank sees
 * the same verdict without another collective. */
static struct step_totals reduce_loss_and_norm(struct rt_exec *e) {
  double local[2] = {e->dev->take_loss(), e->dev->grad_norm_sumsq()}, global[2];
  MPI_Request req;
  hx_rt_mpi_check(MPI_Iallreduce(local, global, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req),
                  "loss and norm all-reduce");
  hx_rt_wait_all(1, &req, &(struct hx_rt_wait){"loss and norm all-reduce", -1, -1, 0, NULL});
  return (struct step_totals){global[0], global[1]};
}

/* One clipped AdamW step, alike on every rank. Returns its learning rate. */
static double optimizer_step(struct rt_exec *e, double global_sumsq) {
  const struct hx_rt_train *t = e->cfg->train;
  double lr = hxk_lr_at(e->step, t->lr, t->warmup_steps, e->steps);
  struct hxk_adamw hp = {t->beta1, t->beta2, t->eps, t->weight_decay};
  e->dev->optimizer_step(global_sumsq, t->grad_clip, &hp, e->step, lr);
  return lr;
}

/* A step whose loss or gradient norm is not finite ends the run on every
 * rank (all of them saw the same totals) before its update, so neither the
 * weights nor a checkpoint of that step take the NaNs. Only now are the
 * gradients searched: the rank holding the first bad tensor in the order
 * the backward produced them (lowest rank on a tie) names it. */
_Noreturn static void stop_non_finite(struct rt_exec *e, struct step_totals tot) {
  struct rt_bad_gradient bad = {0};
  struct {
    int ordinal, rank;
  } mine = {rt_first_non_finite_gradient(e, &bad), e->cfg->rank}, first;
  MPI_Request req;
  hx_rt_mpi_check(MPI_Iallreduce(&mine, &first, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD, &req),
                  "non-finite gradient search");
  hx_rt_wait_all(1, &req, &(struct hx_rt_wait){"non-finite gradient search", -1, -1, 0, NULL});
  long long step = (long long)e->step + 1; /* 1-based, as the step lines print it */
  char what[256];
  if (first.ordinal == INT_MAX)
    snprintf(what, sizeof what, "every gradient is finite");
  else
    snprintf(what, sizeof what, "the gradient of %s is not finite (%g at [%ld, %ld])", bad.name,
             (double)bad.value, bad.row, bad.col);
  bool says = first.ordinal == INT_MAX ? e->cfg->rank == 0 : first.rank == e->cfg->rank;
  if (says) {
    fprintf(stderr,
            "hexic-rt: rank %d: error: step %lld: %s; the loss is %g and the gradient norm %g: "
            "training stops before the step's update, and no checkpoint of step %lld is "
            "written\n",
            e->cfg->rank, step, what, tot.loss, sqrt(tot.sumsq), step);
    fflush(stderr);
  }
  rt_emu_stop(e);
  hx_rt_finalize();
  exit(HX_RT_EXIT_ERROR);
}

/* What one step measured, for its log line and --metrics: rank 0's wall
 * time of the step; the loss, learning rate and gradient norm (before
 * clipping) every rank holds alike. */
struct step_record {
  double loss, lr, grad_norm, step_s;
};

static struct step_record run_step(struct rt_exec *e) {
  double start = hx_rt_now_s(), lr = 0, loss = 0, grad_norm = 0;
  e->dev->zero(e->p.dev.g, (size_t)e->p.lay.n * sizeof(float));
  for (int i = 0; i < e->cfg->nops; i++) {
    const struct hx_rt_op *op = &e->cfg->schedule[i];
    if (op->kind == HX_RT_GRAD_SYNC) {
      rt_wait_sends(e);
      rt_sync_gradients(e);
    } else if (op->kind == HX_RT_OPTIMIZER) {
      rt_emu_op_begin(e, i);
      struct step_totals tot = reduce_loss_and_norm(e);
      if (!isfinite(tot.loss) || !isfinite(tot.sumsq)) {
        rt_emu_op_end(e);
        stop_non_finite(e, tot);
      }
      loss = tot.loss;
      grad_norm = sqrt(tot.sumsq);
      lr = optimizer_step(e, tot.sumsq);
      rt_sync_gather_weights(e); /* ZeRO-1: the updated shards to every member */
      rt_emu_op_end(e);
    } else if (op->kind == HX_RT_BACKWARD) {
      /* the last backward frees the gradient-sync buckets as it goes */
      rt_sync_backward_point(e, op->micro_batch, e->p.lay.nlayers);
      rt_run_op(e, op);
      rt_sync_backward_point(e, op->micro_batch, -1);
    } else {
      rt_run_op(e, op);
    }
  }
  double s = hx_rt_now_s() - start;
  if (e->cfg->rank == 0) {
    double tokens = (double)e->cfg->train->global_batch * e->dims.seq_len;
    struct hx_rt_step_stats st = {e->step, e->steps, loss, lr, 1e3 * s, s > 0 ? tokens / s : 0};
    hx_rt_log_step(&st);
  }
  return (struct step_record){loss, lr, grad_norm, s};
}

/* What a checkpoint must share with this run to continue it under any plan:
 * the model's shape, and what the data order depends on (docs/model-spec.md,
 * Data). One line each, in the MANIFEST. */
/* The model as the MANIFEST records it: hf_llama's line (the shape, then
 * rope_theta and norm_eps, each the shortest text that reads back as it, so
 * equal values compare equal), which resume and --init-from compare and
 * hexic-ckpt export reads back. */
static const char *ckpt_model_line(const struct rt_exec *e) {
  static char line[512];
  const struct hx_rt_model *m = e->cfg->model;
  struct hx_hf_model shape = {.layers = m->layers,
                              .hidden = m->hidden,
                              .ffn = m->ffn,
                              .heads = m->heads,
                              .kv_heads = m->kv_heads,
                              .vocab = m->vocab,
                              .rope_theta = m->rope_theta,
                              .norm_eps = m->norm_eps,
                              .tied = m->tie_embeddings != 0,
                              .rope_factor = m->rope_factor,
                              .rope_low_freq_factor = m->rope_low_freq_factor,
                              .rope_high_freq_factor = m->rope_high_freq_factor,
                              .rope_original_max_len = m->rope_original_max_len};
  hx_hf_model_line(&shape, line, sizeof line);
  return line;
}

static const char *ckpt_data_line(const struct rt_exec *e) {
  static char line[128];
  snprintf(line, sizeof line, "global_batch %d seq_len %d seed %llu", e->cfg->train->global_batch,
           e->cfg->model->seq_len, (unsigned long long)e->cfg->train->seed);
  return line;
}

/* The checkpoint's view of the rank: tensors pointing into host copies of
 * the parameters and moments (h). */
static struct hx_rt_ckpt_state ckpt_state(const struct rt_exec *e,
                                          const struct rt_host_params *h) {
  struct hx_rt_ckpt_state st = {.step = e->step,
                                .ntensors = rt_ckpt_tensors(e, h, NULL),
                                .schedule_steps = e->steps,
                                .model = ckpt_model_line(e),
                                .data = ckpt_data_line(e)};
  st.tensors = hx_rt_calloc((size_t)st.ntensors, sizeof *st.tensors);
  rt_ckpt_tensors(e, h, st.tensors);
  return st;
}

/* Ends the run on every rank in order, after rank 0 said why: for decisions
 * every rank takes alike (they all read the same manifest and options). */
_Noreturn __attribute__((format(printf, 2, 3))) static void
exit_everywhere(const struct rt_exec *e, const char *fmt, ...) {
  if (e->cfg->rank == 0) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hexic-rt: rank 0: error: %s\n", msg);
    fflush(stderr);
  }
  hx_rt_finalize();
  exit(HX_RT_EXIT_ERROR);
}

/* Rank 0's verdict (ok, or why not in err) taken by every rank. */
static void agree_or_exit(const struct rt_exec *e, bool ok, const char *err) {
  int mine = ok, all = 0;
  hx_rt_mpi_check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                  "--checkpoint-dir agreement");
  if (!all)
    exit_everywhere(e, "%s", err);
}

/* Whether this run writes checkpoints: every --checkpoint-every steps, and
 * the last step's whenever a folder was named (a folder alone is a request
 * for the trained weights); never under --eval-only. */
static bool writes_checkpoints(const struct rt_args *a) {
  return !a->eval_only && (a->checkpoint_every > 0 || a->checkpoint_dir_named);
}

static bool checkpoint_due(const struct rt_exec *e, const struct rt_args *a) {
  if (!writes_checkpoints(a))
    return false;
  if (e->step == e->steps)
    return true;
  return a->checkpoint_every > 0 && e->step % a->checkpoint_every == 0;
}

/* An unwritable directory fails now, not at the first checkpoint: every rank
 * writes its own file there. */
static void check_checkpoint_dir(const struct rt_exec *e, struct rt_args *a) {
  struct stat dir_stat;
  a->checkpoint_dir_existed = stat(a->checkpoint_dir, &dir_stat) == 0;
  if (!writes_checkpoints(a))
    return;
  if (!hx_rt_ckpt_check_dir(MPI_COMM_WORLD, a->checkpoint_dir)) {
    char which[64] = "the checkpoint of the last step";
    if (a->checkpoint_every > 0)
      snprintf(which, sizeof which, "the checkpoints of every %lld steps",
               (long long)a->checkpoint_every);
    exit_everywhere(e,
                    "--checkpoint-dir '%s' cannot take %s (see the ranks' messages); pick a "
                    "writable directory",
                    a->checkpoint_dir, which);
  }
  hx_rt_progress();
  /* another run's checkpoints there are not written over unless asked */
  /* --resume without --checkpoint-every names the folder it reads, which
   * resume itself checks (another model's or data order's checkpoint is
   * refused there, naming both): its message, not this one */
  if (a->checkpoint_overwrite || (a->resume && a->checkpoint_every <= 0))
    return;
  struct hx_rt_ckpt_state st = {.model = ckpt_model_line(e), .data = ckpt_data_line(e)};
  char err[2048] = "";
  bool ok = e->cfg->rank != 0 || hx_rt_ckpt_check_owner(a->checkpoint_dir, &st, err, sizeof err);
  agree_or_exit(e, ok, err);
}

/* After resume: no checkpoint this run will write lands on one that does
 * not verify (resume skipped it; its owner may repair it), unless asked. */
static void check_checkpoint_steps(const struct rt_exec *e, const struct rt_args *a) {
  if (!writes_checkpoints(a) || a->checkpoint_overwrite)
    return;
  char err[2048] = "";
  const char *dir = a->checkpoint_dir;
  /* the steps of every N, then the last step's (every 1 from steps - 1) */
  bool ok = e->cfg->rank != 0 ||
            ((a->checkpoint_every <= 0 ||
              hx_rt_ckpt_check_damaged(dir, e->step, e->steps, a->checkpoint_every, err,
                                       sizeof err)) &&
             (e->step >= e->steps ||
              hx_rt_ckpt_check_damaged(dir, e->steps - 1, e->steps, 1, err, sizeof err)));
  agree_or_exit(e, ok, err);
}

static void report_fresh_start(const struct rt_exec *e, const struct rt_args *a) {
  if (e->cfg->rank != 0)
    return;
  bool exists = a->checkpoint_dir_existed;
  fprintf(stderr,
          "hexic-rt: warning: --resume found no complete checkpoint in '%s'%s: training "
          "starts from scratch, at step 1 of %lld\n",
          a->checkpoint_dir, exists ? "" : " (no such directory)", (long long)e->steps);
  fflush(stderr);
}

/* The learning-rate schedule is laid over the run's steps: resuming under
 * another count changes it, so that takes --reschedule; a checkpoint past
 * the steps leaves nothing to run. */
static void check_schedule(const struct rt_exec *e, const struct rt_args *a, int64_t step,
                           int64_t schedule_steps) {
  if (schedule_steps != e->steps && !a->reschedule)
    exit_everywhere(e,
                    "--resume: the checkpoint at step %lld in '%s' was written by a run of %lld "
                    "steps, and the learning-rate schedule is laid over the steps of the run; "
                    "this run has %lld (--steps). Resume with --steps %lld, or add --reschedule "
                    "to lay the schedule over %lld steps from here",
                    (long long)step, a->checkpoint_dir, (long long)schedule_steps,
                    (long long)e->steps, (long long)schedule_steps, (long long)e->steps);
  if (step > e->steps)
    exit_everywhere(e,
                    "--resume: the checkpoint in '%s' is at step %lld, past --steps %lld: nothing "
                    "to run (a larger --steps trains on)",
                    a->checkpoint_dir, (long long)step, (long long)e->steps);
}

/* --init-from: every rank reads its slices of hexic's initial weights
 * (hexic-ckpt import) in place of the spec's initialisation; a resumed
 * checkpoint then replaces them. */
static void maybe_init_from(struct rt_exec *e, const struct rt_args *a) {
  if (!a->init_from)
    return;
  struct rt_host_params h = rt_host_params_new(e, false);
  rt_host_params_download(e, &h);
  struct hx_rt_ckpt_state st = ckpt_state(e, &h);
  char err[1024] = "";
  int model_tensors = e->dims.layers * HXK_LAYER_NPARAMS + 2 + !e->cfg->model->tie_embeddings;
  bool ok = hx_rt_ckpt_init_from(a->init_from, model_tensors, &st, err, sizeof err);
  if (ok)
    rt_host_params_upload(e, &h);
  free(st.tensors);
  rt_host_params_free(&h);
  if (!ok)
    fprintf(stderr, "hexic-rt: rank %d: error: --init-from: %s\n", e->cfg->rank, err);
  int mine = ok, all = 0;
  hx_rt_mpi_check(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD),
                  "--init-from agreement");
  if (!all)
    exit_everywhere(e, "--init-from %s: the initial weights could not be read (see above)",
                    a->init_from);
  if (e->cfg->rank == 0)
    hx_rt_log_banner("initial weights from %s", a->init_from);
}

static void maybe_resume(struct rt_exec *e, const struct rt_args *a) {
  if (!a->resume)
    return;
  struct rt_host_params h = rt_host_params_new(e, true);
  struct hx_rt_ckpt_state st = ckpt_state(e, &h);
  int64_t step = hx_rt_ckpt_resume(MPI_COMM_WORLD, a->checkpoint_dir, e->cfg->fingerprint, &st);
  int64_t schedule_steps = st.schedule_steps;
  bool resharded = st.resharded;
  int source_ranks = st.source_ranks;
  char source_plan[sizeof st.source_fingerprint];
  snprintf(source_plan, sizeof source_plan, "%s", st.source_fingerprint);
  free(st.tensors);
  if (step > 0) /* loaded: onto the device */
    rt_host_params_upload(e, &h);
  rt_host_params_free(&h);
  if (step < 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "cannot resume from '%s'", a->checkpoint_dir);
  if (step == 0) {
    report_fresh_start(e, a);
    return;
  }
  check_schedule(e, a, step, schedule_steps);
  e->step = step;
  if (e->cfg->rank != 0)
    return;
  if (resharded)
    hx_rt_log_banner("checkpoint of step %lld in %s written by plan %s on %d ranks: each rank "
                     "read its ranges of every tensor",
                     (long long)step, a->checkpoint_dir, source_plan, source_ranks);
  if (step == e->steps)
    hx_rt_log_banner("training already complete: the checkpoint in %s is at step %lld of %lld; "
                     "nothing to run",
                     a->checkpoint_dir, (long long)step, (long long)e->steps);
  else if (schedule_steps != e->steps)
    hx_rt_log_banner("resuming at step %lld from %s; the learning-rate schedule is laid over "
                     "%lld steps, not the checkpoint's %lld (--reschedule)",
                     (long long)step, a->checkpoint_dir, (long long)e->steps,
                     (long long)schedule_steps);
  else
    hx_rt_log_banner("resuming at step %lld from %s", (long long)step, a->checkpoint_dir);
}

static void maybe_checkpoint(struct rt_exec *e, const struct rt_args *a) {
  if (!checkpoint_due(e, a))
    return;
  struct rt_host_params h = rt_host_params_new(e, true);
  rt_host_params_download(e, &h);
  struct hx_rt_ckpt_state st = ckpt_state(e, &h);
  st.resumed = a->resumed_step > 0;
  st.resumed_step = a->resumed_step;
  bool ok = hx_rt_ckpt_save(MPI_COMM_WORLD, a->checkpoint_dir, e->cfg->fingerprint, &st);
  free(st.tensors);
  rt_host_params_free(&h);
  if (!ok)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "checkpoint of step %lld failed", (long long)e->step);
  if (e->cfg->rank == 0) /* said, so a run's checkpoints are never silent */
    hx_rt_log_banner("checkpoint of step %lld written to %s", (long long)e->step,
                     a->checkpoint_dir);
  hx_rt_progress();
}

/* ---- evaluation ---- */

/* --val-data, opened like --data (the same formats, the model's vocab and
 * sequence length); val->kind stays zeroed when not given. */
static bool open_val_data(struct rt_exec *e, const struct rt_args *a, struct hx_rt_data *val) {
  memset(val, 0, sizeof *val);
  if (!a->val_data)
    return false;
  char err[512];
  if (!hx_rt_data_open(val, a->val_data, HX_DATA_AUTO, e->dims.vocab, e->dims.seq_len,
                       (int64_t)e->cfg->train->seed, err, sizeof err))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--val-data: %s", err);
  if (e->cfg->rank == 0) {
    char desc[512];
    hx_rt_data_describe(val, a->val_data, desc, sizeof desc);
    hx_rt_log_banner("validation data: %s", desc);
  }
  return true;
}

/* The mean token cross-entropy of batches [0, batches) of stream (batch k
 * read as training's step k would read it), over the world. Forward passes
 * only: the weights and moments are not touched, the head's gradients they
 * leave are zeroed, and training's data position is its step, which this
 * does not change. */
static double evaluate(struct rt_exec *e, const struct hx_rt_data *stream, int64_t batches) {
  e->eval_data = stream;
  for (int64_t k = 0; k < batches; k++) {
    e->eval_batch = k;
    rt_forward_pass(e);
  }
  e->eval_data = NULL;
  e->dev->zero(e->p.dev.g, (size_t)e->p.lay.n * sizeof(float));
  /* each batch's loss carries training's 1/(B*T): their sum over the world
   * is batches times the mean */
  double local = e->dev->take_loss(), global = 0;
  MPI_Request req;
  hx_rt_mpi_check(MPI_Iallreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &req),
                  "validation loss all-reduce");
  hx_rt_wait_all(1, &req, &(struct hx_rt_wait){"validation loss all-reduce", -1, -1, 0, NULL});
  return global / (double)batches;
}

/* Rank 0's line: val step S/M | loss X | batches K | tokens N. */
static void log_validation(const struct rt_exec *e, double loss, int64_t batches) {
  if (e->cfg->rank != 0)
    return;
  long long tokens = (long long)batches * e->cfg->train->global_batch * e->dims.seq_len;
  printf("val step %lld/%lld | loss %.9g | batches %lld | tokens %lld\n", (long long)e->step,
         (long long)e->steps, loss, (long long)batches, tokens);
  fflush(stdout);
}

/* After the step just taken: the validation loss when one is due (after
 * every --val-every steps and after the last), else NAN. */
static double maybe_validate(struct rt_exec *e, const struct rt_args *a,
                             const struct hx_rt_data *val) {
  if (!a->val_data)
    return NAN;
  bool due = e->step == e->steps || (a->val_every > 0 && e->step % a->val_every == 0);
  if (!due)
    return NAN;
  double loss = evaluate(e, val, a->val_batches);
  log_validation(e, loss, a->val_batches);
  hx_rt_progress();
  return loss;
}

/* --eval-only: the loaded weights' loss on --val-data, else on --data. */
static double eval_only(struct rt_exec *e, const struct rt_args *a, const struct hx_rt_data *val) {
  const struct hx_rt_data *stream = a->val_data ? val : &e->data;
  double loss = evaluate(e, stream, a->val_batches);
  log_validation(e, loss, a->val_batches);
  return loss;
}

/* ---- --metrics FILE.jsonl ---- */

/* Rank 0's metrics file; on every rank, whether the per-step gather runs. */
struct rt_metrics {
  bool on;
  FILE *out;
};

/* Rank 0 creates the file (O_EXCL: nothing the user wrote is replaced) or,
 * with --metrics-append, adds to it; every rank takes its verdict. */
static void open_metrics(const struct rt_exec *e, const struct rt_args *a, struct rt_metrics *m) {
  *m = (struct rt_metrics){.on = a->metrics != NULL};
  if (!m->on)
    return;
  char err[2048] = "";
  if (e->cfg->rank == 0) {
    int flags = O_WRONLY | O_CREAT | (a->metrics_append ? O_APPEND : O_EXCL);
    int fd = open(a->metrics, flags | O_CLOEXEC, 0644);
    if (fd >= 0)
      m->out = fdopen(fd, "a");
    if (fd >= 0 && !m->out)
      close(fd);
    if (!m->out && errno == EEXIST)
      snprintf(err, sizeof err,
               "--metrics '%s' exists: the metrics do not write over a file; remove it, name "
               "another, or add --metrics-append to add to it",
               a->metrics);
    else if (!m->out)
      snprintf(err, sizeof err, "--metrics '%s': cannot write it: %s", a->metrics,
               strerror(errno));
  }
  agree_or_exit(e, e->cfg->rank != 0 || m->out != NULL, err);
}

/* The largest peak of device memory over the ranks (rt_memory.c's total of
 * every kind), and the rank that has it (the lowest on a tie); rank 0's
 * answer only. Collective. */
static void peak_memory_over_ranks(const struct rt_exec *e, int64_t *bytes, int *rank) {
  struct rt_mem_figures f;
  rt_mem_figures(&f);
  int64_t mine = f.peak_total, *all = NULL;
  int world = e->cfg->world_size;
  if (e->cfg->rank == 0)
    all = hx_rt_calloc((size_t)world, sizeof *all);
  MPI_Request req;
  hx_rt_mpi_check(MPI_Igather(&mine, 1, MPI_INT64_T, all, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &req),
                  "gather the peak memory");
  hx_rt_wait_all(1, &req, &(struct hx_rt_wait){"gather the peak memory", -1, 0, 0, NULL});
  *bytes = all ? -1 : mine;
  *rank = e->cfg->rank;
  for (int r = 0; all && r < world; r++)
    if (all[r] > *bytes) {
      *bytes = all[r];
      *rank = r;
    }
  free(all);
}

/* ", \"name\": value" with value finite (a JSON number); nothing otherwise. */
static void json_number(FILE *f, const char *name, double v) {
  if (isfinite(v))
    fprintf(f, ", \"%s\": %.9g", name, v);
}

/* One line of the step just taken (r NULL: --eval-only's line of the
 * loaded weights, its validation loss only), flushed so that a reader
 * tailing the file sees each step as it ends. */
static void write_metrics(const struct rt_exec *e, const struct rt_metrics *m,
                          const struct step_record *r, double val_loss) {
  if (!m->on)
    return;
  int64_t peak = 0;
  int peak_rank = 0;
  peak_memory_over_ranks(e, &peak, &peak_rank);
  if (!m->out)
    return;
  FILE *f = m->out;
  fprintf(f, "{\"step\": %lld", (long long)e->step);
  if (r) {
    double tokens = (double)e->cfg->train->global_batch * e->dims.seq_len;
    double flops = e->cfg->model_flops_per_step, peak_flops = e->cfg->plan_peak_flops;
    json_number(f, "loss", r->loss);
    json_number(f, "val_loss", val_loss);
    json_number(f, "lr", r->lr);
    json_number(f, "grad_norm", r->grad_norm);
    json_number(f, "tokens_per_s", r->step_s > 0 ? tokens / r->step_s : NAN);
    json_number(f, "mfu", r->step_s > 0 && flops > 0 && peak_flops > 0
                              ? flops / (r->step_s * peak_flops)
                              : NAN);
    json_number(f, "step_s", r->step_s);
  } else {
    json_number(f, "val_loss", val_loss);
  }
  fprintf(f, ", \"peak_memory_bytes\": %lld, \"peak_memory_rank\": %d}\n", (long long)peak,
          peak_rank);
  if (fflush(f) != 0 || ferror(f))
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--metrics: cannot write: %s", strerror(errno));
}

static void close_metrics(struct rt_metrics *m) {
  if (m->out && fclose(m->out) != 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--metrics: cannot write: %s", strerror(errno));
  m->out = NULL;
}

/* HEXIC_STATE_BYTES=1: every rank prints the bytes of model state it
 * allocated (weights, gradients, AdamW m and v: with ZeRO-1, the moments of
 * its shards only), which tests compare with the plan's memory figure. */
static void report_state_bytes(const struct rt_exec *e) {
  const char *v = getenv("HEXIC_STATE_BYTES");
  if (!v || strcmp(v, "1"))
    return;
  fprintf(stderr,
          "hexic-rt: rank %d: model state %lld bytes (weights and gradients %ld floats each, "
          "m and v %ld floats each)\n",
          e->cfg->rank, (long long)rt_model_state_bytes(e), e->p.lay.n, e->p.lay.moments);
  fflush(stderr);
}

/* The executor's device buffers by what they hold (rt_backend.h): the
 * device counted what rt_slots_init allocated as communication buffers (so
 * that its hop receive buffers, which this file does not see, count as
 * such) and the rest as workspace. A stage's boundary buffers (its output,
 * the gradient it receives and the one it sends back, per slot) are
 * communication buffers when the stage has a neighbour, else the layers'
 * workspace. */
static void tag_buffers(const struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  bool hops = c->prev_leader >= 0 || c->next_leader >= 0;
  enum rt_mem_kind boundary = hops ? RT_MEM_COMM : RT_MEM_WORKSPACE;
  for (int i = 0; i < c->activation_slots; i++) {
    const struct rt_slot *s = &e->slots[i];
    rt_mem_retag(s->tokens, SIZE_MAX, RT_MEM_WORKSPACE);
    rt_mem_retag(s->acts, SIZE_MAX, RT_MEM_ACTIVATIONS);
    rt_mem_retag(s->out_act, SIZE_MAX, boundary);
    rt_mem_retag(s->dout, SIZE_MAX, boundary);
    rt_mem_retag(s->din, SIZE_MAX, boundary);
  }
  rt_mem_retag(e->x0, SIZE_MAX, RT_MEM_WORKSPACE);
  rt_mem_retag(e->x1, SIZE_MAX, RT_MEM_WORKSPACE);
  if (e->sp_full) /* SP: the whole activation beside the embedding and the head */
    rt_mem_retag(e->sp_full, SIZE_MAX, RT_MEM_WORKSPACE);
  rt_mem_retag(e->scratch, SIZE_MAX, RT_MEM_WORKSPACE);
  rt_mem_retag(e->scratch, e->dev->recompute_bytes(), RT_MEM_RECOMPUTE);
  if (e->hs.whole) { /* a HexiSeq leader's gather and scatter */
    rt_mem_retag(e->hs.whole, SIZE_MAX, RT_MEM_COMM);
    rt_mem_retag(e->hs.pack, SIZE_MAX, RT_MEM_COMM);
  }
  rt_mem_retag(e->pack, SIZE_MAX, RT_MEM_COMM);
  if (e->sync.recv)
    rt_mem_retag(e->sync.recv, SIZE_MAX, RT_MEM_COMM);
  rt_mem_reset_peaks();
}

/* {"rank": R, "peak": {...}, "current": {...}, "peak_total": B} */
static void write_rank_json(FILE *f, int rank, const int64_t *v) {
  fprintf(f, "    {\"rank\": %d, \"peak\": {", rank);
  for (int k = 0; k < RT_MEM_NKINDS; k++)
    fprintf(f, "%s\"%s\": %lld", k ? ", " : "", rt_mem_kind_name((enum rt_mem_kind)k),
            (long long)v[k]);
  fputs("}, \"current\": {", f);
  for (int k = 0; k < RT_MEM_NKINDS; k++)
    fprintf(f, "%s\"%s\": %lld", k ? ", " : "", rt_mem_kind_name((enum rt_mem_kind)k),
            (long long)v[RT_MEM_NKINDS + k]);
  fprintf(f, "}, \"peak_total\": %lld}", (long long)v[2 * RT_MEM_NKINDS]);
}

/* Every rank's figures, gathered on rank 0, into path (written whole, then
 * renamed over it, so a reader never sees half a report). */
static void write_memory_json(const struct rt_exec *e, const char *path,
                              const struct rt_mem_figures *f) {
  enum { N = 2 * RT_MEM_NKINDS + 1 };
  int64_t mine[N], *all = NULL;
  for (int k = 0; k < RT_MEM_NKINDS; k++) {
    mine[k] = f->peak[k];
    mine[RT_MEM_NKINDS + k] = f->current[k];
  }
  mine[2 * RT_MEM_NKINDS] = f->peak_total;
  int world = e->cfg->world_size;
  if (e->cfg->rank == 0)
    all = hx_rt_calloc((size_t)world * N, sizeof *all);
  hx_rt_mpi_check(MPI_Gather(mine, N, MPI_INT64_T, all, N, MPI_INT64_T, 0, MPI_COMM_WORLD),
                  "gather the memory report");
  if (e->cfg->rank != 0)
    return;
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--memory-report: the path is too long: %.64s...", path);
  FILE *out = fopen(tmp, "w");
  if (!out)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--memory-report: cannot write %s", tmp);
  fprintf(out, "{\n  \"backend\": \"%s\",\n  \"ranks\": [\n", e->dev->backend);
  for (int r = 0; r < world; r++) {
    write_rank_json(out, r, all + (size_t)r * N);
    fputs(r + 1 < world ? ",\n" : "\n", out);
  }
  fputs("  ]\n}\n", out);
  bool ok = !ferror(out);
  if (fclose(out) != 0 || !ok || rename(tmp, path) != 0) {
    remove(tmp);
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--memory-report: cannot write %s", path);
  }
  free(all);
  hx_rt_log_banner("memory by rank and kind written to %s", path);
}

/* One line per rank of its peak device memory by kind; with a path, the
 * JSON report too (collective). */
/* Rank 0, before step 1: the report never replaces a file (nothing the user
 * wrote is overwritten, as HEXIC_TRACE), and a folder it cannot write into
 * is said now, not after the whole run. */
static void check_memory_report(const struct rt_exec *e, const char *path) {
  if (!path || e->cfg->rank != 0)
    return;
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--memory-report: the path is too long: %.64s...", path);
  if (access(path, F_OK) == 0 || access(tmp, F_OK) == 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR,
                "--memory-report '%s' exists: the report does not write over a file; remove it "
                "or name another",
                access(path, F_OK) == 0 ? path : tmp);
  char dir[4096];
  hx_rt_folder_of(path, dir, sizeof dir);
  if (access(dir, W_OK) != 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--memory-report '%s': cannot write into %s: %s", path, dir,
                strerror(errno));
}

static void report_memory(const struct rt_exec *e, const char *path) {
  struct rt_mem_figures f;
  rt_mem_figures(&f);
  char line[512];
  rt_mem_format_line(line, sizeof line, &f);
  printf("hexic: rank %d %s\n", e->cfg->rank, line);
  fflush(stdout);
  if (path)
    write_memory_json(e, path, &f);
}

static void print_banner(const struct rt_exec *e) {
  const struct hx_rt_rank_config *c = e->cfg;
  if (c->rank != 0)
    return;
  hx_rt_log_banner("plan %s: %d ranks, %d pipeline%s; global batch %d x %d tokens", c->fingerprint,
                   c->world_size, c->npipelines, c->npipelines == 1 ? "" : "s",
                   c->train->global_batch, c->model->seq_len);
}

int hx_rt_main(const struct hx_rt_rank_config *cfg, int argc, char **argv) {
  hx_rt_init(&argc, &argv);
  hx_rt_check_world(cfg->rank, cfg->world_size, cfg->fingerprint);
  struct rt_args args;
  parse_args(cfg, argc, argv, &args);
  struct rt_exec e = {.cfg = cfg, .steps = args.steps};
  set_up_shapes(&e);
  print_banner(&e);
  e.dev = rt_device_open(cfg);
  e.tr = rt_transport_open(cfg, e.dev);
  rt_hexiseq_init(&e);
  rt_params_init(&e);
  rt_mem_set_default_kind(RT_MEM_COMM); /* what tag_buffers does not name: hop buffers */
  rt_slots_init(&e);
  rt_mem_set_default_kind(RT_MEM_WORKSPACE);
  rt_sync_init(&e);
  tag_buffers(&e);
  report_state_bytes(&e);
  open_data(&e, &args);
  struct hx_rt_data val;
  open_val_data(&e, &args, &val);
  check_checkpoint_dir(&e, &args);
  check_memory_report(&e, args.memory_report);
  struct rt_metrics metrics;
  open_metrics(&e, &args, &metrics);
  maybe_init_from(&e, &args);
  maybe_resume(&e, &args);
  args.resumed_step = args.resume ? e.step : -1;
  check_checkpoint_steps(&e, &args);
  if (args.eval_only) {
    /* at this machine's speed: --emulate is for training */
    write_metrics(&e, &metrics, NULL, eval_only(&e, &args, &val));
  } else {
    rt_emu_init(&e, args.emulate); /* from here on, at the device's speed */
    while (e.step < e.steps) {
      struct step_record r = run_step(&e);
      e.step++;
      write_metrics(&e, &metrics, &r, maybe_validate(&e, &args, &val));
      maybe_checkpoint(&e, &args);
    }
    rt_emu_stop(&e);
  }
  close_metrics(&metrics);
  if (args.dump_weights)
    rt_dump_weights(&e, args.dump_weights);
  report_memory(&e, args.memory_report);
  hx_rt_data_close(&val);
  hx_rt_data_close(&e.data);
  hx_rt_finalize();
  return HX_RT_EXIT_OK;
}
