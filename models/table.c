/* models/table.c -- table-driven pricing of ops from measured profiles.
 *
 * Model
 * -----
 * An entry is a list of measured points (f_k, t_k, E_k), f ascending: the
 * mean duration (s) and energy (J) of one op (a pipeline computation or a
 * kernel) with the SM clock locked at f_k, as the Perseus/Zeus profilers
 * record them.  At a clock f:
 *
 *   f == f_k                 t = t_k, E = E_k                (measured)
 *   f_k < f < f_k+1          a = (f - f_k) / (f_k+1 - f_k)
 *                            t = (1-a) t_k + a t_k+1,  E likewise
 *   f < f_0 or f > f_max     TABLE_ERROR_RANGE (no extrapolation)
 *
 * The engine sees an op's reference duration ref_ns (its time at the
 * highest measured clock, set by the producer, traces/pipeline.c) and a
 * price
 *
 *   time_scale = t(f) / t(f_max)        power_w = E(f) / t(f)
 *
 * so a kernel of ref_ns lasts ref_ns * time_scale = t(f) (to the ns) and
 * costs power_w * t(f) = E(f): the engine's energy of a table-priced op is
 * its measured energy.  Idle and blocked power are the machine's, as for
 * analytic ops.
 *
 * Power limit.  A measured profile already contains the measuring GPU's own
 * power behaviour, so no cap is applied unless the caller passes a limit
 * (an explicit power_limit_w).  Then an op whose mean power E(f)/t(f)
 * exceeds the limit runs at the highest measured clock below f that fits,
 * or at the lowest measured clock when none fits (as gpu_kernel_cost does
 * with sm_min).  This is the mean-power view of a cap: real caps act on
 * ~100 ms windows, longer than most computations here.
 *
 * Serialisation.  The text form (price_table_to_string) prints doubles
 * with %.17g, so a table survives the round trip bit for bit; a workload
 * carries it in its provenance (price_table_attach).  Identical entries
 * are stored once (stages 0-6 of a GPT-3 profile are the same op), which
 * keeps the text of an 8-stage, 60-clock profile near 10 kB.
 *
 * Known limits
 * ------------
 * - One clock dimension: memory clocks are not part of an entry (the
 *   Perseus profiles fix them); callers that have several memory clocks
 *   build one table per memory clock.
 * - Linear interpolation between measured clocks: the profiles are measured
 *   every 15 MHz, where time and energy are smooth to well under 1%.
 * - Measured noise is kept as measured: a profile may be non-monotone in
 *   time between adjacent clocks; planners prune such dominated points.
 */
#include "models/table.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(table-error-quark, table_error)

typedef struct {
  char *name;
  TablePoint *pts;   /* n, ascending by sm_mhz */
  guint n;
} Entry;

struct PriceTable {
  GPtrArray *entries;  /* Entry* */
  GArray *shape_map;   /* gint32 per shape: entry or -1 */
};

static void entry_free(gpointer p)
{
  Entry *e = p;
  g_free(e->name);
  g_free(e->pts);
  g_free(e);
}

PriceTable *price_table_new(void)
{
  PriceTable *t = g_new0(PriceTable, 1);
  t->entries = g_ptr_array_new_with_free_func(entry_free);
  t->shape_map = g_array_new(FALSE, FALSE, sizeof(gint32));
  return t;
}

void price_table_free(PriceTable *t)
{
  if (t == NULL)
    return;
  g_ptr_array_unref(t->entries);
  g_array_unref(t->shape_map);
  g_free(t);
}

static int cmp_point(const void *a, const void *b)
{
  guint x = ((const TablePoint *)a)->sm_mhz, y = ((const TablePoint *)b)->sm_mhz;
  return (x > y) - (x < y);
}

static gboolean same_points(const Entry *e, const TablePoint *p, guint n)
{
  if (e->n != n)
    return FALSE;
  for (guint i = 0; i < n; i++)
    if (e->pts[i].sm_mhz != p[i].sm_mhz || e->pts[i].time_s != p[i].time_s ||
        e->pts[i].energy_j != p[i].energy_j)
      return FALSE;
  return TRUE;
}

