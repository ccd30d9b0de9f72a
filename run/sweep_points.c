/* run/sweep_points.c -- a sweep's points and rows: the canonical point
 * id, the point set (a grid's Cartesian product or a list), the seed of a
 * point, the check of a worker's row against its point, resume from an
 * existing results table, and writing the rows.
 *
 * Points.  A grid is the Cartesian product of its lists, keys in sorted
 * (byte) order, the last key varying fastest; a list is given point by
 * point.  Every point has the same keys; the first point fixes the keys'
 * types (the caller turns a key whose values mix integers and floats into
 * floats throughout, so its column has one type).
 *
 * Rows.  A row holds the point's keys (sorted), then run's row columns
 * (sorted), then trust (string, when the point ran js.simulate: the
 * weakest level of its runs, run/trust.h), fits (bool) and memory_gb
 * (float, when it simulated a js.gpt workload: the largest GPU memory per
 * rank its runs needed, and whether all fitted their GPU), point_id
 * (string) and error (string, "" on success).  A point whose layout
 * js.simulate refused for GPU memory is not a failure: its row has
 * fits = false, its memory_gb and defaults in the run's columns.  A
 * row may repeat a point's key only with the same value.  The first
 * successful row fixes the table's columns and types (io/results.h); a
 * later row that does not fit is recorded as a failure of its point.  A
 * failed point gets a row with its message in `error` and defaults in the
 * run's columns (NaN, 0, false, ""); error rows that arrive before the
 * first successful row are held until it fixes the columns (or, when no
 * point succeeds, written with the point's columns only).
 *
 * Resume.  The table is opened for writing first (which recovers what a
 * killed writer left); in mode "append" its rows are then read through
 * that handle and the points whose point_id it holds are skipped.  With retry_failed the error
 * rows of this sweep's points are first removed (res_table_filter,
 * crash-safe) and those points run again, so that every point ends up with
 * exactly one row.
 */
#include "run/sweep-private.h"
#include "sim/pcg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(js-sweep-error-quark, js_sweep_error)

/* ---- point identity ------------------------------------------------------- */

static int compare_values(gconstpointer a, gconstpointer b)
{
  return strcmp(((const ResValue *)a)->name, ((const ResValue *)b)->name);
}

static void append_quoted(GString *out, const char *s)
{
  g_string_append_c(out, '"');
  for (const guchar *p = (const guchar *)s; *p != '\0'; p++) {
    switch (*p) {
    case '"': g_string_append(out, "\\\""); break;
    case '\\': g_string_append(out, "\\\\"); break;
    case '\n': g_string_append(out, "\\n"); break;
    case '\t': g_string_append(out, "\\t"); break;
    case '\r': g_string_append(out, "\\r"); break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        g_string_append_printf(out, "\\u%04x", *p);
      else
        g_string_append_c(out, (char)*p);
    }
  }
  g_string_append_c(out, '"');
}

static gboolean plain_name(const char *s)
{
  if (!(g_ascii_isalpha(s[0]) || s[0] == '_'))
    return FALSE;
  for (const char *p = s; *p != '\0'; p++)
    if (!(g_ascii_isalnum(*p) || *p == '_' || *p == '.' || *p == '-'))
      return FALSE;
  return TRUE;
}

