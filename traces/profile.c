/* traces/profile.c -- measured time/energy profiles (DESIGN section 9).
 *
 * Data structure
 * --------------
 * A Profile is a list of ops (in order of first appearance in the file);
 * each op owns a sorted array of measured points (mem_mhz, sm_mhz) ->
 * (time_s, energy_j).  Invariants after a successful load: every op has at
 * least one point; points are sorted by (mem_mhz, sm_mhz) and no two share
 * both clocks; every time and energy is finite and > 0; op names are unique.
 *
 * CSV dialect
 * -----------
 * RFC 4180-ish: fields separated by ',', optionally enclosed in double
 * quotes (a doubled quote inside is a literal quote; kernel names with
 * template arguments contain commas), surrounding blanks trimmed, LF or CRLF
 * line ends.  Blank lines and lines whose first character is '#' are
 * skipped (but counted, so error line numbers match an editor's).  The
 * first other line is the header; column order is free, every column of the
 * form must be present exactly once, and any other column is an error.
 *
 * Interpolation (profile_op_at)
 * -----------------------------
 * Linear in the SM clock between the two measured clocks that bracket the
 * request, at the measured memory clock nearest the request.  A request
 * outside [lowest, highest] measured SM clock is PROFILE_ERROR_RANGE: the
 * caller must decide whether and how to extrapolate (models/fit.c fits a
 * model for that).
 *
 * The NVML sample loader is traces/profile_nvml.c.
 */
#include "traces/profile-private.h"
#include "traces/gpt.h"
#include "io/fault.h"
#include "io/input.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(profile-error-quark, profile_error)


/* ---------------------------------------------------------------------- */
/* Small CSV reader                                                        */

/* Reads the next non-blank, non-comment record into row (fields replaced).
 * Returns FALSE at end of input (error unset) or on a syntax error (error
 * set, naming the line). */
gboolean profile_csv_check_width(const CsvRow *row, guint n_cols,
                                 const char *path, GError **error)
{
  if (row->fields->len == n_cols)
    return TRUE;
  g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
              "%s:%u: %u columns, the header has %u", path, row->line,
              row->fields->len, n_cols);
  return FALSE;
}

gboolean profile_csv_next(CsvReader *r, CsvRow *row, GError **error)
{
  for (;;) {
    if (r->p >= r->end)
      return FALSE;
    /* Skip blank and comment lines. */
    const char *q = r->p;
    while (q < r->end && (*q == ' ' || *q == '\t'))
      q++;
    if (q >= r->end || *q == '\n' || *q == '\r' || *q == '#') {
      while (q < r->end && *q != '\n')
        q++;
      r->p = q < r->end ? q + 1 : q;
      r->line++;
      continue;
    }
    break;
  }

  g_ptr_array_set_size(row->fields, 0);
  row->line = r->line;
  g_autoptr(GString) field = g_string_new(NULL);
  for (;;) {
    /* One field: leading blanks, optional quoted part, trailing blanks. */
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t'))
      r->p++;
    g_string_truncate(field, 0);
    if (r->p < r->end && *r->p == '"') {
      guint start_line = r->line;
      r->p++;
      for (;;) {
        if (r->p >= r->end) {
          g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                      "%s:%u: unterminated quoted field", r->path,
                      start_line);
          return FALSE;
        }
        if (*r->p == '"') {
          if (r->p + 1 < r->end && r->p[1] == '"') {
            g_string_append_c(field, '"');
            r->p += 2;
            continue;
          }
          r->p++;
          break;
        }
        if (*r->p == '\n')
          r->line++;
        g_string_append_c(field, *r->p++);
      }
      while (r->p < r->end && (*r->p == ' ' || *r->p == '\t'))
        r->p++;
      if (r->p < r->end && *r->p != ',' && *r->p != '\n' && *r->p != '\r') {
        g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                    "%s:%u: column %u: text after a closing quote", r->path,
                    r->line, row->fields->len + 1);
        return FALSE;
      }
    } else {
      while (r->p < r->end && *r->p != ',' && *r->p != '\n' &&
             *r->p != '\r')
        g_string_append_c(field, *r->p++);
      /* Trim trailing blanks. */
      while (field->len > 0 && (field->str[field->len - 1] == ' ' ||
                                field->str[field->len - 1] == '\t'))
        g_string_truncate(field, field->len - 1);
    }
    /* Names end up in results files and reports: text only. */
    if (memchr(field->str, '\0', field->len) != NULL ||
        !g_utf8_validate(field->str, (gssize)field->len, NULL)) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u: %s", r->path, r->line,
                  row->fields->len + 1,
                  memchr(field->str, '\0', field->len) != NULL
                      ? "a NUL byte (not a text file?)"
                      : "not valid UTF-8 text");
      return FALSE;
    }
    g_ptr_array_add(row->fields, g_strdup(field->str));
    if (r->p < r->end && *r->p == ',') {
      r->p++;
      continue;
    }
    /* End of record. */
    if (r->p < r->end && *r->p == '\r')
      r->p++;
    if (r->p < r->end && *r->p == '\n')
      r->p++;
    r->line++;
    return TRUE;
  }
}