/* Returns TRUE and sets *entry; see the header for the refusals. */
gboolean price_table_add(PriceTable *t, const char *name,
                         const TablePoint *pts, guint n, guint *entry,
                         GError **error)
{
  g_return_val_if_fail(t != NULL && name != NULL && entry != NULL, FALSE);
  if (n == 0 || n > PRICE_TABLE_MAX_POINTS || pts == NULL) {
    g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                "price table entry '%s': %u points (must be 1..%u)", name, n,
                PRICE_TABLE_MAX_POINTS);
    return FALSE;
  }
  if (*name == '\0') {
    g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                "price table entry: empty name");
    return FALSE;
  }
  g_autofree TablePoint *p = g_memdup2(pts, sizeof(TablePoint) * n);
  qsort(p, n, sizeof(TablePoint), cmp_point);
  for (guint i = 0; i < n; i++) {
    if (p[i].sm_mhz == 0 || p[i].sm_mhz > G_MAXUINT16) {
      g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                  "price table entry '%s': clock %u MHz is out of range "
                  "1..%u", name, p[i].sm_mhz, (guint)G_MAXUINT16);
      return FALSE;
    }
    if (i > 0 && p[i].sm_mhz == p[i - 1].sm_mhz) {
      g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                  "price table entry '%s': clock %u MHz given twice", name,
                  p[i].sm_mhz);
      return FALSE;
    }
    if (!(isfinite(p[i].time_s) && p[i].time_s > 0.0 &&
          isfinite(p[i].energy_j) && p[i].energy_j > 0.0)) {
      g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                  "price table entry '%s' at %u MHz: time %g s and energy "
                  "%g J must be finite and > 0", name, p[i].sm_mhz,
                  p[i].time_s, p[i].energy_j);
      return FALSE;
    }
  }
  for (guint i = 0; i < t->entries->len; i++)
    if (same_points(g_ptr_array_index(t->entries, i), p, n)) {
      *entry = i;
      return TRUE;
    }
  if (t->entries->len >= PRICE_TABLE_MAX_ENTRIES) {
    g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                "price table: more than %u entries", PRICE_TABLE_MAX_ENTRIES);
    return FALSE;
  }
  Entry *e = g_new0(Entry, 1);
  /* Whitespace separates fields in the text form: keep names one token. */
  e->name = g_strdup(name);
  for (char *c = e->name; *c != '\0'; c++)
    if (g_ascii_isspace(*c))
      *c = '_';
  e->pts = g_steal_pointer(&p);
  e->n = n;
  g_ptr_array_add(t->entries, e);
  *entry = t->entries->len - 1;
  return TRUE;
}

gboolean price_table_map_shape(PriceTable *t, guint32 shape, guint entry,
                               GError **error)
{
  g_return_val_if_fail(t != NULL, FALSE);
  if (entry >= t->entries->len) {
    g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                "price table: shape %u mapped to entry %u, but there are %u "
                "entries", shape, entry, t->entries->len);
    return FALSE;
  }
  if (shape >= (1u << 28)) {
    g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                "price table: shape index %u is too large", shape);
    return FALSE;
  }
  while (t->shape_map->len <= shape) {
    gint32 none = -1;
    g_array_append_val(t->shape_map, none);
  }
  g_array_index(t->shape_map, gint32, shape) = (gint32)entry;
  return TRUE;
}

guint price_table_n_entries(const PriceTable *t)
{
  return t->entries->len;
}

gint price_table_shape_entry(const PriceTable *t, guint32 shape)
{
  if (t == NULL || shape >= t->shape_map->len)
    return -1;
  return g_array_index(t->shape_map, gint32, shape);
}

guint32 price_table_n_shapes(const PriceTable *t)
{
  return t->shape_map->len;
}

static const Entry *entry_at(const PriceTable *t, guint entry)
{
  g_return_val_if_fail(t != NULL && entry < t->entries->len, NULL);
  return g_ptr_array_index(t->entries, entry);
}

const char *price_table_entry_name(const PriceTable *t, guint entry)
{
  const Entry *e = entry_at(t, entry);
  return e != NULL ? e->name : NULL;
}