/* The shortest "%.Ng" of v that reads back as v, marked as a float. */
static void append_double(GString *out, double v)
{
  if (isnan(v)) {
    g_string_append(out, "nan");
    return;
  }
  if (isinf(v)) {
    g_string_append(out, v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (int prec = 1; prec <= 17; prec++) {
    char fmt[8];
    g_snprintf(fmt, sizeof fmt, "%%.%dg", prec);
    g_ascii_formatd(buf, sizeof buf, fmt, v);
    if (g_ascii_strtod(buf, NULL) == v)
      break;
  }
  g_string_append(out, buf);
  if (strpbrk(buf, ".eE") == NULL)
    g_string_append(out, ".0");
}

static void append_value(GString *out, const ResValue *v)
{
  switch (v->type) {
  case RES_INT:
    g_string_append_printf(out, "%" G_GINT64_FORMAT, v->i);
    break;
  case RES_FLOAT: append_double(out, v->f); break;
  case RES_BOOL: g_string_append(out, v->i ? "true" : "false"); break;
  case RES_STRING: append_quoted(out, v->s != NULL ? v->s : ""); break;
  }
}

char *js_sweep_point_id(const ResValue *values, guint n)
{
  g_return_val_if_fail(values != NULL || n == 0, NULL);
  g_autofree ResValue *sorted = g_memdup2(values, sizeof(ResValue) * n);
  if (n > 0)
    qsort(sorted, n, sizeof(ResValue), compare_values);
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < n; i++) {
    if (i > 0)
      g_string_append_c(out, ',');
    if (plain_name(sorted[i].name))
      g_string_append(out, sorted[i].name);
    else
      append_quoted(out, sorted[i].name);
    g_string_append_c(out, '=');
    append_value(out, &sorted[i]);
  }
  return g_string_free(out, FALSE);
}

/* Two values of the same key are the same value (2 and 2.0 are). */
static gboolean values_equal(const ResValue *a, const ResValue *b)
{
  gboolean an = a->type == RES_INT || a->type == RES_FLOAT;
  gboolean bn = b->type == RES_INT || b->type == RES_FLOAT;
  if (an && bn) {
    if (a->type == RES_INT && b->type == RES_INT)
      return a->i == b->i;
    double x = a->type == RES_INT ? (double)a->i : a->f;
    double y = b->type == RES_INT ? (double)b->i : b->f;
    return x == y || (isnan(x) && isnan(y));
  }
  if (a->type != b->type)
    return FALSE;
  if (a->type == RES_BOOL)
    return (a->i != 0) == (b->i != 0);
  return strcmp(a->s, b->s) == 0;
}

gboolean sweep_key_reserved(const char *k)
{
  static const char *const reserved[] = { "point_id", "error", "trust",
                                          "fits", "memory_gb", NULL };
  return g_strv_contains(reserved, k);
}

guint64 sweep_hash_id(const char *s)
{
  guint64 h = G_GUINT64_CONSTANT(0xcbf29ce484222325);
  for (const guchar *p = (const guchar *)s; *p != '\0'; p++) {
    h ^= *p;
    h *= G_GUINT64_CONSTANT(0x100000001b3);
  }
  return h;
}

guint64 sweep_point_seed(guint64 seed, const char *point_id)
{
  return sim_splitmix64_fin(seed ^
                            sim_splitmix64_fin(sweep_hash_id(point_id)));
}

/* ---- the points --------------------------------------------------------- */

static int compare_strs(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

SweepPoints *sweep_points_new(const char *const *keys, guint n)
{
  g_return_val_if_fail(keys != NULL || n == 0, NULL);
  for (guint k = 0; k < n; k++)
    g_return_val_if_fail(!sweep_key_reserved(keys[k]), NULL);
  SweepPoints *pts = g_new0(SweepPoints, 1);
  pts->strings = g_string_chunk_new(4096);
  pts->points = g_array_new(FALSE, TRUE, sizeof(SweepPoint));
  pts->n_keys = n;
  pts->keys = g_new0(char *, n + 1);
  pts->key_types = g_new0(ResType, n + 1);
  for (guint k = 0; k < n; k++)
    pts->keys[k] = g_string_chunk_insert_const(pts->strings, keys[k]);
  qsort(pts->keys, n, sizeof(char *), compare_strs);
  return pts;
}

void sweep_points_free(SweepPoints *pts)
{
  if (pts == NULL)
    return;
  for (guint i = 0; i < pts->points->len; i++)
    g_free(g_array_index(pts->points, SweepPoint, i).vals);
  g_array_unref(pts->points);
  g_free(pts->keys);
  g_free(pts->key_types);
  g_string_chunk_free(pts->strings);
  g_free(pts);
}

guint sweep_points_n_keys(const SweepPoints *pts)
{
  return pts->n_keys;
}

const char *sweep_points_key(const SweepPoints *pts, guint k)
{
  g_return_val_if_fail(k < pts->n_keys, NULL);
  return pts->keys[k];
}

guint sweep_points_len(const SweepPoints *pts)
{
  return pts->points->len;
}

const char *sweep_points_id(const SweepPoints *pts, guint i)
{
  g_return_val_if_fail(i < pts->points->len, NULL);
  return g_array_index(pts->points, SweepPoint, i).id;
}

void sweep_points_add(SweepPoints *pts, const ResValue *vals)
{
  SweepPoint p = { 0 };
  p.n = pts->n_keys;
  p.vals = g_memdup2(vals, sizeof(ResValue) * MAX(p.n, 1));
  for (guint k = 0; k < p.n; k++) {
    p.vals[k].name = pts->keys[k];
    if (p.vals[k].type == RES_STRING)
      p.vals[k].s = g_string_chunk_insert_const(pts->strings, p.vals[k].s);
  }
  g_autofree char *id = js_sweep_point_id(p.vals, p.n);
  p.id = g_string_chunk_insert_const(pts->strings, id);
  if (pts->points->len == 0)
    for (guint k = 0; k < p.n; k++)
      pts->key_types[k] = p.vals[k].type;
  g_array_append_val(pts->points, p);
}

void sweep_points_add_grid(SweepPoints *pts, const ResValue *const *lists,
                           const guint *lens)
{
  guint n = pts->n_keys;
  guint64 total = 1;
  for (guint k = 0; k < n; k++)
    total *= lens[k];
  g_return_if_fail(n > 0 && total <= SWEEP_MAX_POINTS);
  g_autofree guint *at = g_new0(guint, n);
  g_autofree ResValue *vals = g_new0(ResValue, n);
  for (guint64 p = 0; p < total; p++) {
    for (guint k = 0; k < n; k++)
      vals[k] = lists[k][at[k]];
    sweep_points_add(pts, vals);
    for (gint k = (gint)n - 1; k >= 0; k--) {
      if (++at[k] < lens[k])
        break;
      at[k] = 0;
    }
  }
}

gboolean sweep_points_check(const SweepPoints *pts, GError **error)
{
  g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < pts->points->len; i++) {
    const char *id = g_array_index(pts->points, SweepPoint, i).id;
    gpointer prev = NULL;
    if (g_hash_table_lookup_extended(ids, id, NULL, &prev)) {
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_POINTS,
                  "points %d and %d are the same point (%s); every point "
                  "must differ", GPOINTER_TO_INT(prev) + 1, (int)i + 1, id);
      return FALSE;
    }
    g_hash_table_insert(ids, (gpointer)id, GINT_TO_POINTER((int)i));
  }
  return TRUE;
}