void profile_csv_row_init(CsvRow *row)
{
  row->fields = g_ptr_array_new_with_free_func(g_free);
  row->line = 0;
}

void profile_csv_row_clear(CsvRow *row)
{
  g_clear_pointer(&row->fields, g_ptr_array_unref);
}

/* The largest CSV file read (it is read whole, and its rows take about as
 * much again): a real profile is kilobytes, a day of nvidia-smi samples
 * at 10 ms some 100 MB.  Without it, a 1 GB sparse file is read whole (2 GB
 * resident) before it is found to hold NUL bytes. */
#define PROFILE_MAX_BYTES (256u << 20)

/* Reads `path` into *text (caller frees it) and its header record into row
 * (initialised here; on success the caller clears it); r reads the records
 * that follow; `what` names the file in the size error.  The file is opened once (io/input.h: a FIFO or a device is
 * refused, never waited on) and refused from its size when it is over
 * PROFILE_MAX_BYTES, before anything is read.  Errors: PROFILE_ERROR_IO, a
 * CSV syntax error, or PROFILE_ERROR_FORMAT for a file without a header
 * line. */
static gboolean csv_open_as(const char *path, const char *what,
                            char **text, CsvReader *r, CsvRow *row,
                            GError **error)
{
  gsize len = 0;
  GError *err = NULL;
  *text = NULL;
  IoInput in;
  if (!io_input_open(&in, path, "profile: open", PROFILE_ERROR,
                     PROFILE_ERROR_IO, error))
    return FALSE;
  gboolean read = io_input_read_all(&in, path, PROFILE_MAX_BYTES, what,
                                    "profile: read", PROFILE_ERROR,
                                    PROFILE_ERROR_IO, text, &len, error);
  io_input_close(&in);
  if (!read)
    return FALSE;
  r->path = path;
  r->p = *text;
  r->end = *text + len;
  r->line = 1;
  profile_csv_row_init(row);
  if (!profile_csv_next(r, row, &err)) {
    profile_csv_row_clear(row);
    if (err != NULL)
      g_propagate_error(error, err);
    else
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s: empty file (no header line)", path);
    return FALSE;
  }
  return TRUE;
}

gboolean profile_csv_open(const char *path, char **text, CsvReader *r,
                          CsvRow *row, GError **error)
{
  return csv_open_as(path, "a profile", text, r, row, error);
}

void profile_csv_table_free(CsvTable *t)
{
  if (t == NULL)
    return;
  g_ptr_array_unref(t->header);
  g_ptr_array_unref(t->records);
  g_array_unref(t->lines);
  g_free(t);
}

CsvTable *profile_csv_read(const char *path, GError **error)
{
  g_autofree char *text = NULL;
  CsvReader r;
  CsvRow row;
  if (!csv_open_as(path, "a CSV file", &text, &r, &row, error))
    return NULL;
  g_autoptr(CsvTable) t = g_new0(CsvTable, 1);
  t->header = g_steal_pointer(&row.fields);
  t->header_line = row.line;
  t->records = g_ptr_array_new_with_free_func(
      (GDestroyNotify)g_ptr_array_unref);
  t->lines = g_array_new(FALSE, FALSE, sizeof(guint));
  profile_csv_row_init(&row);
  GError *err = NULL;
  while (profile_csv_next(&r, &row, &err)) {
    if (!profile_csv_check_width(&row, t->header->len, path, &err))
      break;
    g_ptr_array_add(t->records, g_steal_pointer(&row.fields));
    g_array_append_val(t->lines, row.line);
    row.fields = g_ptr_array_new_with_free_func(g_free);
  }
  profile_csv_row_clear(&row);
  if (err != NULL) {
    g_propagate_error(error, err);
    return NULL;
  }
  return g_steal_pointer(&t);
}

/* ---------------------------------------------------------------------- */
/* Value parsing with located errors                                       */

/* Parses a finite number from s.  Errors (naming path:line, the column
 * number and name): empty, not a number, not finite. */
gboolean profile_parse_number(const char *path, guint line, guint col,
                              const char *colname, const char *s, double *out,
                              GError **error)
{
  if (s[0] == '\0') {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (%s): empty value", path, line, col,
                colname);
    return FALSE;
  }
  char *end = NULL;
  double v = g_ascii_strtod(s, &end);
  if (end == s || *end != '\0') {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (%s): '%s' is not a number", path, line,
                col, colname, s);
    return FALSE;
  }
  if (!isfinite(v)) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (%s): '%s' is not finite", path, line, col,
                colname, s);
    return FALSE;
  }
  *out = v;
  return TRUE;
}