const TablePoint *price_table_points(const PriceTable *t, guint entry,
                                     guint *n)
{
  const Entry *e = entry_at(t, entry);
  *n = e != NULL ? e->n : 0;
  return e != NULL ? e->pts : NULL;
}

guint price_table_min_mhz(const PriceTable *t, guint entry)
{
  const Entry *e = entry_at(t, entry);
  return e != NULL ? e->pts[0].sm_mhz : 0;
}

guint price_table_max_mhz(const PriceTable *t, guint entry)
{
  const Entry *e = entry_at(t, entry);
  return e != NULL ? e->pts[e->n - 1].sm_mhz : 0;
}

/* Interpolates e at clock f, which must be inside [f_0, f_max]. */
static void interp(const Entry *e, guint f, double *time_s, double *energy_j)
{
  /* Binary search for the first point with clock >= f. */
  guint lo = 0, hi = e->n - 1;
  while (lo < hi) {
    guint mid = (lo + hi) / 2;
    if (e->pts[mid].sm_mhz < f)
      lo = mid + 1;
    else
      hi = mid;
  }
  const TablePoint *b = &e->pts[lo];
  if (b->sm_mhz == f || lo == 0) {
    *time_s = b->time_s;
    *energy_j = b->energy_j;
    return;
  }
  const TablePoint *a = &e->pts[lo - 1];
  double x = (double)(f - a->sm_mhz) / (double)(b->sm_mhz - a->sm_mhz);
  *time_s = (1.0 - x) * a->time_s + x * b->time_s;
  *energy_j = (1.0 - x) * a->energy_j + x * b->energy_j;
}

static gboolean range_error(const Entry *e, guint f, GError **error)
{
  g_set_error(error, TABLE_ERROR, TABLE_ERROR_RANGE,
              "'%s' is measured at %u..%u MHz only: %u MHz would be an "
              "extrapolation", e->name, e->pts[0].sm_mhz,
              e->pts[e->n - 1].sm_mhz, f);
  return FALSE;
}

gboolean price_table_at(const PriceTable *t, guint entry, guint sm_mhz,
                        double *time_s, double *energy_j, GError **error)
{
  const Entry *e = entry_at(t, entry);
  g_return_val_if_fail(e != NULL, FALSE);
  guint f = sm_mhz == 0 ? e->pts[e->n - 1].sm_mhz : sm_mhz;
  if (f < e->pts[0].sm_mhz || f > e->pts[e->n - 1].sm_mhz)
    return range_error(e, f, error);
  interp(e, f, time_s, energy_j);
  return TRUE;
}

gboolean price_table_cost(const PriceTable *t, guint entry, guint sm_mhz,
                          double power_limit_w, SimCost *out, GError **error)
{
  const Entry *e = entry_at(t, entry);
  g_return_val_if_fail(e != NULL && out != NULL, FALSE);
  guint fmin = e->pts[0].sm_mhz, fmax = e->pts[e->n - 1].sm_mhz;
  guint f = sm_mhz == 0 ? fmax : sm_mhz;
  gboolean ok = TRUE;
  if (f < fmin || f > fmax) {
    ok = range_error(e, f, error);
    f = f < fmin ? fmin : fmax;
  }
  double ts, ej;
  interp(e, f, &ts, &ej);
  if (power_limit_w > 0.0 && ej / ts > power_limit_w) {
    /* Highest measured clock below f that fits, else the lowest. */
    guint k = e->n;
    while (k > 0 && e->pts[k - 1].sm_mhz >= f)
      k--;
    while (k > 0 && e->pts[k - 1].energy_j / e->pts[k - 1].time_s >
                        power_limit_w)
      k--;
    const TablePoint *p = &e->pts[k > 0 ? k - 1 : 0];
    f = p->sm_mhz;
    ts = p->time_s;
    ej = p->energy_j;
  }
  out->time_scale = ts / e->pts[e->n - 1].time_s;
  out->power_w = ej / ts;
  out->sm_mhz = (guint16)f;
  out->mem_mhz = 0;
  return ok;
}