/* ---- a worker's row ------------------------------------------------------- */

char *sweep_row_strip(const ResValue *pv, guint np, GArray *row)
{
  for (guint i = 0; i < row->len;) {
    ResValue *v = &g_array_index(row, ResValue, i);
    if (sweep_key_reserved(v->name))
      return g_strdup_printf("the row has a column '%s', which js.sweep "
                             "writes itself", v->name);
    const ResValue *same = NULL;
    for (guint k = 0; k < np && same == NULL; k++)
      if (strcmp(pv[k].name, v->name) == 0)
        same = &pv[k];
    if (same == NULL) {
      i++;
      continue;
    }
    if (!values_equal(v, same)) {
      g_autoptr(GString) a = g_string_new(NULL), b = g_string_new(NULL);
      append_value(a, v);
      append_value(b, same);
      return g_strdup_printf("the row sets '%s' = %s but the point has %s "
                             "(a row may repeat a point's value, not "
                             "change it)", v->name, a->str, b->str);
    }
    g_array_remove_index(row, i);
  }
  return NULL;
}

/* ---- resume ------------------------------------------------------------------ */

static const ResValue *row_cell(GPtrArray *row, const char *name)
{
  for (guint i = 0; i < row->len; i++) {
    const ResValue *v = g_ptr_array_index(row, i);
    if (strcmp(v->name, name) == 0)
      return v;
  }
  return NULL;
}

typedef struct {
  GHashTable *ids; /* point ids of this sweep whose error rows go */
} RetryFilter;

static gboolean keep_unless_retried(GPtrArray *row, gpointer data)
{
  RetryFilter *f = data;
  const ResValue *id = row_cell(row, "point_id");
  const ResValue *err = row_cell(row, "error");
  if (id == NULL || err == NULL || err->type != RES_STRING ||
      id->type != RES_STRING)
    return TRUE;
  return err->s[0] == '\0' || !g_hash_table_contains(f->ids, id->s);
}