/* A number > 0. */
gboolean profile_parse_positive(const char *path, guint line, guint col,
                                const char *colname, const char *s,
                                double *out, GError **error)
{
  if (!profile_parse_number(path, line, col, colname, s, out, error))
    return FALSE;
  if (!(*out > 0)) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (%s): %s must be > 0", path, line, col,
                colname, s);
    return FALSE;
  }
  return TRUE;
}

/* A whole clock in MHz, > 0 and below MAX_CLOCK_MHZ. */
gboolean profile_parse_clock(const char *path, guint line, guint col,
                             const char *colname, const char *s, guint *out,
                             GError **error)
{
  double v;
  if (!profile_parse_positive(path, line, col, colname, s, &v, error))
    return FALSE;
  if (fabs(v - round(v)) > 1e-6 || v > MAX_CLOCK_MHZ) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (%s): %s is not a whole clock in MHz "
                "(1..%.0f)",
                path, line, col, colname, s, MAX_CLOCK_MHZ);
    return FALSE;
  }
  *out = (guint)lround(v);
  return TRUE;
}

/* A whole number >= 0 (the Perseus stage). */
static gboolean parse_index(const char *path, guint line, guint col,
                            const char *colname, const char *s, guint *out,
                            GError **error)
{
  double v;
  if (!profile_parse_number(path, line, col, colname, s, &v, error))
    return FALSE;
  if (v < 0 || v > 1e6 || fabs(v - round(v)) > 1e-9) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (%s): %s is not a whole number in 0..1e6",
                path, line, col, colname, s);
    return FALSE;
  }
  *out = (guint)lround(v);
  return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Profile objects                                                         */

static void profile_op_free(gpointer data)
{
  ProfileOp *op = data;
  if (op == NULL)
    return;
  g_free(op->name);
  g_free(op->instruction);
  if (op->points != NULL)
    g_array_unref(op->points);
  g_free(op);
}

Profile *profile_new(const char *path, ProfileFormat format)
{
  Profile *p = g_new0(Profile, 1);
  p->path = g_strdup(path);
  p->format = format;
  p->ops = g_ptr_array_new_with_free_func(profile_op_free);
  return p;
}

void profile_free(Profile *p)
{
  if (p == NULL)
    return;
  g_free(p->path);
  g_ptr_array_unref(p->ops);
  g_free(p);
}

/* What unit mistake would bring power_w into [lo, hi]: the columns are
 * seconds and joules, so times in ms (or us) read as s divide the power
 * by 1e3 (1e6), and energies in mJ (or kJ) read as J multiply (divide)
 * it by 1e3.  NULL when no such factor does. */
static const char *unit_hint(double power_w, double lo, double hi)
{
  static const struct {
    double factor; /* the true power over the one read */
    const char *hint;
  } fixes[] = {
    { 1e3, "are the times in milliseconds? (the time column is seconds)" },
    { 1e6, "are the times in microseconds? (the time column is seconds)" },
    { 1e-3, "are the energies in millijoules? (the energy column is "
            "joules)" },
    { 1e-6, "are the energies in microjoules? (the energy column is "
            "joules)" },
  };
  for (gsize i = 0; i < G_N_ELEMENTS(fixes); i++) {
    double w = power_w * fixes[i].factor;
    if (w >= lo && w <= hi)
      return fixes[i].hint;
  }
  return NULL;
}

gboolean profile_check_power(const Profile *p, const GpuSpec *g,
                             double limit_w, GError **error)
{
  g_return_val_if_fail(p != NULL && g != NULL, FALSE);
  /* A third of idle: no GPU that runs a kernel draws less than its idle
   * power, and the margin takes measurement noise and a low-idle part.
   * 1.5 x the limit: boards overshoot their limit for tens of ms (the A100
   * profiles here reach 482 W at a 400 W catalogue limit: the 500 W SXM
   * variant), never by half. */
  double lo = g->idle_power_w.v / 3;
  double hi = 1.5 * MAX(g->power_limit_w.v, limit_w);
  for (guint i = 0; i < p->ops->len; i++) {
    const ProfileOp *op = g_ptr_array_index(p->ops, i);
    for (guint j = 0; j < op->points->len; j++) {
      const ProfilePoint *pt = &g_array_index(op->points, ProfilePoint, j);
      double w = pt->energy_j / pt->time_s;
      if (w >= lo && w <= hi)
        continue;
      const char *hint = unit_hint(w, lo, hi);
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s: '%s' at %u MHz implies %.3g W (energy %.4g J / time "
                  "%.4g s), outside %.0f-%.0f W plausible on %s (a third of "
                  "its idle power to 1.5 x its limit)%s%s",
                  p->path, op->name, pt->sm_mhz, w, pt->energy_j, pt->time_s,
                  lo, hi, g->name, hint != NULL ? ": " : "",
                  hint != NULL ? hint : "");
      return FALSE;
    }
  }
  return TRUE;
}

