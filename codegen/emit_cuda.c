/* --target=cuda: the Makefile that builds a program set with nvcc, launch.sh's
 * GPU check, and the plan shapes the CUDA kernels refuse (the rank sources
 * are emit_rank.c's, with the GPU fields filled).
 *
 * What is fixed at compile time, and why not more: each rank_NNNN.c holds
 * its plan as literal constants (shapes, shards, peers, schedule), as for
 * the CPU; the kernels of kernels/cuda/ are compiled once per GPU
 * architecture of the plan (SASS for it, plus its PTX for newer GPUs) into
 * one library that every rank of that architecture links. The one shape the
 * kernels' code depends on, the head dimension, is a template parameter
 * there: the library holds each supported instantiation and the model's
 * picks one. The other shapes (token counts, hidden size, TP shard widths)
 * go to cuBLASLt, which chooses its algorithms per shape at start-up, and to
 * memory-bound element-wise kernels, where a constant width gains nothing;
 * compiling per shape would multiply nvcc's minutes by the number of
 * distinct shapes (every TP degree and layer split), so a 1024-rank plan
 * compiles one library per architecture, not 1024 variants. */
#include <string.h>

#include "emit_programs.h"
#include "escape.h"

#ifndef HEXIC_SOURCE_DIR
#error "HEXIC_SOURCE_DIR must name the hexic source tree (CMake defines it)"
#endif

/* Head dimensions the attention kernels are instantiated for, and the
 * widest row RMSNorm's backward takes (kernels/cuda/attention.cu,
 * rmsnorm.cu). */
static const int cuda_head_dims[] = {16, 32, 64, 128};
enum { CUDA_MAX_HIDDEN = 16384, CUDA_MIN_ARCH = 80 };

int hx_rank_cuda_arch(const struct program_set *set, int w) {
  const struct hx_cluster *c = &set->ctx->cluster;
  return c->gpus[c->devices[set->ranks[w].device].gpu_type].cuda_arch;
}

static bool head_dim_supported(int64_t hd) {
  for (size_t i = 0; i < sizeof cuda_head_dims / sizeof cuda_head_dims[0]; i++)
    if (cuda_head_dims[i] == hd)
      return true;
  return false;
}

/* Whether cuDNN maps a rank's query heads [begin, end) to their kv heads as
 * hexic does: cuDNN reads kv head i / (nq / nkv) for local query head i,
 * hexic (begin + i) / group - kv_begin. */
static bool cudnn_maps_heads(int begin, int end, int64_t group) {
  int nq = end - begin, kv_begin = (int)(begin / group), nkv = (int)((end - 1) / group) - kv_begin + 1;
  if (nq % nkv != 0)
    return false;
  for (int i = 0; i < nq; i++)
    if ((begin + i) / group - kv_begin != i / (nq / nkv))
      return false;
  return true;
}

/* --cuda-attention=cudnn: what cuDNN's fused attention takes
 * (rtlib/cuda/attention_cudnn.c's rt_cudnn_attention_refuses, which each
 * rank checks again at start): bf16, a head dim that is a multiple of 8 up
 * to 128, and TP shards whose query heads map to their kv heads as cuDNN's
 * GQA maps them. Refused here, where the plan is, rather than at every
 * rank's start. */
static bool cudnn_plan_supported(const struct program_set *set, int64_t hd) {
  const struct hx_ctx *ctx = set->ctx;
  const struct hx_model *m = &ctx->model;
  if (ctx->train.precision != HX_PREC_BF16) {
    hx_error_plain("--cuda-attention=cudnn: cuDNN's fused attention runs bf16 only; the train "
                   "block's precision is fp32 (set precision = bf16, or leave the option out)");
    return false;
  }
  if (hd % 8 != 0 || hd > 128) {
    hx_error_plain("--cuda-attention=cudnn: cuDNN's fused attention takes head dims that are "
                   "multiples of 8 up to 128; the model's is %lld",
                   (long long)hd);
    return false;
  }
  int64_t group = m->heads / m->kv_heads;
  for (int w = 0; w < set->nranks; w++) {
    const struct hx_prog_rank *r = &set->ranks[w];
    if (!r->head_bounds)
      continue;
    int begin = r->head_bounds[r->tp_rank], end = r->head_bounds[r->tp_rank + 1];
    if (!cudnn_maps_heads(begin, end, group)) {
      hx_error_plain("--cuda-attention=cudnn: rank %d holds query heads [%d, %d), which cut the "
                     "groups of %lld query heads sharing a kv head unevenly; cuDNN's GQA needs "
                     "as many query heads for each kv head (leave the option out for this plan)",
                     w, begin, end, (long long)group);
      return false;
    }
  }
  return true;
}