/* Checks that rows (a table's, non-empty) come from a sweep of these
 * points' keys: string columns point_id and error, a column per key of
 * the key's type. */
static gboolean sweep_check_table(Sweep *sw, GPtrArray *rows, GError **error)
{
  GPtrArray *row0 = g_ptr_array_index(rows, 0);
  const ResValue *id = row_cell(row0, "point_id");
  const ResValue *e = row_cell(row0, "error");
  if (id == NULL || e == NULL || id->type != RES_STRING ||
      e->type != RES_STRING) {
    g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                "%s: table '%s' exists but was not written by js.sweep (no "
                "string columns 'point_id' and 'error'); use another table "
                "or mode = \"replace\"",
                sw->out, sw->table);
    return FALSE;
  }
  for (guint k = 0; k < sw->pts->n_keys; k++) {
    const ResValue *c = row_cell(row0, sw->pts->keys[k]);
    gboolean fits = c != NULL &&
                    (c->type == sw->pts->key_types[k] ||
                     (c->type == RES_FLOAT && sw->pts->key_types[k] == RES_INT));
    if (!fits) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: table '%s' holds another sweep: %s (use another "
                  "table or mode = \"replace\")",
                  sw->out, sw->table,
                  c == NULL ? "it has no column for the key" : "its column "
                  "has another type than the key");
      g_prefix_error(error, "key '%s': ", sw->pts->keys[k]);
      return FALSE;
    }
  }
  return TRUE;
}

/* Adds to done_ids (keys: the points' own ids) the points of this sweep
 * that rows hold; with retry_failed, a point whose row is an error row is
 * not done, and *retried counts those rows.  mine maps the sweep's point
 * ids to themselves. */
static gboolean sweep_mark_done(Sweep *sw, GPtrArray *rows, GHashTable *mine,
                                GHashTable *done_ids, guint *retried,
                                GError **error)
{
  *retried = 0;
  if (rows->len > 0 && !sweep_check_table(sw, rows, error))
    return FALSE;
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    const ResValue *id = row_cell(row, "point_id");
    const ResValue *e = row_cell(row, "error");
    /* `mine` maps an id to the point's own copy, the key of done_ids. */
    gpointer own = g_hash_table_lookup(mine, id->s);
    if (own == NULL)
      continue;
    if (sw->retry_failed && e->s[0] != '\0')
      (*retried)++;
    else
      g_hash_table_add(done_ids, own);
  }
  return TRUE;
}

/* Opens the sweep's table for writing into sw->t (res_table_open: in
 * append mode, this open is what recovers a row a killed writer left
 * half-recorded, see Durability in io/results.c). */
static gboolean sweep_open_table(Sweep *sw, GError **error)
{
  JsSession *s = sw->session;
  ResMeta meta = { JOULESIM_VERSION, s->scenario_path, s->scenario_source,
                   s->seed, s->run_id, s->run_started };
  sw->t = res_table_open(sw->out, sw->table, sw->mode, &meta, error);
  if (sw->t == NULL)
    return FALSE;
  sw->existing_rows = res_table_rows(sw->t);
  return TRUE;
}

/* The table cannot be opened for writing (open_err, taken over; a
 * read-only file system, say): the sweep still succeeds, writing nothing,
 * when the file read read-only already holds a row for every point.  A
 * read-only read may miss a last row that a writer's open would recover,
 * never show one that is not there, so "every point" read so is true. */
static gboolean sweep_resume_read_only(Sweep *sw, GHashTable *mine,
                                       GHashTable *done_ids, GError *open_err,
                                       GError **error)
{
  guint retried = 0;
  g_autoptr(GPtrArray) rows = NULL;
  if (sw->mode == RES_MODE_APPEND && g_file_test(sw->out, G_FILE_TEST_EXISTS))
    rows = res_table_read(sw->out, sw->table, NULL);
  if (rows != NULL &&
      sweep_mark_done(sw, rows, mine, done_ids, &retried, NULL) &&
      retried == 0 && g_hash_table_size(done_ids) == sweep_n_points(sw)) {
    g_error_free(open_err);
    sw->existing_rows = rows->len;
    return TRUE;
  }
  g_hash_table_remove_all(done_ids);
  g_propagate_error(error, open_err);
  return FALSE;
}