static gint point_cmp(gconstpointer a, gconstpointer b)
{
  const ProfilePoint *x = a, *y = b;
  if (x->mem_mhz != y->mem_mhz)
    return x->mem_mhz < y->mem_mhz ? -1 : 1;
  if (x->sm_mhz != y->sm_mhz)
    return x->sm_mhz < y->sm_mhz ? -1 : 1;
  return 0;
}

const ProfileOp *profile_find(const Profile *p, const char *name)
{
  g_return_val_if_fail(p != NULL && name != NULL, NULL);
  for (guint i = 0; i < p->ops->len; i++) {
    const ProfileOp *op = g_ptr_array_index(p->ops, i);
    if (strcmp(op->name, name) == 0)
      return op;
  }
  return NULL;
}

const ProfileOp *profile_find_stage(const Profile *p, guint stage,
                                    const char *instruction)
{
  g_return_val_if_fail(p != NULL && instruction != NULL, NULL);
  for (guint i = 0; i < p->ops->len; i++) {
    const ProfileOp *op = g_ptr_array_index(p->ops, i);
    if (op->instruction != NULL && op->stage == stage &&
        strcmp(op->instruction, instruction) == 0)
      return op;
  }
  return NULL;
}

/* ---------------------------------------------------------------------- */
/* Loading the CSV forms                                                   */

/* Column ids of both forms. */
enum {
  COL_STAGE,
  COL_INSTRUCTION,
  COL_FREQUENCY,
  COL_TIME,
  COL_ENERGY,
  COL_KERNEL,
  COL_SM_MHZ,
  COL_MEM_MHZ,
  COL_TIME_S,
  COL_ENERGY_J,
  COL_COUNT,
  COL_CLASS,
  N_COLS
};

static const char *const col_names[N_COLS] = {
  "stage", "instruction", "frequency", "time", "energy", "kernel",
  "sm_mhz", "mem_mhz", "time_s", "energy_j", "count", "class",
};

/* Which columns each form has: required (2) or optional (1). */
static const guint8 perseus_cols[N_COLS] = {
  [COL_STAGE] = 2, [COL_INSTRUCTION] = 2, [COL_FREQUENCY] = 2,
  [COL_TIME] = 2, [COL_ENERGY] = 2,
};
static const guint8 kernel_cols[N_COLS] = {
  [COL_KERNEL] = 2, [COL_SM_MHZ] = 2, [COL_MEM_MHZ] = 2, [COL_TIME_S] = 2,
  [COL_ENERGY_J] = 2, [COL_COUNT] = 1, [COL_CLASS] = 1,
};

static int col_lookup(const char *name)
{
  for (int i = 0; i < N_COLS; i++)
    if (g_ascii_strcasecmp(name, col_names[i]) == 0)
      return i;
  return -1;
}

/* Lists the columns of a form, for error messages. */
static char *form_columns(const guint8 *cols)
{
  GString *s = g_string_new(NULL);
  for (int i = 0; i < N_COLS; i++)
    if (cols[i] != 0)
      g_string_append_printf(s, "%s%s%s", s->len > 0 ? "," : "",
                             col_names[i], cols[i] == 1 ? "(optional)" : "");
  return g_string_free(s, FALSE);
}

/* Per-op bookkeeping while loading: the line of each point, for duplicate
 * errors, keyed by "op\x1fmem\x1fsm". */
typedef struct {
  Profile *p;
  GHashTable *by_name;   /* name -> ProfileOp* (borrowed) */
  GHashTable *seen;      /* key -> line (GUINT_TO_POINTER) */
  GHashTable *first_line;/* ProfileOp* -> line of its first row */
} Loader;

/* The op named `name`, created on first use.  Returns NULL with an error
 * when a later row disagrees with the op's class or count. */
static ProfileOp *loader_op(Loader *ld, const char *name, guint line,
                            guint stage, const char *instruction,
                            SimOpClass klass, double count, gboolean has_class,
                            gboolean has_count, GError **error)
{
  ProfileOp *op = g_hash_table_lookup(ld->by_name, name);
  if (op == NULL) {
    op = g_new0(ProfileOp, 1);
    op->name = g_strdup(name);
    op->stage = stage;
    op->instruction = g_strdup(instruction);
    op->klass = klass;
    op->count = count;
    op->points = g_array_new(FALSE, FALSE, sizeof(ProfilePoint));
    g_ptr_array_add(ld->p->ops, op);
    g_hash_table_insert(ld->by_name, op->name, op);
    g_hash_table_insert(ld->first_line, op, GUINT_TO_POINTER(line));
    return op;
  }
  guint first = GPOINTER_TO_UINT(g_hash_table_lookup(ld->first_line, op));
  if (has_class && op->klass != klass) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: class '%s' of kernel '%s' differs from '%s' on line "
                "%u",
                ld->p->path, line, sim_class_name(klass), name,
                sim_class_name(op->klass), first);
    return NULL;
  }
  if (has_count && op->count != count) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: count %g of kernel '%s' differs from %g on line %u",
                ld->p->path, line, count, name, op->count, first);
    return NULL;
  }
  return op;
}