bool hx_cuda_plan_supported(const struct program_set *set) {
  const struct hx_model *m = &set->ctx->model;
  int64_t hd = m->hidden / m->heads;
  if (set->ctx->opt.cuda_attention == HX_CUDA_ATTN_CUDNN && !cudnn_plan_supported(set, hd))
    return false;
  if (!head_dim_supported(hd)) {
    hx_error_plain("the CUDA kernels run head dimensions 16, 32, 64 and 128; the model's "
                   "hidden/heads is %lld",
                   (long long)hd);
    return false;
  }
  if (m->hidden > CUDA_MAX_HIDDEN) {
    hx_error_plain("the CUDA kernels take hidden sizes up to %d; the model's is %lld",
                   CUDA_MAX_HIDDEN, (long long)m->hidden);
    return false;
  }
  for (int w = 0; w < set->nranks; w++) { /* sema refuses these for .hx inputs */
    int arch = hx_rank_cuda_arch(set, w);
    if (arch >= CUDA_MIN_ARCH)
      continue;
    if (arch == 0)
      hx_error_plain("rank %d: its GPU type has no known CUDA architecture (cuda_arch = NN in "
                     "its gpu block)",
                     w);
    else
      hx_error_plain("rank %d: its GPU is sm_%d; hexic's CUDA kernels need sm_%d or newer", w, arch,
                     CUDA_MIN_ARCH);
    return false;
  }
  return true;
}

/* The architectures of the plan's ranks, increasing, without repeats. */
static int plan_archs(const struct program_set *set, int *archs) {
  int n = 0;
  for (int w = 0; w < set->nranks; w++) {
    int a = hx_rank_cuda_arch(set, w), i = n;
    while (i > 0 && archs[i - 1] > a)
      i--;
    if (i > 0 && archs[i - 1] == a)
      continue;
    memmove(archs + i + 1, archs + i, (size_t)(n - i) * sizeof *archs);
    archs[i] = a;
    n++;
  }
  return n;
}

/* "# sm_89: RTX4090, L40S (ranks 2 to 3)": the GPU types of one
 * architecture, for the reader of the Makefile. */
static void emit_arch_comment(const struct program_set *set, FILE *f, int arch) {
  const struct hx_cluster *c = &set->ctx->cluster;
  fprintf(f, "# sm_%d:", arch);
  const char *sep = " ";
  for (int g = 0; g < c->ngpus; g++) {
    bool used = false;
    for (int w = 0; w < set->nranks && !used; w++)
      used = c->devices[set->ranks[w].device].gpu_type == g;
    if (used && c->gpus[g].cuda_arch == arch) {
      fprintf(f, "%s%s", sep, hx_esc_make(hx_prog_arena(set), c->gpus[g].name));
      sep = ", ";
    }
  }
  fputc('\n', f);
}

static void emit_rank_lists(const struct program_set *set, FILE *f, const int *archs, int narchs) {
  fputs("# Ranks by the architecture of their GPU.\n", f);
  for (int i = 0; i < narchs; i++) {
    fprintf(f, "RANKS_SM%d =", archs[i]);
    for (int w = 0; w < set->nranks; w++)
      if (hx_rank_cuda_arch(set, w) == archs[i])
        fprintf(f, " rank_%04d", w);
    fputc('\n', f);
  }
  fputs("RANKS =", f);
  for (int i = 0; i < narchs; i++)
    fprintf(f, " $(RANKS_SM%d)", archs[i]);
  fputs("\nCUDA_LIBS =", f);
  for (int i = 0; i < narchs; i++)
    fprintf(f, " libhexic_cuda_sm%d.a", archs[i]);
  fputs("\n\n", f);
}