gboolean price_table_check_plan(const PriceTable *t, const SimWorkload *w,
                                const SimPlan *plan, GError **error)
{
  g_return_val_if_fail(t != NULL && w != NULL && plan != NULL, FALSE);
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    const guint16 *idx = plan->index != NULL && r < plan->n_ranks
                           ? plan->index[r]
                           : NULL;
    for (guint32 i = 0; i < rk->n_ops; i++) {
      const SimOp *op = &rk->ops[i];
      if (op->kind != SIM_OP_KERNEL)
        continue;
      gint e = price_table_shape_entry(t, op->shape);
      if (e < 0)
        continue;
      guint pi = idx != NULL ? idx[i] : 0;
      guint f = pi < plan->n_pairs ? plan->pairs[pi].sm_mhz : 0;
      const Entry *en = entry_at(t, (guint)e);
      if (f != 0 && (f < en->pts[0].sm_mhz || f > en->pts[en->n - 1].sm_mhz)) {
        g_set_error(error, TABLE_ERROR, TABLE_ERROR_RANGE,
                    "rank %u op %u ('%s'): the plan asks for %u MHz but '%s' "
                    "is measured at %u..%u MHz only", r, i,
                    sim_workload_name(w, op->name), f, en->name,
                    en->pts[0].sm_mhz, en->pts[en->n - 1].sm_mhz);
        return FALSE;
      }
    }
  }
  return TRUE;
}

/* ---- text form -------------------------------------------------------- */

char *price_table_to_string(const PriceTable *t)
{
  GString *s = g_string_new("price_table 1\n");
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (guint i = 0; i < t->entries->len; i++) {
    const Entry *e = g_ptr_array_index(t->entries, i);
    g_string_append_printf(s, "entry %s %u", e->name, e->n);
    for (guint k = 0; k < e->n; k++) {
      g_string_append_printf(s, " %u", e->pts[k].sm_mhz);
      g_string_append_c(s, ' ');
      g_string_append(s, g_ascii_formatd(buf, sizeof buf, "%.17g",
                                         e->pts[k].time_s));
      g_string_append_c(s, ' ');
      g_string_append(s, g_ascii_formatd(buf, sizeof buf, "%.17g",
                                         e->pts[k].energy_j));
    }
    g_string_append_c(s, '\n');
  }
  for (guint32 sh = 0; sh < t->shape_map->len; sh++) {
    gint32 e = g_array_index(t->shape_map, gint32, sh);
    if (e >= 0)
      g_string_append_printf(s, "shape %u %d\n", sh, e);
  }
  return g_string_free(s, FALSE);
}

/* Parses an unsigned integer token in [0, max]. */
static gboolean tok_uint(const char *tok, guint64 max, guint64 *out)
{
  if (tok == NULL || !g_ascii_isdigit(*tok))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(tok, &end, 10);
  if (errno != 0 || *end != '\0' || v > max)
    return FALSE;
  *out = v;
  return TRUE;
}

