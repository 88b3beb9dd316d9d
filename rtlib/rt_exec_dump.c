/* --dump-weights FILE: the full, unsharded parameters after training, for
 * comparing any plan with one device.
 *
 * Every rank sends rank 0 the pieces it owns — one copy of each element over
 * the world, rt_for_each_owned's rule (ranks outside pipeline 0 send none) —
 * as records (tensor, layer, rows [r0, r1), columns [c0, c1)) plus the packed
 * values. Rank 0 places them into the model, checks that every element was
 * written exactly once, and writes FILE: the tensors in docs/model-spec.md's
 * order, each full and row-major, as raw little-endian float32, nothing else. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_exec_internal.h"
#include "rt_init.h"
#include "rt_log.h"

enum { REC_INTS = 6 }; /* tensor, layer, r0, r1, c0, c1 */

struct pieces {
  const float *weights; /* the rank's flat parameter buffer */
  int nrec, cap_rec;
  int *rec;
  long nfloats, cap_floats;
  float *vals;
};

/* rt_for_each_owned's visitor: one record and its values. */
static void add_piece(void *arg, const struct rt_piece *piece) {
  struct pieces *p = arg;
  long n = (piece->r1 - piece->r0) * (piece->c1 - piece->c0);
  if (n <= 0)
    return;
  if (p->nrec == p->cap_rec) {
    p->cap_rec = p->cap_rec ? 2 * p->cap_rec : 64;
    p->rec = realloc(p->rec, (size_t)p->cap_rec * REC_INTS * sizeof(int));
  }
  if (p->nfloats + n > p->cap_floats) {
    p->cap_floats = 2 * (p->nfloats + n);
    p->vals = realloc(p->vals, (size_t)p->cap_floats * sizeof(float));
  }
  if (!p->rec || !p->vals)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "out of memory gathering the weights");
  int *r = p->rec + (size_t)p->nrec++ * REC_INTS;
  r[0] = (int)piece->t, r[1] = piece->layer, r[2] = (int)piece->r0, r[3] = (int)piece->r1,
  r[4] = (int)piece->c0, r[5] = (int)piece->c1;
  memcpy(p->vals + p->nfloats, p->weights + piece->off, (size_t)n * sizeof(float));
  p->nfloats += n;
}

/* Offset of tensor t of layer l in the full model, spec order. */
static long full_offset(const struct hxk_dims *d, bool tied, enum hxk_param t, int layer,
                        long *total) {
  long off = 0, rows, cols, found = -1;
  hxk_param_shape(d, HXK_TOK_EMB, &rows, &cols);
  if (t == HXK_TOK_EMB)
    found = off;
  off += rows * cols;
  for (int l = 0; l < d->layers; l++)
    for (int k = 0; k < HXK_LAYER_NPARAMS; k++) {
      if ((int)t == k && l == layer)
        found = off;
      hxk_param_shape(d, (enum hxk_param)k, &rows, &cols);
      off += rows * cols;
    }
  if (t == HXK_FINAL_NORM)
    found = off;
  off += d->dim;
  if (!tied) {
    if (t == HXK_LM_HEAD)
      found = off;
    off += (long)d->vocab * d->dim;
  }
  *total = off;
  return found;
}

/* Rank 0: writes every record's values into the full model; counts how often
 * each element was written. */
static void place(const struct rt_exec *e, const int *rec, int nrec, const float *vals,
                  float *model, unsigned char *hits) {
  bool tied = e->cfg->model->tie_embeddings != 0;
  for (int i = 0; i < nrec; i++, rec += REC_INTS) {
    long total, rows, cols;
    enum hxk_param t = (enum hxk_param)rec[0];
    long base = full_offset(&e->dims, tied, t, rec[1], &total);
    hxk_param_shape(&e->dims, t, &rows, &cols);
    if (base < 0 || rec[3] > rows || rec[5] > cols)
      hx_rt_fatal(HX_RT_EXIT_ERROR, "internal: weight dump record %d out of range", i);
    for (long r = rec[2]; r < rec[3]; r++)
      for (long c = rec[4]; c < rec[5]; c++) {
        model[base + r * cols + c] = *vals++;
        hits[base + r * cols + c]++;
      }
  }
}