/* Opens the table for writing (sw->t) and, in append mode, marks the
 * points it holds as done; with retry_failed first removes this sweep's
 * error rows.  Checks that the table is a sweep table whose columns hold
 * the points' keys.  The done set is read through the writer's own
 * handle, after its open recovered what a kill left (a read-only read
 * before that open misses a last row the open then keeps, and the point
 * runs twice). */
gboolean sweep_resume(Sweep *sw, GHashTable *done_ids, GError **error)
{
  g_autoptr(GHashTable) mine = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < sweep_n_points(sw); i++)
    g_hash_table_add(mine, sweep_point(sw, i)->id);
  GError *err = NULL;
  if (!sweep_open_table(sw, &err))
    return sweep_resume_read_only(sw, mine, done_ids, err, error);
  if (sw->mode != RES_MODE_APPEND)
    return TRUE;
  g_autoptr(GPtrArray) rows = res_table_read_rows(sw->t, error);
  guint retried = 0;
  if (rows == NULL ||
      !sweep_mark_done(sw, rows, mine, done_ids, &retried, error))
    return FALSE;
  if (retried > 0) {
    /* res_table_filter rewrites the table, which must not be open in a
     * ResTable: close it, filter, open it again. */
    RetryFilter f = { mine };
    if (!res_table_close(g_steal_pointer(&sw->t), error) ||
        !res_table_filter(sw->out, sw->table, keep_unless_retried, &f, NULL,
                          error) ||
        !sweep_open_table(sw, error))
      return FALSE;
  }
  return TRUE;
}

/* ---- rows --------------------------------------------------------------------- */

/* Records a failure of point i for the summary and the exit status. */
static void sweep_note_failure(Sweep *sw, guint i, const char *message)
{
  sw->failed++;
  g_ptr_array_add(sw->failures, g_strdup(sweep_point(sw, i)->id));
  g_ptr_array_add(sw->failures, g_strdup(message));
}

/* Writes the error row of point i with the table's columns (which must be
 * fixed): the point's values, point_id, error, the n_extra values of
 * extra (borrowed) in their columns, defaults elsewhere. */
static gboolean sweep_write_row_with(Sweep *sw, guint i, const char *message,
                                     const ResValue *extra, guint n_extra,
                                     GError **error)
{
  const SweepPoint *p = sweep_point(sw, i);
  g_autofree char *msg = g_utf8_make_valid(message, -1);
  guint nc = res_table_n_columns(sw->t), n_vals = 0;
  g_autofree ResValue *row = g_new0(ResValue, MAX(nc, 1));
  for (guint c = 0; c < nc; c++) {
    /* The run's id is the table's to write (io/results.h, ResMeta). */
    if (strcmp(res_table_column_name(sw->t, c), RES_RUN_COLUMN) == 0)
      continue;
    ResValue *v = &row[n_vals++];
    v->name = res_table_column_name(sw->t, c);
    v->type = res_table_column_type(sw->t, c);
    const ResValue *pv = NULL;
    for (guint k = 0; k < p->n && pv == NULL; k++)
      if (strcmp(p->vals[k].name, v->name) == 0)
        pv = &p->vals[k];
    for (guint k = 0; k < n_extra && pv == NULL; k++)
      if (strcmp(extra[k].name, v->name) == 0)
        pv = &extra[k];
    if (pv != NULL) {
      *v = *pv;
    } else if (strcmp(v->name, "point_id") == 0) {
      v->s = p->id;
    } else if (strcmp(v->name, "error") == 0) {
      v->s = msg;
    } else {
      v->f = NAN; /* RES_FLOAT default; 0, false, "" for the others */
      v->s = "";
    }
  }
  return res_table_append(sw->t, row, n_vals, error);
}

static gboolean sweep_write_error_row(Sweep *sw, guint i, const char *message,
                                      GError **error)
{
  return sweep_write_row_with(sw, i, message, NULL, 0, error);
}

