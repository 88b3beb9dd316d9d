/* Checkpoints: crash-safe save, verified resume, under this plan or any
 * other plan of the same model.
 *
 * Layout, in checkpoint_dir:
 *   step_00000010/rank_0000.ckpt  ...  rank_NNNN.ckpt   one per rank
 *   step_00000010/MANIFEST                                written last
 * A rank file (format 2) holds a header (magic, format version, rank, step,
 * data position, the plan fingerprint, tensor count) and, per tensor, its
 * element count and canonical identity (the spec's tensor id, the full
 * tensor's shape, the rows and columns held) then the parameters, AdamW m and
 * AdamW v (fp32, little-endian, the slice packed row-major).
 * The MANIFEST is text (format 3): step, the steps the learning-rate
 * schedule is laid over, ranks, the fingerprint of the plan that wrote it,
 * the model's shape, what the data order depends on, and per rank file its
 * size, FNV-1a 64 checksum and tensor index (per tensor: id, shape, slice and
 * the byte offset of its parameters in the file), closed by a checksum of
 * the manifest itself.
 *
 * Crash safety: every file is written to "<name>.tmp", fsync'ed, renamed over
 * <name>, and the directory fsync'ed. Rank files first; a barrier; then rank 0
 * gathers their checksums and indexes and writes the MANIFEST. A checkpoint
 * counts only when its MANIFEST is present, intact and matches every rank
 * file, so a kill at any moment leaves the previous complete checkpoint
 * usable. After a manifest lands, older step directories are deleted except
 * the newest complete one (the last 2 complete checkpoints are kept).
 *
 * Steps: a checkpoint's step is the number of optimizer steps completed, i.e.
 * the 0-based index of the next step to run. The executor saves after step s
 * when (s+1) % checkpoint_every == 0 and, on resume, restores parameters, m,
 * v and continues at the saved step, which reproduces the uninterrupted run
 * (data depend only on the step, the global batch and the sequence length;
 * nothing else is random).
 *
 * Another plan: resume takes the newest complete checkpoint whatever plan
 * wrote it. Under the same plan (fingerprint and world size) each rank reads
 * its own file back whole; under another, each rank reads exactly the rows
 * and columns of every tensor it holds from whichever rank files hold them
 * (through the manifest's index), after checking that the model's shape and
 * the data order's settings are the checkpoint's. */
#ifndef HX_RT_CKPT_H
#define HX_RT_CKPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <mpi.h>

/* One tensor (or shard of one) this rank owns, with its optimizer state. */
struct hx_rt_ckpt_tensor {
  float *param, *adam_m, *adam_v;
  int64_t n; /* elements in each */
  /* Canonical identity (docs/model-spec.md): the spec's tensor id, the full
   * tensor's [rows, cols] and the slice held, rows [r0, r1) x columns
   * [c0, c1), packed row-major, so n = (r1 - r0) * (c1 - c0). rows == 0:
   * none given; the tensor is then taken as id = its index, [1, n], whole. */
  uint64_t id;
  int64_t rows, cols, r0, r1, c0, c1;
};

/* What a rank saves and restores. */
struct hx_rt_ckpt_state {
  int64_t step;      /* steps completed = next step index */
  uint64_t data_pos; /* data/RNG position; 0 while batches depend on the step only */
  int ntensors;
  struct hx_rt_ckpt_tensor *tensors;
  int64_t schedule_steps; /* the run's --steps: its learning-rate schedule (MANIFEST) */
  /* One line each (NULL: empty): the model (shape, rope_theta, norm_eps:
   * hx_hf_model_line), and what the data order depends on. A checkpoint
   * whose lines differ is refused by resume, both lines named. A MANIFEST of
   * an older hexic, whose model line ends before " rope_theta ", is resumed
   * when it is this line up to there (the shape), with a note on stderr
   * that rope_theta and norm_eps could not be checked. */
  const char *model, *data;
  /* Set by resume: the ranks and plan fingerprint of the checkpoint loaded
   * (another plan's when `resharded`). */
  int source_ranks;
  bool resharded;
  char source_fingerprint[256];
  /* Set by the executor when the run resumed, at resumed_step: a damaged
   * checkpoint after it (resume skipped it) is never pruned by a save. */
  bool resumed;
  int64_t resumed_step;
};

/* FNV-1a 64 over bytes, continuing from h (start with HX_FNV64_INIT). */
#define HX_FNV64_INIT UINT64_C(0xcbf29ce484222325)
uint64_t hx_rt_fnv64(uint64_t h, const void *data, size_t n);

/* ---- Collective API (every rank of comm calls it) ---- */

/* Saves st (st->step names the checkpoint) into dir. Rank 0 creates dir and
 * the step directory. Returns true on every rank when the whole checkpoint
 * landed; false on every rank (with a message on the failing rank's stderr)
 * otherwise — the previous checkpoint is then still the newest complete one. */
bool hx_rt_ckpt_save(MPI_Comm comm, const char *dir, const char *fingerprint,
                     const struct hx_rt_ckpt_state *st);