/* Adds a point; a second point at the same clocks is a duplicate error
 * naming both lines. */
static gboolean loader_point(Loader *ld, ProfileOp *op, const ProfilePoint *pt,
                             guint line, GError **error)
{
  g_autofree char *key =
      g_strdup_printf("%s\x1f%u\x1f%u", op->name, pt->mem_mhz, pt->sm_mhz);
  gpointer prev = g_hash_table_lookup(ld->seen, key);
  if (prev != NULL) {
    if (ld->p->format == PROFILE_PERSEUS)
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_DUPLICATE,
                  "%s:%u: duplicate point: stage %u %s at %u MHz already on "
                  "line %u",
                  ld->p->path, line, op->stage, op->instruction, pt->sm_mhz,
                  GPOINTER_TO_UINT(prev));
    else
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_DUPLICATE,
                  "%s:%u: duplicate point: kernel '%s' at sm %u MHz, mem %u "
                  "MHz already on line %u",
                  ld->p->path, line, op->name, pt->sm_mhz, pt->mem_mhz,
                  GPOINTER_TO_UINT(prev));
    return FALSE;
  }
  g_hash_table_insert(ld->seen, g_steal_pointer(&key),
                      GUINT_TO_POINTER(line));
  g_array_append_val(op->points, *pt);
  return TRUE;
}

/* The field of column id c of row, and its 1-based column number. */
#define FIELD(c) ((const char *)g_ptr_array_index(row->fields, (guint)col_of[c]))
#define COLNO(c) ((guint)col_of[c] + 1)

/* One row of the Perseus form: stage, instruction, frequency, time,
 * energy. */
static gboolean perseus_row(Loader *ld, const CsvRow *row, const int *col_of,
                            GError **error)
{
  Profile *p = ld->p;
  guint line = row->line;
  ProfilePoint pt = {0};
  double t, e;
  guint stage;
  const char *instr = FIELD(COL_INSTRUCTION);
  if (!parse_index(p->path, line, COLNO(COL_STAGE), "stage",
                   FIELD(COL_STAGE), &stage, error) ||
      !profile_parse_clock(p->path, line, COLNO(COL_FREQUENCY), "frequency",
                           FIELD(COL_FREQUENCY), &pt.sm_mhz, error) ||
      !profile_parse_positive(p->path, line, COLNO(COL_TIME), "time",
                              FIELD(COL_TIME), &t, error) ||
      !profile_parse_positive(p->path, line, COLNO(COL_ENERGY), "energy",
                              FIELD(COL_ENERGY), &e, error))
    return FALSE;
  if (instr[0] == '\0') {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (instruction): empty value", p->path,
                line, COLNO(COL_INSTRUCTION));
    return FALSE;
  }
  pt.time_s = t;
  pt.energy_j = e;
  g_autofree char *name = g_strdup_printf("stage%u.%s", stage, instr);
  ProfileOp *op = loader_op(ld, name, line, stage, instr, SIM_CLASS_OTHER,
                            1, FALSE, FALSE, error);
  if (op == NULL || !loader_point(ld, op, &pt, line, error))
    return FALSE;
  p->n_stages = MAX(p->n_stages, stage + 1);
  return TRUE;
}

/* One row of the per-kernel form: kernel, clocks, time, energy[, count,
 * class]. */