/* The sweep's own columns of an unfit point: fits = false, memory_gb. */
static void unfit_values(double memory_gb, ResValue *out)
{
  out[0] = (ResValue){.name = "fits", .type = RES_BOOL, .i = 0};
  out[1] = (ResValue){.name = "memory_gb", .type = RES_FLOAT, .f = memory_gb};
}

/* Writes the first rows of a table that only ever saw errors and unfit
 * points: the point's keys, fits and memory_gb (when pe is unfit),
 * point_id and error. */
static gboolean sweep_define_error_table(Sweep *sw, const SweepPending *pe,
                                         GError **error)
{
  const SweepPoint *p = sweep_point(sw, pe->index);
  g_autofree char *msg = g_utf8_make_valid(pe->message, -1);
  g_autofree ResValue *row = g_new0(ResValue, p->n + 4);
  memcpy(row, p->vals, sizeof(ResValue) * p->n);
  guint n = p->n;
  if (pe->memory_gb >= 0) {
    unfit_values(pe->memory_gb, row + n);
    n += 2;
  }
  row[n++] = (ResValue){ .name = "point_id", .type = RES_STRING, .s = p->id };
  row[n++] = (ResValue){ .name = "error", .type = RES_STRING, .s = msg };
  return res_table_append(sw->t, row, n, error);
}

static gboolean sweep_write_note(Sweep *sw, GError **error)
{
  return res_table_set_note(sw->t, "sweep_keys",
                            (const char *const *)sw->pts->keys, sw->pts->n_keys, error);
}

/* Point i failed with message: written now when the table has columns,
 * else held until the first good row.  FALSE only on an I/O error. */
gboolean sweep_failed_point(Sweep *sw, guint i, const char *message,
                                   GError **error)
{
  sweep_note_failure(sw, i, message);
  if (res_table_n_columns(sw->t) == 0) {
    SweepPending pe = { i, g_strdup(message), -1 };
    g_array_append_val(sw->pending, pe);
    return TRUE;
  }
  return sweep_write_error_row(sw, i, message, error);
}

/* Point i's layout did not fit its GPUs (vals: fits, memory_gb from the
 * worker): a row with defaults in the run's columns, written now when the
 * table has columns, else held like an error row.  FALSE only on an I/O
 * error. */
static gboolean sweep_unfit_point(Sweep *sw, guint i, const GArray *vals,
                                  GError **error)
{
  double gb = NAN;
  for (guint k = 0; k < vals->len; k++) {
    const ResValue *v = &g_array_index(vals, ResValue, k);
    if (strcmp(v->name, "memory_gb") == 0 && v->type == RES_FLOAT)
      gb = v->f;
  }
  if (!(gb >= 0))
    return sweep_failed_point(sw, i, "the worker's unfit reply has no "
                              "memory_gb", error);
  sw->done++;
  sw->unfit++;
  if (res_table_n_columns(sw->t) == 0) {
    SweepPending pe = { i, g_strdup(""), gb };
    g_array_append_val(sw->pending, pe);
    return TRUE;
  }
  ResValue extra[2];
  unfit_values(gb, extra);
  return sweep_write_row_with(sw, i, "", extra, 2, error);
}

gboolean sweep_take_result(Sweep *sw, guint i, const JsSweepMsg *msg,
                           GError **error)
{
  switch (msg->kind) {
  case JS_SWEEP_MSG_ROW:
    return sweep_good_row(sw, i, msg->values, error);
  case JS_SWEEP_MSG_UNFIT:
    return sweep_unfit_point(sw, i, msg->values, error);
  default:
    return sweep_failed_point(sw, i, msg->text, error);
  }
}

/* Writes the held rows once the table has columns (or, at the end of a
 * sweep where no point succeeded, defines it from the first unfit point,
 * else the first error, so that fits and memory_gb have their columns). */
