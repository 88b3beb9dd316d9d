/* One compilation: options, sources, the arena, and every IR the passes
 * build. Passes take a struct hx_ctx * and fill their part. */
#ifndef HX_HEXIC_H
#define HX_HEXIC_H

#include <stdbool.h>

#include "arena.h"
#include "ast.h"
#include "cluster.h"
#include "diag.h"
#include "loc.h"
#include "model.h"
#include "plan.h"

#define HEXIC_VERSION "0.1.0"

enum hx_target { HX_TARGET_CPU, HX_TARGET_CUDA };
/* --transport (--target=cuda): what the generated Makefile builds the
 * runtime with by default (TRANSPORT); AUTO: NCCL when this hexic was
 * built with it. */
enum hx_transport { HX_TRANSPORT_AUTO, HX_TRANSPORT_NCCL, HX_TRANSPORT_MPI };
/* --cuda-attention (--target=cuda): the whole-head attention the generated
 * Makefile builds in by default (ATTENTION): hexic's kernels, or cuDNN's
 * fused attention (rtlib/cuda/attention_cudnn.c, -lcudnn). */
enum hx_cuda_attention { HX_CUDA_ATTN_HEXIC, HX_CUDA_ATTN_CUDNN };
enum hx_strategy { HX_STRAT_AUTO, HX_STRAT_HEXISCALE, HX_STRAT_SYMMETRIC, HX_STRAT_EXHAUSTIVE, HX_STRAT_HEXISEQ,
                   HX_STRAT_SUBSET };

struct hx_options {
  const char **inputs;
  int ninputs;
  const char *out_dir;    /* -o */
  bool check_only;        /* --check */
  bool print_ir;          /* --print-ir: dump after the last pass that ran */
  const char *print_after;/* --print-after=PASS */
  enum hx_target target;
  enum hx_transport transport; /* --transport */
  enum hx_cuda_attention cuda_attention; /* --cuda-attention */
  enum hx_strategy strategy;
  double search_budget_s; /* --search-budget: wall-clock cut, seconds */
  int64_t search_evals;   /* --search-evals: evaluations (0: the default) */
  int tau;                /* --tau: top-tau stage orders (0: the default) */
  const char *plan_file;  /* --plan=FILE: take the plan from a plan.json */
};

struct hx_ctx {
  struct hx_arena arena;
  struct hx_options opt;
  struct hx_source *sources;
  int nsources;
  struct hx_ast ast;
  bool has_model, has_train;
  struct hx_model model;
  struct hx_train train;
  struct hx_cluster cluster;
  struct hx_plan *plan;     /* the chosen plan */
  struct hx_plan *baseline; /* the best symmetric plan, or NULL if none fits */
  /* the best symmetric plan on any subset of the devices the baseline pass
   * enumerates (passes/baseline.c), the whole cluster included; NULL if none */
  struct hx_plan *baseline_subset;
  /* Set by a pass that fails for a reason its entry in the pass list does not
   * cover (e.g. emit refusing a plan it cannot generate code for: exit 2). */
  enum hx_exit exit_code;
};

#endif