/* Where this hexic's build found NCCL (CMake's HEXIC_NCCL_*_DIR); without
 * it the programs default to the staged MPI transport. */
#ifdef HEXIC_NCCL_INCLUDE_DIR
#define NCCL_FOUND 1
#else
#define NCCL_FOUND 0
#endif

/* NCCL_INCLUDE and NCCL_LIB: the build's paths (escaped for make), else
 * the toolkit's folders, as make text that make itself expands. */
static void emit_nccl_dirs(const struct program_set *set, FILE *f) {
#ifdef HEXIC_NCCL_INCLUDE_DIR
  struct hx_arena *a = hx_prog_arena(set);
  fprintf(f, "NCCL_INCLUDE ?= %s\nNCCL_LIB ?= %s\n", hx_esc_make(a, HEXIC_NCCL_INCLUDE_DIR),
          hx_esc_make(a, HEXIC_NCCL_LIBRARY_DIR));
#else
  (void)set;
  fputs("NCCL_INCLUDE ?= $(CUDA_HOME)/include\nNCCL_LIB ?= $(CUDA_HOME)/lib\n", f);
#endif
}

/* --transport, or NCCL when this hexic was built with it. */
static const char *default_transport(const struct program_set *set) {
  switch (set->ctx->opt.transport) {
  case HX_TRANSPORT_NCCL:
    return "nccl";
  case HX_TRANSPORT_MPI:
    return "mpi";
  case HX_TRANSPORT_AUTO:
    break;
  }
  return NCCL_FOUND ? "nccl" : "mpi";
}

/* The transport between GPUs (rtlib/cuda/transport_select.c) is chosen
 * when the runtime is built: TRANSPORT=nccl compiles transport_nccl.c
 * against NCCL and links it, TRANSPORT=mpi leaves NCCL out. A stamp in
 * obj/ makes a change of TRANSPORT rebuild the runtime. */
static void emit_transport_vars(const struct program_set *set, FILE *f) {
  fputs("# The transport between GPUs: nccl (one GPU per rank; ranks that find they\n"
        "# share a GPU fall back to MPI staged through host memory at start, saying so)\n"
        "# or mpi (the staged transport only; no NCCL needed). HEXIC_TRANSPORT=nccl|mpi\n"
        "# overrides the choice when the programs run.\n",
        f);
  fprintf(f, "TRANSPORT ?= %s\n", default_transport(set));
  emit_nccl_dirs(set, f);
  fputs("ifeq ($(TRANSPORT),nccl)\n"
        "CPPFLAGS += -DHEXIC_HAVE_NCCL -DHEXIC_TRANSPORT=\\\"nccl\\\" -I$(NCCL_INCLUDE)\n"
        "LDLIBS += -L$(NCCL_LIB) -Wl,-rpath,$(NCCL_LIB) -lnccl\n"
        "else ifeq ($(TRANSPORT),mpi)\n"
        "CPPFLAGS += -DHEXIC_TRANSPORT=\\\"mpi\\\"\n"
        "else\n"
        "$(error TRANSPORT=$(TRANSPORT): use nccl or mpi)\n"
        "endif\n"
        "TRANSPORT_STAMP = obj/transport.$(TRANSPORT)\n\n",
        f);
}

/* --cuda-attention: the attention the runtime is built with. ATTENTION=cudnn
 * compiles attention_cudnn.c's cuDNN part (-DHEXIC_ATTENTION_CUDNN) and
 * links libcudnn; hexic's kernels need neither. A stamp in obj/ makes a
 * change of ATTENTION rebuild the runtime. */
