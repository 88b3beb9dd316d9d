#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "diag.h"

struct unit {
  const char *name;
  enum hx_unit_kind kind;
  double scale;
};

#define KIB 1024.0
static const struct unit units[] = {
    {"B", HX_UNIT_BYTES, 1},
    {"KB", HX_UNIT_BYTES, 1e3},
    {"MB", HX_UNIT_BYTES, 1e6},
    {"GB", HX_UNIT_BYTES, 1e9},
    {"TB", HX_UNIT_BYTES, 1e12},
    {"KiB", HX_UNIT_BYTES, KIB},
    {"MiB", HX_UNIT_BYTES, KIB * KIB},
    {"GiB", HX_UNIT_BYTES, KIB * KIB * KIB},
    {"TiB", HX_UNIT_BYTES, KIB * KIB * KIB * KIB},
    {"B/s", HX_UNIT_BANDWIDTH, 1},
    {"KB/s", HX_UNIT_BANDWIDTH, 1e3},
    {"MB/s", HX_UNIT_BANDWIDTH, 1e6},
    {"GB/s", HX_UNIT_BANDWIDTH, 1e9},
    {"TB/s", HX_UNIT_BANDWIDTH, 1e12},
    {"KiB/s", HX_UNIT_BANDWIDTH, KIB},
    {"MiB/s", HX_UNIT_BANDWIDTH, KIB * KIB},
    {"GiB/s", HX_UNIT_BANDWIDTH, KIB * KIB * KIB},
    {"TiB/s", HX_UNIT_BANDWIDTH, KIB * KIB * KIB * KIB},
    /* Network rates are quoted in bits: 8 bits to the byte. */
    {"bps", HX_UNIT_BANDWIDTH, 1.0 / 8},
    {"Kbps", HX_UNIT_BANDWIDTH, 1e3 / 8},
    {"Mbps", HX_UNIT_BANDWIDTH, 1e6 / 8},
    {"Gbps", HX_UNIT_BANDWIDTH, 1e9 / 8},
    {"Tbps", HX_UNIT_BANDWIDTH, 1e12 / 8},
    {"ns", HX_UNIT_TIME, 1e-9},
    {"us", HX_UNIT_TIME, 1e-6},
    {"ms", HX_UNIT_TIME, 1e-3},
    {"s", HX_UNIT_TIME, 1},
};
enum { NUNITS = sizeof units / sizeof units[0] };

bool hx_unit_lookup(const char *word, enum hx_unit_kind *kind, double *scale) {
  for (int i = 0; i < NUNITS; i++)
    if (!strcmp(word, units[i].name)) {
      *kind = units[i].kind;
      *scale = units[i].scale;
      return true;
    }
  return false;
}

const char *hx_unit_nearest(const char *word) {
  const char *names[NUNITS];
  for (int i = 0; i < NUNITS; i++)
    names[i] = units[i].name;
  /* Case slips ("gb/s", "GBps") are the common typo: try those first. */
  for (int i = 0; i < NUNITS; i++)
    if (!strcasecmp(word, names[i]))
      return names[i];
  return hx_nearest_name(word, names, NUNITS);
}

const char *hx_unit_kind_name(enum hx_unit_kind kind) {
  switch (kind) {
  case HX_UNIT_BYTES:
    return "size";
  case HX_UNIT_BANDWIDTH:
    return "bandwidth";
  case HX_UNIT_TIME:
    return "time";
  case HX_UNIT_NONE:
    break;
  }
  return "plain number";
}

const char *hx_unit_examples(enum hx_unit_kind kind) {
  switch (kind) {
  case HX_UNIT_BYTES:
    return "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";
  case HX_UNIT_BANDWIDTH:
    return "B/s, KB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s, bps, Kbps, Mbps, Gbps";
  case HX_UNIT_TIME:
    return "ns, us, ms, s";
  case HX_UNIT_NONE:
    break;
  }
  return "";
}

void hx_number_literal(const char *text, struct hx_value *v) {
  v->kind = HX_V_NUMBER;
  v->is_integer = !strpbrk(text, ".eE");
  errno = 0;
  v->number = strtod(text, NULL);
  /* ERANGE covers both inf and a non-zero literal that underflows to 0. */
  v->overflow = errno == ERANGE || !isfinite(v->number);
  if (v->is_integer) {
    errno = 0;
    long long i = strtoll(text, NULL, 10);
    if (errno == ERANGE) {
      v->overflow = true;
      v->is_integer = false;
    } else {
      v->integer = i;
    }
  }
}

void hx_apply_unit(struct hx_value *v, const char *unit_text, enum hx_unit_kind kind, double scale) {
  v->unit = kind;
  v->unit_text = unit_text;
  /* 20 us is 20 / 1e6 = 2e-05, the double nearest to what was written;
   * 20 * 1e-6 is 1.9999999999999998e-05, as 1e-6 is no double and 1e6 is.
   * A scale below 1 (ns, us, ms, bps) is the inverse of a whole number,
   * rounded back to it (1 / 1e-9 is 999999999.99999988). */
  double inverse = nearbyint(1 / scale);
  if (scale < 1 && fabs(1 / scale - inverse) <= 1e-9 * inverse)
    v->number /= inverse;
  else
    v->number *= scale;
  if (!isfinite(v->number))
    v->overflow = true;
}

const char *hx_bytes_text(struct hx_arena *a, double bytes) {
  double b = fabs(bytes);
  bool gib = b >= 1073741824.0;
  return hx_sprintf(a, "%.1f %s", b / (gib ? 1073741824.0 : 1048576.0), gib ? "GiB" : "MiB");
}