gboolean sweep_flush_pending(Sweep *sw, GError **error)
{
  for (guint k = 1; k < sw->pending->len &&
                    res_table_n_columns(sw->t) == 0; k++)
    if (g_array_index(sw->pending, SweepPending, k).memory_gb >= 0 &&
        g_array_index(sw->pending, SweepPending, 0).memory_gb < 0) {
      SweepPending first = g_array_index(sw->pending, SweepPending, 0);
      g_array_index(sw->pending, SweepPending, 0) =
        g_array_index(sw->pending, SweepPending, k);
      g_array_index(sw->pending, SweepPending, k) = first;
    }
  for (guint k = 0; k < sw->pending->len; k++) {
    SweepPending *pe = &g_array_index(sw->pending, SweepPending, k);
    ResValue extra[2];
    unfit_values(pe->memory_gb, extra);
    gboolean ok = res_table_n_columns(sw->t) == 0
                    ? sweep_define_error_table(sw, pe, error) &&
                        sweep_write_note(sw, error)
                    : sweep_write_row_with(sw, pe->index, pe->message, extra,
                                           pe->memory_gb >= 0 ? 2 : 0,
                                           error);
    if (!ok)
      return FALSE;
    g_clear_pointer(&pe->message, g_free);
  }
  g_array_set_size(sw->pending, 0);
  return TRUE;
}

/* A column the sweep writes itself and only for some points (trust: the
 * weakest trust of the runs a point made, when it ran js.simulate; fits
 * and memory_gb, when it simulated a js.gpt workload) follows the table:
 * a table that was made without it (before the column existed, or by
 * points that made no such run) keeps its columns, and a point that made
 * none writes `def` into a table that has it.  row has room for n + 1;
 * returns the new n. */
static guint fit_own_column(Sweep *sw, ResValue *row, guint n,
                            const ResValue *def)
{
  guint nc = res_table_n_columns(sw->t);
  if (nc == 0)
    return n; /* this row fixes the columns */
  gboolean has_col = FALSE;
  for (guint c = 0; c < nc && !has_col; c++)
    has_col = strcmp(res_table_column_name(sw->t, c), def->name) == 0;
  for (guint k = 0; k < n; k++)
    if (strcmp(row[k].name, def->name) == 0) {
      if (has_col)
        return n;
      memmove(&row[k], &row[k + 1], sizeof(ResValue) * (n - k - 1));
      return n - 1;
    }
  if (has_col)
    row[n++] = *def;
  return n;
}

/* The sweep's own optional columns, with what a point that made no such
 * run writes: no trust, and a run that was not refused (fits) of unknown
 * size. */
static guint fit_own_columns(Sweep *sw, ResValue *row, guint n)
{
  static const ResValue defaults[] = {
    {.name = "trust", .type = RES_STRING, .s = ""},
    {.name = "fits", .type = RES_BOOL, .i = 1},
    {.name = "memory_gb", .type = RES_FLOAT, .f = NAN},
  };
  for (guint k = 0; k < G_N_ELEMENTS(defaults); k++)
    n = fit_own_column(sw, row, n, &defaults[k]);
  return n;
}

/* The row of point i from its worker (values sorted by name, without the
 * point's keys, then its trust).  A row that does not fit the table fails
 * the point. */
gboolean sweep_good_row(Sweep *sw, guint i, GArray *vals,
                               GError **error)
{
  const SweepPoint *p = sweep_point(sw, i);
  guint n = p->n + vals->len + 2;
  g_autofree ResValue *row = g_new0(ResValue, n + 3);
  memcpy(row, p->vals, sizeof(ResValue) * p->n);
  if (vals->len > 0)
    memcpy(row + p->n, vals->data, sizeof(ResValue) * vals->len);
  row[n - 2] = (ResValue){ .name = "point_id", .type = RES_STRING, .s = p->id };
  row[n - 1] = (ResValue){ .name = "error", .type = RES_STRING, .s = "" };
  n = fit_own_columns(sw, row, n);
  gboolean first = res_table_n_columns(sw->t) == 0;
  GError *err = NULL;
  if (!res_table_append(sw->t, row, n, &err)) {
    if (!g_error_matches(err, RES_ERROR, RES_ERROR_SCHEMA)) {
      g_propagate_error(error, err);
      return FALSE;
    }
    g_autofree char *m =
      g_strdup_printf("the row does not fit the table (its columns come from "
                      "the first row): %s", err->message);
    g_error_free(err);
    return sweep_failed_point(sw, i, m, error);
  }
  sw->done++;
  if (first && !sweep_write_note(sw, error))
    return FALSE;
  return sweep_flush_pending(sw, error);
}