static void emit_attention_vars(const struct program_set *set, FILE *f) {
  fputs("# The layers' attention: hexic (its own kernels) or cudnn (cuDNN 9's fused\n"
        "# attention, bf16 only: include/cudnn.h under CUDNN_HOME, libcudnn.so in\n"
        "# CUDNN_LIB; tests/gpu checks it against hexic's kernels).\n",
        f);
  fprintf(f, "ATTENTION ?= %s\n",
          set->ctx->opt.cuda_attention == HX_CUDA_ATTN_CUDNN ? "cudnn" : "hexic");
  fputs("CUDNN_HOME ?= $(CUDA_HOME)\n"
        "CUDNN_LIB ?= $(CUDNN_HOME)/lib64\n"
        "ifeq ($(ATTENTION),cudnn)\n"
        "CPPFLAGS += -DHEXIC_ATTENTION_CUDNN -I$(CUDNN_HOME)/include\n"
        "LDLIBS += -L$(CUDNN_LIB) -Wl,-rpath,$(CUDNN_LIB) -lcudnn\n"
        "else ifneq ($(ATTENTION),hexic)\n"
        "$(error ATTENTION=$(ATTENTION): use hexic or cudnn)\n"
        "endif\n"
        "ATTENTION_STAMP = obj/attention.$(ATTENTION)\n\n",
        f);
}

static void emit_header(const struct program_set *set, FILE *f) {
  fputs("# Generated by hexic " HEXIC_VERSION " for --target=cuda; do not edit.\n"
        "# Builds the runtime (rtlib/, its CUDA backend rtlib/cuda/ and the CPU kernels it\n"
        "# shares) from HEXIC_HOME with mpicc into libhexic.a; the CUDA kernels\n"
        "# (kernels/cuda/) with nvcc once per GPU architecture of the plan into\n"
        "# libhexic_cuda_smNN.a; then one program per rank, linked against the library of\n"
        "# its GPU's architecture. Fixed at compile time: each rank's plan (the constants\n"
        "# of rank_NNNN.c) and its GPU's architecture (SASS for it and its PTX). The\n"
        "# kernels take the shapes as arguments (the head dimension picks one of their\n"
        "# compiled instantiations, cuBLASLt its algorithms per shape at start), so every\n"
        "# rank of an architecture shares one library. `make HEXIC_HOME=/path/to/hexic`\n"
        "# for another tree, `make CUDA_HOME=/path/to/cuda` for another CUDA 13 toolkit.\n",
        f);
  fprintf(f, "HEXIC_HOME ?= %s\n", hx_esc_make(hx_prog_arena(set), HEXIC_SOURCE_DIR));
  fputs("CUDA_HOME ?= /usr/local/cuda\n"
        "CC = mpicc\n"
        "NVCC = $(CUDA_HOME)/bin/nvcc\n"
        "CFLAGS ?= -O2\n"
        "NVCCFLAGS ?= -O3\n"
        "WARNINGS = -Wall -Wextra -Werror\n"
        "# nvcc's flags as the top-level CMakeLists.txt compiles hexic_kernels_cuda.\n"
        "NVCC_WARNINGS = --Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror\n"
        "BLAS_INCLUDE ?= -I/usr/include/x86_64-linux-gnu/openblas-pthread\n"
        "CPPFLAGS += -I$(HEXIC_HOME) -I$(HEXIC_HOME)/rtlib $(BLAS_INCLUDE) -I$(CUDA_HOME)/include\n"
        "CUDA_LIB = $(CUDA_HOME)/lib64\n"
        "LDLIBS = -L$(CUDA_LIB) -Wl,-rpath,$(CUDA_LIB) -lcublasLt -lcudart -lstdc++ \\\n"
        "         -lopenblas -lm -lpthread\n"
        "ALL_CFLAGS = -std=gnu11 $(CFLAGS) $(WARNINGS)\n"
        "ALL_NVCCFLAGS = -std=c++17 $(NVCCFLAGS) $(NVCC_WARNINGS) -I$(HEXIC_HOME)\n\n",
        f);
  emit_transport_vars(set, f);
  emit_attention_vars(set, f);
}

/* The runtime, its CUDA backend and the CPU kernels: one archive, as for
 * --target=cpu but with rtlib/cuda/ in place of rtlib/cpu/. */