static gboolean kernel_row(Loader *ld, const CsvRow *row, const int *col_of,
                           GError **error)
{
  Profile *p = ld->p;
  guint line = row->line;
  ProfilePoint pt = {0};
  double t, e;
  const char *kname = FIELD(COL_KERNEL);
  double count = 1;
  SimOpClass klass = SIM_CLASS_OTHER;
  if (kname[0] == '\0') {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %u (kernel): empty value", p->path, line,
                COLNO(COL_KERNEL));
    return FALSE;
  }
  if (!profile_parse_clock(p->path, line, COLNO(COL_SM_MHZ), "sm_mhz",
                           FIELD(COL_SM_MHZ), &pt.sm_mhz, error) ||
      !profile_parse_clock(p->path, line, COLNO(COL_MEM_MHZ), "mem_mhz",
                           FIELD(COL_MEM_MHZ), &pt.mem_mhz, error) ||
      !profile_parse_positive(p->path, line, COLNO(COL_TIME_S), "time_s",
                              FIELD(COL_TIME_S), &t, error) ||
      !profile_parse_positive(p->path, line, COLNO(COL_ENERGY_J), "energy_j",
                              FIELD(COL_ENERGY_J), &e, error) ||
      (col_of[COL_COUNT] >= 0 &&
       !profile_parse_positive(p->path, line, COLNO(COL_COUNT), "count",
                               FIELD(COL_COUNT), &count, error)))
    return FALSE;
  if (col_of[COL_CLASS] >= 0) {
    int k = sim_class_from_name(FIELD(COL_CLASS));
    if (k < 0) {
      g_autoptr(GString) names = g_string_new(NULL);
      for (int i = 0; i < SIM_CLASS_COUNT; i++)
        g_string_append_printf(names, "%s%s", i > 0 ? ", " : "",
                               sim_class_name((SimOpClass)i));
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u (class): unknown class '%s' (one of "
                  "%s)",
                  p->path, line, COLNO(COL_CLASS), FIELD(COL_CLASS),
                  names->str);
      return FALSE;
    }
    klass = (SimOpClass)k;
  }
  pt.time_s = t;
  pt.energy_j = e;
  ProfileOp *op = loader_op(ld, kname, line, 0, NULL, klass, count,
                            col_of[COL_CLASS] >= 0,
                            col_of[COL_COUNT] >= 0, error);
  if (op == NULL || !loader_point(ld, op, &pt, line, error))
    return FALSE;
  return TRUE;
}
#undef FIELD
#undef COLNO

/* Parses the rows of an open reader whose header has been read. */
static gboolean load_rows(Loader *ld, CsvReader *r, const int *col_of,
                          guint n_cols, GError **error)
{
  Profile *p = ld->p;
  CsvRow row;
  profile_csv_row_init(&row);
  gboolean ok = TRUE;
  guint n_rows = 0;
  GError *err = NULL;
  while (ok && profile_csv_next(r, &row, &err)) {
    n_rows++;
    guint line = row.line;
    if (row.fields->len != n_cols) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: %u columns, the header has %u%s", p->path, line,
                  row.fields->len, n_cols,
                  row.fields->len < n_cols ? " (missing value)" : "");
      ok = FALSE;
      break;
    }
    if (!(p->format == PROFILE_PERSEUS
              ? perseus_row(ld, &row, col_of, error)
              : kernel_row(ld, &row, col_of, error))) {
      ok = FALSE;
      break;
    }
  }
  if (err != NULL) {
    g_propagate_error(error, err);
    ok = FALSE;
  }
  if (ok && n_rows == 0) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: no data rows after the header", p->path, r->line);
    ok = FALSE;
  }
  profile_csv_row_clear(&row);
  return ok;
}

/* Detects the form from the header row and maps columns; errors name the
 * column number and name. */
static gboolean parse_header(const char *path, const CsvRow *hdr,
                             ProfileFormat *format, int *col_of,
                             GError **error)
{
  int ids[64];
  guint n = hdr->fields->len;
  /* Unknown columns first: they make detection meaningless. */
  guint n_perseus = 0, n_kernel = 0;
  for (guint i = 0; i < n; i++) {
    const char *name = g_ptr_array_index(hdr->fields, i);
    int id = col_lookup(name);
    if (i < G_N_ELEMENTS(ids))
      ids[i] = id;
    if (id >= 0 && perseus_cols[id])
      n_perseus++;
    if (id >= 0 && kernel_cols[id])
      n_kernel++;
  }
  if (n > G_N_ELEMENTS(ids)) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: %u columns in the header (at most %zu)", path,
                hdr->line, n, G_N_ELEMENTS(ids));
    return FALSE;
  }
  /* The form with more of its columns present; a tie is neither. */
  if (n_perseus == n_kernel) {
    g_autofree char *a = form_columns(perseus_cols);
    g_autofree char *b = form_columns(kernel_cols);
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: header is neither the Perseus/Zeus form (%s) nor the "
                "per-kernel form (%s)",
                path, hdr->line, a, b);
    return FALSE;
  }
  gboolean any_perseus = n_perseus > n_kernel;
  *format = any_perseus ? PROFILE_PERSEUS : PROFILE_KERNEL;
  const guint8 *cols = any_perseus ? perseus_cols : kernel_cols;
  for (int c = 0; c < N_COLS; c++)
    col_of[c] = -1;
  for (guint i = 0; i < n; i++) {
    const char *name = g_ptr_array_index(hdr->fields, i);
    int id = ids[i];
    if (id < 0 || !cols[id]) {
      g_autofree char *all = form_columns(cols);
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u: unknown column '%s' for the %s form "
                  "(columns: %s)",
                  path, hdr->line, i + 1, name,
                  any_perseus ? "Perseus/Zeus" : "per-kernel", all);
      return FALSE;
    }
    if (col_of[id] >= 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u: column '%s' repeats column %d", path,
                  hdr->line, i + 1, name, col_of[id] + 1);
      return FALSE;
    }
    col_of[id] = (int)i;
  }
  for (int c = 0; c < N_COLS; c++)
    if (cols[c] == 2 && col_of[c] < 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: missing column '%s' (the %s form needs %s)", path,
                  hdr->line, col_names[c],
                  any_perseus ? "Perseus/Zeus" : "per-kernel",
                  any_perseus ? "stage,instruction,frequency,time,energy"
                              : "kernel,sm_mhz,mem_mhz,time_s,energy_j");
      return FALSE;
    }
  return TRUE;
}