/* Finds the newest complete checkpoint in dir, of any plan (rank 0 verifies
 * every file's checksum and that each tensor is where the MANIFEST's index
 * says, then broadcasts), and loads this rank's state into
 * st: under the plan that wrote it (same fingerprint and world size) its own
 * file, whole (tensor counts and sizes must match st's); under another plan
 * its ranges of every tensor from the files holding them. st->model and
 * st->data must equal the checkpoint's lines (another model, or another
 * data order, is refused). st->schedule_steps from the MANIFEST. Returns the
 * step restored, 0 when dir holds no checkpoint (st untouched: a fresh
 * start; step directories without a MANIFEST are interrupted writes), or -1
 * on every rank when loading failed or when checkpoints are there and none
 * verifies (the reasons on stderr). Skipped checkpoints (incomplete,
 * corrupt) are reported on stderr by rank 0. A MANIFEST whose line ends
 * became CRLF is read when its checksum holds over the LF text. */
int64_t hx_rt_ckpt_resume(MPI_Comm comm, const char *dir, const char *fingerprint,
                          struct hx_rt_ckpt_state *st);

/* Checks at start that every rank can write its files into dir, before the
 * first checkpoint needs it: rank 0 creates dir, then every rank creates and
 * removes a file there. Returns true on every rank, or false on every rank
 * with each failing rank's reason on its stderr. */
bool hx_rt_ckpt_check_dir(MPI_Comm comm, const char *dir);

/* ---- Single-process pieces (the collective API is built from these) ---- */

/* Before a run writes checkpoints into dir (rank 0): false, saying why
 * (dir, what differs, the ways out), when dir holds a checkpoint of another
 * run, i.e. whose MANIFEST records another model or data line than st's
 * (what resume compares; another plan of the same run is the same run). */
bool hx_rt_ckpt_check_owner(const char *dir, const struct hx_rt_ckpt_state *st, char *err,
                            size_t err_size);

/* Before a run writes its checkpoints of steps from+every, from+2*every, ...
 * up to `to` into dir: false, saying why, when one of those steps is a
 * checkpoint there (a MANIFEST) that does not verify: a checkpoint that
 * resume skipped is never written over unasked. */
bool hx_rt_ckpt_check_damaged(const char *dir, int64_t from, int64_t to, int64_t every, char *err,
                              size_t err_size);

/* Creates dir (when create; parents must exist), then creates and removes
 * dir/.hexic-write-test.rank_NNNN: false with the reason when either fails. */
bool hx_rt_ckpt_probe_dir(const char *dir, int rank, bool create, char *err, size_t err_size);

/* dir/step_%08d, dir/step_%08d/rank_%04d.ckpt and dir/step_%08d/MANIFEST. */
void hx_rt_ckpt_step_dir(char *buf, size_t size, const char *dir, int64_t step);
void hx_rt_ckpt_rank_path(char *buf, size_t size, const char *dir, int64_t step, int rank);
void hx_rt_ckpt_manifest_path(char *buf, size_t size, const char *dir, int64_t step);

/* Creates dir and dir/step_NNNNNNNN (parents of dir must exist) and removes a
 * stale MANIFEST left there by an earlier run, so the step directory is not
 * taken for complete while its rank files are being replaced. */
bool hx_rt_ckpt_prepare(const char *dir, int64_t step, char *err, size_t err_size);

/* One tensor of a rank file in the manifest's index: the canonical identity
 * and where its parameters start in the file (m and v follow, n floats each). */
enum { HX_RT_CKPT_INDEX_INTS = 8 }; /* id, rows, cols, r0, r1, c0, c1, offset */

/* Writes this rank's file atomically; returns its size and checksum, and
 * when index is not NULL st->ntensors index records (HX_RT_CKPT_INDEX_INTS
 * int64 each) into it. */
bool hx_rt_ckpt_write_rank(const char *dir, int rank, const char *fingerprint,
                           const struct hx_rt_ckpt_state *st, uint64_t *size_out,
                           uint64_t *checksum_out, int64_t *index, char *err, size_t err_size);

/* What the MANIFEST records besides the step: per rank (nranks) the file's
 * size, checksum, tensor count and index records (concatenated in rank
 * order; NULL with all counts 0 for files without canonical identities). */
struct hx_rt_ckpt_files {
  int nranks;
  const uint64_t *sizes, *checksums;
  const int *ntensors;
  const int64_t *index;
};

/* Writes the MANIFEST atomically, then deletes step directories older than
 * st->step except the newest complete one (and the damaged ones after
 * st->resumed_step when st->resumed). */
bool hx_rt_ckpt_write_manifest(const char *dir, const struct hx_rt_ckpt_state *st,
                               const char *fingerprint, const struct hx_rt_ckpt_files *files,
                               char *err, size_t err_size);

/* Verifies checkpoint `step`: manifest intact, same ranks and fingerprint,
 * every rank file present with the recorded size and checksum, and its
 * index the file's layout: per tensor, in file order, the identity the file
 * records in front of the data and the data's offset (a MANIFEST re-signed
 * after an edit of its index is refused, the tensor named). */