static void emit_runtime_rules(FILE *f) {
  fputs("RT_SOURCES = $(wildcard $(HEXIC_HOME)/rtlib/*.c)\n"
        "BACKEND_SOURCES = $(wildcard $(HEXIC_HOME)/rtlib/cuda/*.c)\n"
        "SEQ_SOURCES = $(wildcard $(HEXIC_HOME)/rtlib/seq/*.c)\n"
        "CKPT_SOURCES = $(wildcard $(HEXIC_HOME)/rtlib/ckpt/*.c)\n"
        "KERNEL_SOURCES = $(wildcard $(HEXIC_HOME)/kernels/cpu/*.c)\n"
        "CUDA_SOURCES = $(wildcard $(HEXIC_HOME)/kernels/cuda/*.cu)\n"
        "LIB_OBJECTS = $(patsubst $(HEXIC_HOME)/rtlib/%.c,obj/rtlib_%.o,$(RT_SOURCES)) \\\n"
        "              $(patsubst $(HEXIC_HOME)/rtlib/cuda/%.c,obj/cuda_%.o,$(BACKEND_SOURCES)) \\\n"
        "              $(patsubst $(HEXIC_HOME)/rtlib/seq/%.c,obj/seq_%.o,$(SEQ_SOURCES)) \\\n"
        "              $(patsubst $(HEXIC_HOME)/rtlib/ckpt/%.c,obj/ckpt_%.o,$(CKPT_SOURCES)) \\\n"
        "              $(patsubst $(HEXIC_HOME)/kernels/cpu/%.c,obj/kernels_%.o,$(KERNEL_SOURCES))\n"
        "LIB_HEADERS = $(wildcard $(HEXIC_HOME)/rtlib/*.h $(HEXIC_HOME)/rtlib/cuda/*.h \\\n"
        "                         $(HEXIC_HOME)/rtlib/seq/*.h $(HEXIC_HOME)/rtlib/ckpt/*.h \\\n"
        "                         $(HEXIC_HOME)/kernels/cpu/*.h $(HEXIC_HOME)/kernels/cuda/*.h)\n"
        "CUDA_HEADERS = $(wildcard $(HEXIC_HOME)/kernels/cuda/*.h $(HEXIC_HOME)/kernels/cuda/*.cuh \\\n"
        "                          $(HEXIC_HOME)/kernels/cpu/*.h)\n"
        "LIB_HEADERS += $(TRANSPORT_STAMP) $(ATTENTION_STAMP)\n\n"
        "all: $(RANKS)\n\n"
        "$(TRANSPORT_STAMP):\n"
        "\t@mkdir -p obj\n"
        "\trm -f obj/transport.*\n"
        "\ttouch $@\n\n"
        "$(ATTENTION_STAMP):\n"
        "\t@mkdir -p obj\n"
        "\trm -f obj/attention.*\n"
        "\ttouch $@\n\n",
        f);
  hx_emit_runtime_library_rules(f, "cuda");
}

/* One architecture: its kernel objects, its library, and its ranks. */
static void emit_arch_rules(const struct program_set *set, FILE *f, int arch) {
  emit_arch_comment(set, f, arch);
  fprintf(f,
          "obj/sm_%d/%%.o: $(HEXIC_HOME)/kernels/cuda/%%.cu $(CUDA_HEADERS)\n"
          "\t@mkdir -p obj/sm_%d\n"
          "\t$(NVCC) $(ALL_NVCCFLAGS) -gencode arch=compute_%d,code=sm_%d \\\n"
          "\t  -gencode arch=compute_%d,code=compute_%d -c $< -o $@\n\n"
          "libhexic_cuda_sm%d.a: $(patsubst $(HEXIC_HOME)/kernels/cuda/%%.cu,obj/sm_%d/%%.o,"
          "$(CUDA_SOURCES))\n"
          "\trm -f $@\n"
          "\tar rcs $@ $^\n\n"
          "$(RANKS_SM%d): %%: %%.c libhexic.a libhexic_cuda_sm%d.a $(LIB_HEADERS)\n"
          "\t$(CC) $(ALL_CFLAGS) $(CPPFLAGS) $< libhexic.a libhexic_cuda_sm%d.a $(LDLIBS) -o $@\n\n",
          arch, arch, arch, arch, arch, arch, arch, arch, arch, arch, arch);
}