static gboolean tok_double(const char *tok, double *out)
{
  if (tok == NULL || *tok == '\0')
    return FALSE;
  char *end = NULL;
  errno = 0;
  double v = g_ascii_strtod(tok, &end);
  if (errno != 0 || *end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

static gboolean parse_fail(guint line, const char *what, GError **error)
{
  g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
              "price table text, line %u: %s", line, what);
  return FALSE;
}

/* Parses one "entry" or "shape" line (tokens after the keyword). */
static gboolean parse_line(PriceTable *t, char **tok, guint line,
                           GError **error)
{
  guint64 v, n;
  if (strcmp(tok[0], "entry") == 0) {
    if (tok[1] == NULL || !tok_uint(tok[2], PRICE_TABLE_MAX_POINTS, &n) ||
        n == 0)
      return parse_fail(line, "expected 'entry NAME N' with N in 1..4096",
                        error);
    g_autofree TablePoint *p = g_new0(TablePoint, n);
    for (guint k = 0; k < n; k++) {
      char **f = tok + 3 + 3 * k;
      /* Stop at the terminating NULL before reading past it. */
      if (f[0] == NULL || f[1] == NULL || f[2] == NULL ||
          !tok_uint(f[0], G_MAXUINT16, &v) ||
          !tok_double(f[1], &p[k].time_s) ||
          !tok_double(f[2], &p[k].energy_j))
        return parse_fail(line, "expected N triples 'mhz time energy'",
                          error);
      p[k].sm_mhz = (guint)v;
    }
    if (tok[3 + 3 * n] != NULL)
      return parse_fail(line, "extra fields after the last point", error);
    guint e;
    GError *err = NULL;
    if (!price_table_add(t, tok[1], p, (guint)n, &e, &err)) {
      g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                  "price table text, line %u: %s", line, err->message);
      g_error_free(err);
      return FALSE;
    }
    if (e != t->entries->len - 1)
      return parse_fail(line, "duplicate entry", error);
    return TRUE;
  }
  if (strcmp(tok[0], "shape") == 0) {
    guint64 sh;
    if (!tok_uint(tok[1], (1u << 28) - 1, &sh) ||
        !tok_uint(tok[2], G_MAXUINT32, &v) || tok[3] != NULL)
      return parse_fail(line, "expected 'shape SHAPE ENTRY'", error);
    GError *err = NULL;
    if (!price_table_map_shape(t, (guint32)sh, (guint)v, &err)) {
      g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                  "price table text, line %u: %s", line, err->message);
      g_error_free(err);
      return FALSE;
    }
    return TRUE;
  }
  return parse_fail(line, "unknown record (expected 'entry' or 'shape')",
                    error);
}

PriceTable *price_table_from_string(const char *s, GError **error)
{
  g_return_val_if_fail(s != NULL, NULL);
  g_auto(GStrv) lines = g_strsplit(s, "\n", -1);
  g_autoptr(PriceTable) t = price_table_new();
  gboolean header = FALSE;
  for (guint i = 0; lines[i] != NULL; i++) {
    g_auto(GStrv) tok = g_strsplit_set(g_strstrip(lines[i]), " \t", -1);
    /* Drop empty tokens from repeated separators. */
    guint k = 0;
    for (guint j = 0; tok[j] != NULL; j++) {
      if (*tok[j] == '\0') {
        g_free(tok[j]);
        continue;
      }
      tok[k++] = tok[j];
    }
    tok[k] = NULL;
    if (k == 0)
      continue;
    if (!header) {
      if (k != 2 || strcmp(tok[0], "price_table") != 0 ||
          strcmp(tok[1], "1") != 0) {
        parse_fail(i + 1, "expected the header 'price_table 1'", error);
        return NULL;
      }
      header = TRUE;
      continue;
    }
    if (!parse_line(t, tok, i + 1, error))
      return NULL;
  }
  if (!header) {
    parse_fail(1, "empty text (expected the header 'price_table 1')", error);
    return NULL;
  }
  return g_steal_pointer(&t);
}

void price_table_attach(const PriceTable *t, SimWorkload *w)
{
  g_return_if_fail(t != NULL && w != NULL && w->provenance != NULL);
  g_hash_table_replace(w->provenance, g_strdup(PRICE_TABLE_PROVENANCE_KEY),
                       price_table_to_string(t));
}

PriceTable *price_table_from_workload(const SimWorkload *w, GError **error)
{
  g_return_val_if_fail(w != NULL, NULL);
  if (w->provenance == NULL)
    return NULL;
  const char *s = g_hash_table_lookup(w->provenance,
                                      PRICE_TABLE_PROVENANCE_KEY);
  if (s == NULL)
    return NULL;
  g_autoptr(PriceTable) t = price_table_from_string(s, error);
  if (t == NULL)
    return NULL;
  for (guint32 sh = 0; sh < t->shape_map->len; sh++) {
    if (g_array_index(t->shape_map, gint32, sh) < 0)
      continue;
    if (sh >= w->shapes->len) {
      g_set_error(error, TABLE_ERROR, TABLE_ERROR_INVALID,
                  "the workload's price table maps shape %u, but the "
                  "workload has %u shapes", sh, w->shapes->len);
      return NULL;
    }
  }
  return g_steal_pointer(&t);
}