void profile_sort_points(Profile *p)
{
  for (guint i = 0; i < p->ops->len; i++) {
    ProfileOp *op = g_ptr_array_index(p->ops, i);
    g_array_sort(op->points, point_cmp);
  }
}

Profile *profile_load(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_autofree char *text = NULL;
  CsvReader r;
  CsvRow hdr;
  if (!profile_csv_open(path, &text, &r, &hdr, error))
    return NULL;
  ProfileFormat format;
  int col_of[N_COLS];
  if (!parse_header(path, &hdr, &format, col_of, error)) {
    profile_csv_row_clear(&hdr);
    return NULL;
  }
  guint n_cols = hdr.fields->len;
  profile_csv_row_clear(&hdr);

  g_autoptr(Profile) p = profile_new(path, format);
  Loader ld = {
    .p = p,
    .by_name = g_hash_table_new(g_str_hash, g_str_equal),
    .seen = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL),
    .first_line = g_hash_table_new(g_direct_hash, g_direct_equal),
  };
  gboolean ok = load_rows(&ld, &r, col_of, n_cols, error);
  g_hash_table_unref(ld.by_name);
  g_hash_table_unref(ld.seen);
  g_hash_table_unref(ld.first_line);
  if (!ok)
    return NULL;
  profile_sort_points(p);
  return g_steal_pointer(&p);
}

/* ---------------------------------------------------------------------- */
/* The out-of-box kernel mix                                               */

G_STATIC_ASSERT(PROFILE_OP_KERNELS_MAX == GPT_LAYER_KERNELS_MAX);

guint profile_op_kernels(const ProfileOp *op, FitKernel *out)
{
  SimPhase phase;
  if (op->instruction == NULL)
    return 0;
  if (g_ascii_strcasecmp(op->instruction, "forward") == 0)
    phase = SIM_PHASE_FORWARD;
  else if (g_ascii_strcasecmp(op->instruction, "backward") == 0)
    phase = SIM_PHASE_BACKWARD;
  else
    return 0;
  GptConfig cfg;
  gpt_config_init(&cfg);
  gboolean ok = gpt_config_set_model(&cfg, "gpt3-175b", NULL);
  g_assert(ok);
  cfg.tp = 8;
  cfg.seq_len = 2048;
  cfg.microbatch_size = 1;
  cfg.precision = GPT_PRECISION_BF16;
  GptLayerKernel ks[GPT_LAYER_KERNELS_MAX];
  guint n = gpt_layer_kernels(&cfg, phase, ks);
  for (guint i = 0; i < n; i++)
    out[i] = (FitKernel){ks[i].kernel, ks[i].count};
  return n;
}

/* ---------------------------------------------------------------------- */
/* Queries                                                                 */

/* The measured memory clock of op nearest mem (0 = the highest); ties go
 * to the higher clock.  op has at least one point. */
static guint nearest_mem(const ProfileOp *op, guint mem_mhz)
{
  const ProfilePoint *pts = (const ProfilePoint *)op->points->data;
  guint n = op->points->len;
  guint top = pts[n - 1].mem_mhz;
  if (mem_mhz == 0)
    return top;
  guint best = top;
  guint best_d = top > mem_mhz ? top - mem_mhz : mem_mhz - top;
  for (guint i = n; i-- > 0;) {
    guint m = pts[i].mem_mhz;
    guint d = m > mem_mhz ? m - mem_mhz : mem_mhz - m;
    if (d < best_d) {
      best = m;
      best_d = d;
    }
  }
  return best;
}

GArray *profile_op_clocks(const ProfileOp *op, guint mem_mhz)
{
  g_return_val_if_fail(op != NULL && op->points->len > 0, NULL);
  guint m = nearest_mem(op, mem_mhz);
  GArray *out = g_array_new(FALSE, FALSE, sizeof(guint));
  for (guint i = 0; i < op->points->len; i++) {
    const ProfilePoint *pt = &g_array_index(op->points, ProfilePoint, i);
    if (pt->mem_mhz == m)
      g_array_append_val(out, pt->sm_mhz);
  }
  return out;
}