bool hx_rt_ckpt_verify(const char *dir, int64_t step, int nranks, const char *fingerprint,
                       char *err, size_t err_size);

/* The newest step in dir that hx_rt_ckpt_verify accepts, or -1 when none.
 * Each rejected step directory is described on `skipped` (may be NULL). */
int64_t hx_rt_ckpt_find_newest(const char *dir, int nranks, const char *fingerprint, FILE *skipped);

/* The same for any plan: manifest intact, every rank file it names present
 * with its recorded size and checksum, its index checked. */
bool hx_rt_ckpt_verify_complete(const char *dir, int64_t step, char *err, size_t err_size);
int64_t hx_rt_ckpt_find_newest_any(const char *dir, FILE *skipped);

/* Loads this rank's tensors (st's identities) from checkpoint `step` written
 * by any plan: the model and data lines must equal st's; every element of
 * every tensor is read from a rank file holding it (the manifest's index,
 * checked against the identity the file records in front of the data just
 * before reading), and one not found anywhere is an error naming the tensor (a tensor whose
 * adam_m and adam_v are NULL gets its parameters only). Sets st->step,
 * st->schedule_steps, st->source_ranks and st->source_fingerprint. */
bool hx_rt_ckpt_load_resharded(const char *dir, int64_t step, struct hx_rt_ckpt_state *st,
                               char *err, size_t err_size);

/* A checkpoint's MANIFEST as read (hexic-ckpt info and export). */
struct hx_rt_ckpt_info {
  int64_t step, schedule_steps;
  int nranks;
  char fingerprint[256], model[408], data[408];
  int *ntensors;  /* per rank file */
  int64_t *index; /* every rank file's index records, in rank order */
  int *fds;       /* the rank files hx_rt_ckpt_info_read opened (-1: not yet) */
};

/* Reads checkpoint `step` (-1: the newest, i.e. the newest step directory
 * with a MANIFEST) after verifying it as resume does: the MANIFEST intact,
 * every rank file's size and checksum, and every tensor where the index
 * says (the identity each rank file records in front of each tensor's
 * data). A newest checkpoint that does not verify is an error naming it,
 * why, and the newest that verifies (its --step): it is never passed over
 * for an older one unasked. */
bool hx_rt_ckpt_info_load(const char *dir, int64_t step, struct hx_rt_ckpt_info *info, char *err,
                          size_t err_size);
/* Reads t (its identity: the whole tensor or any slice; moments when
 * adam_m/adam_v are not NULL) from the checkpoint info_load read, through
 * the index parsed there (export: one MANIFEST parse for every tensor). */
bool hx_rt_ckpt_info_read(const char *dir, struct hx_rt_ckpt_info *info,
                          struct hx_rt_ckpt_tensor *t, char *err, size_t err_size);
void hx_rt_ckpt_info_free(struct hx_rt_ckpt_info *info);

/* The index of the first element of v[0, n) that is NaN or infinite, or -1. */
int64_t hx_rt_first_nonfinite(const float *v, int64_t n);

/* Sets the parameters of st's tensors (st's identities; moments untouched)
 * from a safetensors file of hexic's initial weights (hexic-ckpt import):
 * each tensor by its canonical name (hx_rt_ckpt_tensor_name) and full shape,
 * this rank's slice only. An absent tensor or another shape is an error
 * naming the file and the tensor; so is a NaN or infinite weight in the
 * slice (the first one's row, column and element index named), a file
 * holding another number of tensors than the model's model_tensors
 * (another model's weights: every rank finding its own tensors in it does
 * not show that), and a file whose recorded model line (import's
 * "hexic_model") is not st->model, both lines named. A line of an older
 * import, without rope_theta and norm_eps, is taken when its shape is
 * st->model's, with a note (rank 0) that those two could not be checked.
 * path may also be a Hugging Face model folder: its config.json is compared
 * with st->model field by field (the first difference named as config.json
 * names it), then each slice is read from model.safetensors.index.json's
 * shards or model.safetensors by Hugging Face's names, q_proj/k_proj rows
 * at their rotate_half places. */
bool hx_rt_ckpt_init_from(const char *path, int model_tensors, struct hx_rt_ckpt_state *st,
                          char *err, size_t err_size);

/* "layers.3.wq" style name of a spec tensor id (tok_emb, final_norm,
 * lm_head; layers.L.attn_norm ...), for messages. */
void hx_rt_ckpt_tensor_name(uint64_t id, char *buf, size_t size);

/* Reads this rank's file of checkpoint `step` into st: checks the header
 * (magic, rank, step, fingerprint), that the tensor counts and sizes match
 * st's, and the file's size and checksum against the MANIFEST. Sets st->step,
 * st->data_pos and st->schedule_steps; on failure st's buffers may be partly
 * overwritten. */
bool hx_rt_ckpt_load_rank(const char *dir, int64_t step, int rank, const char *fingerprint,
                          struct hx_rt_ckpt_state *st, char *err, size_t err_size);

#endif