static void write_model(const char *path, const float *model, const unsigned char *hits, long n) {
  for (long i = 0; i < n; i++)
    if (hits[i] != 1)
      hx_rt_fatal(HX_RT_EXIT_ERROR,
                  "internal: weight dump element %ld was written %d times (want once)", i,
                  hits[i]);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(model, sizeof(float), (size_t)n, f) != (size_t)n || fclose(f) != 0)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "cannot write the weights to '%s'", path);
}

static int *displacements(const int *counts, int n) {
  int *d = rt_calloc((size_t)n, sizeof(int));
  for (int i = 1; i < n; i++)
    d[i] = d[i - 1] + counts[i - 1];
  return d;
}

void rt_dump_weights(const struct rt_exec *e, const char *path) {
  struct pieces mine = {.weights = e->p.w};
  rt_for_each_owned(e, add_piece, &mine);
  if (mine.nfloats > INT_MAX / 2)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--dump-weights is for small models (this rank holds %ld)",
                mine.nfloats);
  int world = e->cfg->world_size, root = e->cfg->rank == 0;
  int sizes[2] = {mine.nrec * REC_INTS, (int)mine.nfloats};
  int *all = rt_calloc((size_t)world * 2, sizeof(int));
  hx_rt_mpi_check(MPI_Gather(sizes, 2, MPI_INT, all, 2, MPI_INT, 0, MPI_COMM_WORLD),
                  "gather the weight dump sizes");
  int *rec_counts = rt_calloc((size_t)world, sizeof(int));
  int *val_counts = rt_calloc((size_t)world, sizeof(int));
  long recs = 0, nvals = 0;
  for (int r = 0; r < world; r++) {
    rec_counts[r] = all[2 * r];
    val_counts[r] = all[2 * r + 1];
    recs += rec_counts[r];
    nvals += val_counts[r];
  }
  /* MPI_Gatherv's displacements are int: the whole model must fit them. */
  if (recs > INT_MAX || nvals > INT_MAX)
    hx_rt_fatal(HX_RT_EXIT_ERROR, "--dump-weights is for small models (%ld floats in all)", nvals);
  int *rec_displ = displacements(rec_counts, world), *val_displ = displacements(val_counts, world);
  int *rec_all = rt_calloc((size_t)(root ? recs : 1), sizeof(int));
  float *val_all = rt_calloc((size_t)(root ? nvals : 1), sizeof(float));
  hx_rt_mpi_check(MPI_Gatherv(mine.rec, sizes[0], MPI_INT, rec_all, rec_counts, rec_displ, MPI_INT,
                              0, MPI_COMM_WORLD),
                  "gather the weight dump records");
  hx_rt_mpi_check(MPI_Gatherv(mine.vals, sizes[1], MPI_FLOAT, val_all, val_counts, val_displ,
                              MPI_FLOAT, 0, MPI_COMM_WORLD),
                  "gather the weights");
  if (root) {
    long total;
    full_offset(&e->dims, e->cfg->model->tie_embeddings != 0, HXK_TOK_EMB, 0, &total);
    float *model = rt_calloc((size_t)total, sizeof(float));
    unsigned char *hits = rt_calloc((size_t)total, 1);
    place(e, rec_all, (int)(recs / REC_INTS), val_all, model, hits);
    write_model(path, model, hits, total);
    hx_rt_log_banner("weights: %ld floats, unsharded, written to %s", total, path);
    free(model);
    free(hits);
  }
  free(mine.rec);
  free(mine.vals);
  free(all);
  free(rec_counts);
  free(val_counts);
  free(rec_displ);
  free(val_displ);
  free(rec_all);
  free(val_all);
}