gboolean profile_op_at(const ProfileOp *op, guint sm_mhz, guint mem_mhz,
                       double *time_s, double *energy_j, GError **error)
{
  g_return_val_if_fail(op != NULL && op->points->len > 0, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  guint m = nearest_mem(op, mem_mhz);
  const ProfilePoint *lo = NULL, *hi = NULL, *first = NULL, *last = NULL;
  for (guint i = 0; i < op->points->len; i++) {
    const ProfilePoint *pt = &g_array_index(op->points, ProfilePoint, i);
    if (pt->mem_mhz != m)
      continue;
    if (first == NULL)
      first = pt;
    last = pt;
    if (pt->sm_mhz <= sm_mhz)
      lo = pt;
    if (pt->sm_mhz >= sm_mhz && hi == NULL)
      hi = pt;
  }
  if (lo == NULL || hi == NULL) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE,
                "'%s': SM clock %u MHz is outside the measured range "
                "%u-%u MHz (at memory clock %u MHz); the profile is not "
                "extrapolated",
                op->name, sm_mhz, first->sm_mhz, last->sm_mhz, m);
    return FALSE;
  }
  double t, e;
  if (lo == hi) {
    t = lo->time_s;
    e = lo->energy_j;
  } else {
    double w = ((double)sm_mhz - lo->sm_mhz) / ((double)hi->sm_mhz - lo->sm_mhz);
    t = lo->time_s + w * (hi->time_s - lo->time_s);
    e = lo->energy_j + w * (hi->energy_j - lo->energy_j);
  }
  if (time_s != NULL)
    *time_s = t;
  if (energy_j != NULL)
    *energy_j = e;
  return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Measured iterations (whole-run validation)                              */

static gint rank_cmp(gconstpointer a, gconstpointer b)
{
  const ProfileRank *x = a, *y = b;
  return x->rank < y->rank ? -1 : x->rank > y->rank;
}

GArray *profile_load_run(const char *path, GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_autofree char *text = NULL;
  GError *err = NULL;
  CsvReader r;
  CsvRow row;
  if (!profile_csv_open(path, &text, &r, &row, error))
    return NULL;
  static const char *const names[] = {"rank", "time_s", "energy_j"};
  int col[3] = {-1, -1, -1};
  guint n_cols = row.fields->len;
  for (guint i = 0; i < n_cols; i++) {
    const char *h = g_ptr_array_index(row.fields, i);
    int k = -1;
    for (int c = 0; c < 3; c++)
      if (g_ascii_strcasecmp(h, names[c]) == 0)
        k = c;
    if (k < 0 || col[k] >= 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u: %s column '%s' (columns: "
                  "rank,time_s,energy_j)",
                  path, row.line, i + 1, k < 0 ? "unknown" : "repeated", h);
      profile_csv_row_clear(&row);
      return NULL;
    }
    col[k] = (int)i;
  }
  for (int c = 0; c < 3; c++)
    if (col[c] < 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: missing column '%s' (columns: rank,time_s,energy_j)",
                  path, row.line, names[c]);
      profile_csv_row_clear(&row);
      return NULL;
    }
  g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(ProfileRank));
  g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  gboolean ok = TRUE;
  while (ok && profile_csv_next(&r, &row, &err)) {
    guint line = row.line;
    if (!profile_csv_check_width(&row, n_cols, path, error)) {
      ok = FALSE;
      break;
    }
    ProfileRank pr = {0};
    if (!parse_index(path, line, (guint)col[0] + 1, "rank",
                     g_ptr_array_index(row.fields, (guint)col[0]), &pr.rank,
                     error) ||
        !profile_parse_positive(path, line, (guint)col[1] + 1, "time_s",
                                g_ptr_array_index(row.fields, (guint)col[1]),
                                &pr.time_s, error) ||
        !profile_parse_positive(path, line, (guint)col[2] + 1, "energy_j",
                                g_ptr_array_index(row.fields, (guint)col[2]),
                                &pr.energy_j, error)) {
      ok = FALSE;
      break;
    }
    gpointer prev = g_hash_table_lookup(seen, GUINT_TO_POINTER(pr.rank + 1));
    if (prev != NULL) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_DUPLICATE,
                  "%s:%u: rank %u already on line %u", path, line, pr.rank,
                  GPOINTER_TO_UINT(prev));
      ok = FALSE;
      break;
    }
    g_hash_table_insert(seen, GUINT_TO_POINTER(pr.rank + 1),
                        GUINT_TO_POINTER(line));
    g_array_append_val(out, pr);
  }
  if (err != NULL) {
    g_propagate_error(error, err);
    ok = FALSE;
  }
  profile_csv_row_clear(&row);
  if (!ok)
    return NULL;
  if (out->len == 0) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s: no ranks after the header", path);
    return NULL;
  }
  g_array_sort(out, rank_cmp);
  for (guint i = 0; i < out->len; i++)
    if (g_array_index(out, ProfileRank, i).rank != i) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s: rank %u is missing (ranks must be 0..%u)", path, i,
                  out->len - 1);
      return NULL;
    }
  return g_steal_pointer(&out);
}