void hx_emit_cuda_makefile(const struct program_set *set, FILE *f, int unused) {
  (void)unused;
  int *archs = HX_NEW_ARRAY(hx_prog_arena(set), int, set->nranks);
  int narchs = plan_archs(set, archs);
  emit_header(set, f);
  emit_rank_lists(set, f, archs, narchs);
  emit_runtime_rules(f);
  for (int i = 0; i < narchs; i++)
    emit_arch_rules(set, f, archs[i]);
  fputs("clean:\n"
        "\trm -rf obj libhexic.a $(CUDA_LIBS) $(RANKS)\n\n"
        ".PHONY: all clean\n",
        f);
}

/* The most ranks the plan puts on one node: GPUs a machine of it needs for
 * a GPU per rank. */
static int max_ranks_per_node(const struct program_set *set) {
  const struct hx_cluster *c = &set->ctx->cluster;
  int *count = HX_NEW_ARRAY(hx_prog_arena(set), int, c->nnodes > 0 ? c->nnodes : 1);
  int most = 0;
  for (int w = 0; w < set->nranks; w++) {
    int n = ++count[c->devices[set->ranks[w].device].node];
    if (n > most)
      most = n;
  }
  return most;
}

void hx_emit_launch_gpu_check(const struct program_set *set, FILE *f) {
  int per_machine = max_ranks_per_node(set);
  fprintf(f,
          "# GPUs (see the header): a warning when nvidia-smi is missing or this machine has\n"
          "# fewer GPUs than the ranks it runs: the plan's %d without --hostfile, else the most\n"
          "# the plan puts on one machine (%d). nvidia-smi failing (no driver) counts as no GPU.\n"
          "need=${#programs[@]}\n"
          "[ -z \"$hostfile\" ] || need=%d\n"
          "if ! command -v nvidia-smi >/dev/null 2>&1; then\n"
          "  echo \"launch.sh: warning: nvidia-smi not found: cannot count this machine's GPUs "
          "(a rank that finds none stops)\" >&2\n"
          "else\n"
          "  if gpu_names=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null); then\n"
          "    gpus=$(grep -c . <<<\"$gpu_names\")\n"
          "  else\n"
          "    gpus=0\n"
          "  fi\n"
          "  if [ -n \"${CUDA_VISIBLE_DEVICES+set}\" ]; then\n"
          "    visible=$(tr ',' '\\n' <<<\"$CUDA_VISIBLE_DEVICES\" | grep -c .)\n"
          "    if [ \"$visible\" -lt \"$gpus\" ]; then gpus=$visible; fi\n"
          "  fi\n"
          "  if [ \"$gpus\" -eq 0 ]; then\n"
          "    echo \"launch.sh: warning: no usable GPU here (nvidia-smi): the ranks will stop\" >&2\n"
          "  elif [ \"$gpus\" -lt \"$need\" ]; then\n"
          "    echo \"launch.sh: warning: $need ranks share this machine's $gpus GPU(s): each takes "
          "GPU (local rank mod $gpus)\" >&2\n"
          "  fi\n"
          "fi\n",
          set->nranks, per_machine, per_machine);
}

/* The lines of launch.sh's header comment about GPUs. */
void hx_emit_launch_gpu_header(FILE *f) {
  fputs("# --target=cuda: every rank binds a GPU itself by its local rank on its machine\n"
        "# (GPU local rank mod the machine's GPU count; rtlib/cuda), so no CUDA_VISIBLE_DEVICES\n"
        "# is needed and ranks past a machine's GPUs share them. A rank warns when its GPU is\n"
        "# not the plan's type, and stops, naming itself, when there is no GPU or it lacks the\n"
        "# memory the plan assumed. This script warns when nvidia-smi is missing or lists\n"
        "# fewer GPUs than the ranks it starts here.\n",
        f);
}
