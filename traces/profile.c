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
 * NVML / DCGM sample series (profile_load_nvml)
 * ---------------------------------------------
 * `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw[,clocks.mem,...]
 * --format=csv[,nounits] -lms PERIOD` output and a windows file
 * `kernel,start,end`.  The power samples are taken as a piecewise-linear
 * signal between sample instants and each window's energy is its integral
 * (the trapezoid rule, with the end points interpolated): this is what the
 * NVML total-energy counter (nvmlDeviceGetTotalEnergyConsumption) would
 * accumulate if it were read at the window's edges, up to the counter's own
 * refresh cadence.  Assumptions and limits (data/README.md): the driver
 * refreshes power every 20-100 ms and on A100/H100 the sensor averages only
 * 25 ms out of every 100 ms, so a window needs many sample periods (seconds
 * of repeated kernels, not one launch) for the integral to be meaningful;
 * each window must contain at least one sample and lie inside the sampled
 * span.  A window may hold `count` launches of its kernel (optional
 * column): its time and energy are divided by it.  Windows of the same kernel at the same clocks (repetitions) are
 * averaged into one point; the window's SM clock is the most frequent
 * sampled clock inside it (locked clocks make it unique).
 */
#include "traces/profile.h"
#include "traces/gpt.h"
#include "io/fault.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

G_DEFINE_QUARK(profile-error-quark, profile_error)

/* Clocks above this are certainly a unit mistake (Hz or kHz). */
#define MAX_CLOCK_MHZ 100000.0

/* ---------------------------------------------------------------------- */
/* Small CSV reader                                                        */

/* One logical record: its fields (owned strings) and its 1-based line. */
typedef struct {
  GPtrArray *fields;
  guint line;
} CsvRow;

typedef struct {
  const char *path;
  const char *p;     /* cursor */
  const char *end;
  guint line;        /* line of the cursor, 1-based */
} CsvReader;

/* Reads the next non-blank, non-comment record into row (fields replaced).
 * Returns FALSE at end of input (error unset) or on a syntax error (error
 * set, naming the line). */
static gboolean csv_next(CsvReader *r, CsvRow *row, GError **error)
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


static void csv_row_init(CsvRow *row)
{
  row->fields = g_ptr_array_new_with_free_func(g_free);
  row->line = 0;
}

static void csv_row_clear(CsvRow *row)
{
  g_clear_pointer(&row->fields, g_ptr_array_unref);
}

/* Reads `path` into *text (caller frees it) and its header record into row
 * (initialised here; on success the caller clears it); r reads the records
 * that follow.  Errors: PROFILE_ERROR_IO, a CSV syntax error, or
 * PROFILE_ERROR_FORMAT for a file without a header line. */
static gboolean csv_open(const char *path, char **text, CsvReader *r,
                         CsvRow *row, GError **error)
{
  gsize len = 0;
  GError *err = NULL;
  *text = NULL;
  if (!fault_get_contents(path, text, &len, "profile: read", &err)) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_IO, "%s: %s", path,
                err->message);
    g_error_free(err);
    return FALSE;
  }
  r->path = path;
  r->p = *text;
  r->end = *text + len;
  r->line = 1;
  csv_row_init(row);
  if (!csv_next(r, row, &err)) {
    csv_row_clear(row);
    if (err != NULL)
      g_propagate_error(error, err);
    else
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s: empty file (no header line)", path);
    return FALSE;
  }
  return TRUE;
}

/* ---------------------------------------------------------------------- */
/* Value parsing with located errors                                       */

/* Parses a finite number from s.  Errors (naming path:line, the column
 * number and name): empty, not a number, not finite. */
static gboolean parse_number(const char *path, guint line, guint col,
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
static gboolean parse_positive(const char *path, guint line, guint col,
                               const char *colname, const char *s,
                               double *out, GError **error)
{
  if (!parse_number(path, line, col, colname, s, out, error))
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
static gboolean parse_clock(const char *path, guint line, guint col,
                            const char *colname, const char *s, guint *out,
                            GError **error)
{
  double v;
  if (!parse_positive(path, line, col, colname, s, &v, error))
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
  if (!parse_number(path, line, col, colname, s, &v, error))
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

static Profile *profile_new(const char *path, ProfileFormat format)
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

/* Parses the rows of an open reader whose header has been read. */
static gboolean load_rows(Loader *ld, CsvReader *r, const int *col_of,
                          guint n_cols, GError **error)
{
  Profile *p = ld->p;
  CsvRow row;
  csv_row_init(&row);
  gboolean ok = TRUE;
  guint n_rows = 0;
  GError *err = NULL;
  while (ok && csv_next(r, &row, &err)) {
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
    /* The field of column id c, and its 1-based column number. */
#define FIELD(c) ((const char *)g_ptr_array_index(row.fields, (guint)col_of[c]))
#define COLNO(c) ((guint)col_of[c] + 1)
    ProfilePoint pt = {0};
    double t, e;
    if (p->format == PROFILE_PERSEUS) {
      guint stage;
      const char *instr = FIELD(COL_INSTRUCTION);
      if (!parse_index(p->path, line, COLNO(COL_STAGE), "stage",
                       FIELD(COL_STAGE), &stage, error) ||
          !parse_clock(p->path, line, COLNO(COL_FREQUENCY), "frequency",
                       FIELD(COL_FREQUENCY), &pt.sm_mhz, error) ||
          !parse_positive(p->path, line, COLNO(COL_TIME), "time",
                          FIELD(COL_TIME), &t, error) ||
          !parse_positive(p->path, line, COLNO(COL_ENERGY), "energy",
                          FIELD(COL_ENERGY), &e, error)) {
        ok = FALSE;
        break;
      }
      if (instr[0] == '\0') {
        g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                    "%s:%u: column %u (instruction): empty value", p->path,
                    line, COLNO(COL_INSTRUCTION));
        ok = FALSE;
        break;
      }
      pt.time_s = t;
      pt.energy_j = e;
      g_autofree char *name = g_strdup_printf("stage%u.%s", stage, instr);
      ProfileOp *op = loader_op(ld, name, line, stage, instr, SIM_CLASS_OTHER,
                                1, FALSE, FALSE, error);
      if (op == NULL || !loader_point(ld, op, &pt, line, error)) {
        ok = FALSE;
        break;
      }
      p->n_stages = MAX(p->n_stages, stage + 1);
    } else {
      const char *kname = FIELD(COL_KERNEL);
      double count = 1;
      SimOpClass klass = SIM_CLASS_OTHER;
      if (kname[0] == '\0') {
        g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                    "%s:%u: column %u (kernel): empty value", p->path, line,
                    COLNO(COL_KERNEL));
        ok = FALSE;
        break;
      }
      if (!parse_clock(p->path, line, COLNO(COL_SM_MHZ), "sm_mhz",
                       FIELD(COL_SM_MHZ), &pt.sm_mhz, error) ||
          !parse_clock(p->path, line, COLNO(COL_MEM_MHZ), "mem_mhz",
                       FIELD(COL_MEM_MHZ), &pt.mem_mhz, error) ||
          !parse_positive(p->path, line, COLNO(COL_TIME_S), "time_s",
                          FIELD(COL_TIME_S), &t, error) ||
          !parse_positive(p->path, line, COLNO(COL_ENERGY_J), "energy_j",
                          FIELD(COL_ENERGY_J), &e, error) ||
          (col_of[COL_COUNT] >= 0 &&
           !parse_positive(p->path, line, COLNO(COL_COUNT), "count",
                           FIELD(COL_COUNT), &count, error))) {
        ok = FALSE;
        break;
      }
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
          ok = FALSE;
          break;
        }
        klass = (SimOpClass)k;
      }
      pt.time_s = t;
      pt.energy_j = e;
      ProfileOp *op = loader_op(ld, kname, line, 0, NULL, klass, count,
                                col_of[COL_CLASS] >= 0,
                                col_of[COL_COUNT] >= 0, error);
      if (op == NULL || !loader_point(ld, op, &pt, line, error)) {
        ok = FALSE;
        break;
      }
    }
#undef FIELD
#undef COLNO
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
  csv_row_clear(&row);
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

static void sort_points(Profile *p)
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
  if (!csv_open(path, &text, &r, &hdr, error))
    return NULL;
  ProfileFormat format;
  int col_of[N_COLS];
  if (!parse_header(path, &hdr, &format, col_of, error)) {
    csv_row_clear(&hdr);
    return NULL;
  }
  guint n_cols = hdr.fields->len;
  csv_row_clear(&hdr);

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
  sort_points(p);
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
/* NVML / DCGM sample series                                               */

/* Parses "YYYY/MM/DD hh:mm:ss[.fff]" (nvidia-smi; '-' also accepted as the
 * date separator and 'T' between date and time) into seconds since
 * 1970-01-01 in UTC (the zone does not matter: only differences are used).
 * Returns FALSE when s is not in that form. */
static gboolean parse_timestamp(const char *s, double *out)
{
  int y, mo, d, h, mi, n = 0;
  char sep1, sep2, mid;
  if (sscanf(s, "%d%c%d%c%d%c%d:%d:%n", &y, &sep1, &mo, &sep2, &d, &mid, &h,
             &mi, &n) != 8 ||
      n == 0)
    return FALSE;
  if (!((sep1 == '/' && sep2 == '/') || (sep1 == '-' && sep2 == '-')) ||
      (mid != ' ' && mid != 'T'))
    return FALSE;
  const char *rest = s + n;
  char *end = NULL;
  double sec = g_ascii_strtod(rest, &end);
  if (end == rest || *end != '\0' || !(sec >= 0 && sec < 61))
    return FALSE;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 ||
      mi > 59 || y < 1970 || y > 9999)
    return FALSE;
  GDateTime *dt = g_date_time_new_utc(y, mo, d, h, mi, 0);
  if (dt == NULL)
    return FALSE;
  *out = (double)g_date_time_to_unix(dt) + sec;
  g_date_time_unref(dt);
  return TRUE;
}

/* Strips a trailing unit (" MHz", " W", " %") that --format=csv without
 * nounits appends, in place. */
static void strip_unit(char *s, const char *unit)
{
  gsize ls = strlen(s), lu = strlen(unit);
  if (ls > lu && g_ascii_strcasecmp(s + ls - lu, unit) == 0) {
    s[ls - lu] = '\0';
    g_strchomp(s);
  }
}

/* One sample of the series. */
typedef struct {
  double t;       /* s */
  double power_w;
  guint sm_mhz;
  guint mem_mhz;  /* 0 when not sampled */
} Sample;

/* Header field -> role.  nvidia-smi prints "clocks.current.sm [MHz]" for the
 * query field clocks.sm, "power.draw [W]" (newer drivers also
 * power.draw.average / power.draw.instant). */
typedef enum { S_TS, S_SM, S_MEM, S_POWER, S_OTHER } SampleRole;

static SampleRole sample_role(const char *h)
{
  g_autofree char *name = g_ascii_strdown(h, -1);
  char *br = strchr(name, '[');
  if (br != NULL)
    *br = '\0';
  g_strstrip(name);
  if (strcmp(name, "timestamp") == 0)
    return S_TS;
  if (strcmp(name, "clocks.current.sm") == 0 || strcmp(name, "clocks.sm") == 0)
    return S_SM;
  if (strcmp(name, "clocks.current.memory") == 0 ||
      strcmp(name, "clocks.mem") == 0)
    return S_MEM;
  /* power.draw.average is the driver's 1 s average: a fallback only when
   * power.draw / power.draw.instant are absent (see below). */
  if (strcmp(name, "power.draw") == 0 ||
      strcmp(name, "power.draw.instant") == 0)
    return S_POWER;
  return S_OTHER;
}

static GArray *load_samples(const char *path, GError **error)
{
  g_autofree char *text = NULL;
  GError *err = NULL;
  CsvReader r;
  CsvRow row;
  if (!csv_open(path, &text, &r, &row, error))
    return NULL;
  g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(Sample));
  int ts = -1, sm = -1, mem = -1, pw = -1;
  guint n_cols = row.fields->len;
  for (guint i = 0; i < n_cols; i++) {
    int *slot = NULL;
    switch (sample_role(g_ptr_array_index(row.fields, i))) {
    case S_TS: slot = &ts; break;
    case S_SM: slot = &sm; break;
    case S_MEM: slot = &mem; break;
    case S_POWER: slot = &pw; break;
    case S_OTHER: break;
    }
    if (slot == NULL)
      continue;
    if (*slot >= 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u: '%s' repeats column %d", path, row.line,
                  i + 1, (const char *)g_ptr_array_index(row.fields, i),
                  *slot + 1);
      csv_row_clear(&row);
      return NULL;
    }
    *slot = (int)i;
  }
  const char *missing = ts < 0   ? "timestamp"
                        : sm < 0 ? "clocks.current.sm [MHz] (query clocks.sm)"
                        : pw < 0 ? "power.draw [W]"
                                 : NULL;
  if (missing != NULL) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: missing column %s (expected nvidia-smi "
                "--query-gpu=timestamp,clocks.sm,power.draw --format=csv)",
                path, row.line, missing);
    csv_row_clear(&row);
    return NULL;
  }
  gboolean ok = TRUE;
  while (ok && csv_next(&r, &row, &err)) {
    guint line = row.line;
    if (row.fields->len != n_cols) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: %u columns, the header has %u", path, line,
                  row.fields->len, n_cols);
      ok = FALSE;
      break;
    }
    Sample s = {0};
    char *f_ts = g_ptr_array_index(row.fields, (guint)ts);
    char *f_sm = g_ptr_array_index(row.fields, (guint)sm);
    char *f_pw = g_ptr_array_index(row.fields, (guint)pw);
    char *f_mem = mem >= 0 ? g_ptr_array_index(row.fields, (guint)mem) : NULL;
    strip_unit(f_sm, "MHz");
    strip_unit(f_pw, "W");
    if (f_mem != NULL)
      strip_unit(f_mem, "MHz");
    if (!parse_timestamp(f_ts, &s.t) &&
        !parse_number(path, line, (guint)ts + 1, "timestamp", f_ts, &s.t,
                      NULL)) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (timestamp): '%s' is neither "
                  "'YYYY/MM/DD hh:mm:ss.fff' nor a number of seconds",
                  path, line, ts + 1, f_ts);
      ok = FALSE;
      break;
    }
    double pwv;
    if (!parse_clock(path, line, (guint)sm + 1, "clocks.sm", f_sm, &s.sm_mhz,
                     error) ||
        (f_mem != NULL && !parse_clock(path, line, (guint)mem + 1,
                                       "clocks.mem", f_mem, &s.mem_mhz,
                                       error)) ||
        !parse_number(path, line, (guint)pw + 1, "power.draw", f_pw, &pwv,
                      error)) {
      ok = FALSE;
      break;
    }
    if (pwv < 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (power.draw): %s must be >= 0", path,
                  line, pw + 1, f_pw);
      ok = FALSE;
      break;
    }
    s.power_w = pwv;
    if (out->len > 0 &&
        !(s.t > g_array_index(out, Sample, out->len - 1).t)) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (timestamp): '%s' is not after the "
                  "previous sample",
                  path, line, ts + 1, f_ts);
      ok = FALSE;
      break;
    }
    g_array_append_val(out, s);
  }
  if (err != NULL) {
    g_propagate_error(error, err);
    ok = FALSE;
  }
  csv_row_clear(&row);
  if (!ok)
    return NULL;
  if (out->len < 2) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s: %u sample(s); at least 2 are needed to integrate power",
                path, out->len);
    return NULL;
  }
  return g_steal_pointer(&out);
}

/* Power at time t by linear interpolation; t inside the sampled span. */
static double power_at(const Sample *s, guint n, guint i, double t)
{
  /* s[i].t <= t <= s[i + 1].t */
  if (i + 1 >= n)
    return s[n - 1].power_w;
  double w = (t - s[i].t) / (s[i + 1].t - s[i].t);
  return s[i].power_w + w * (s[i + 1].power_w - s[i].power_w);
}

/* Integral of the piecewise-linear power between a and b (trapezoids), and
 * the most frequent sampled clocks within [a, b] (ties: the higher).
 * Returns the number of samples within [a, b]. */
static guint integrate(const Sample *s, guint n, double a, double b,
                       double *energy_j, guint *sm_mhz, guint *mem_mhz)
{
  /* First sample index with s[i].t > a, minus one: the segment holding a. */
  guint lo = 0, hi = n - 1;
  while (hi - lo > 1) {
    guint mid = (lo + hi) / 2;
    if (s[mid].t <= a)
      lo = mid;
    else
      hi = mid;
  }
  double e = 0, t_prev = a, p_prev = power_at(s, n, lo, a);
  guint inside = 0;
  g_autoptr(GHashTable) votes = g_hash_table_new(g_direct_hash, g_direct_equal);
  for (guint i = lo + 1; i < n && s[i].t < b; i++) {
    e += 0.5 * (p_prev + s[i].power_w) * (s[i].t - t_prev);
    t_prev = s[i].t;
    p_prev = s[i].power_w;
  }
  guint seg = lo;
  while (seg + 1 < n && s[seg + 1].t < b)
    seg++;
  double p_b = power_at(s, n, seg, b);
  e += 0.5 * (p_prev + p_b) * (b - t_prev);

  guint best_votes = 0;
  *sm_mhz = 0;
  *mem_mhz = 0;
  for (guint i = lo; i < n && s[i].t <= b; i++) {
    if (s[i].t < a)
      continue;
    inside++;
    guint64 key = ((guint64)s[i].mem_mhz << 20) | s[i].sm_mhz;
    guint v = GPOINTER_TO_UINT(g_hash_table_lookup(votes, GSIZE_TO_POINTER(key))) + 1;
    g_hash_table_insert(votes, GSIZE_TO_POINTER(key), GUINT_TO_POINTER(v));
    if (v > best_votes || (v == best_votes && s[i].sm_mhz > *sm_mhz)) {
      best_votes = v;
      *sm_mhz = s[i].sm_mhz;
      *mem_mhz = s[i].mem_mhz;
    }
  }
  *energy_j = e;
  return inside;
}

/* Accumulator for repeated windows of one (kernel, clocks). */
typedef struct {
  double time_sum, energy_sum;
  guint n;
} Acc;

Profile *profile_load_nvml(const char *samples_path, const char *windows_path,
                           GError **error)
{
  g_return_val_if_fail(samples_path != NULL && windows_path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_autoptr(GArray) samples = load_samples(samples_path, error);
  if (samples == NULL)
    return NULL;
  const Sample *s = (const Sample *)samples->data;
  guint n = samples->len;

  g_autofree char *text = NULL;
  GError *err = NULL;
  CsvReader r;
  CsvRow row;
  if (!csv_open(windows_path, &text, &r, &row, error))
    return NULL;
  int ck = -1, cs = -1, ce = -1, cc = -1;
  guint n_cols = row.fields->len;
  for (guint i = 0; i < n_cols; i++) {
    const char *h = g_ptr_array_index(row.fields, i);
    int *slot = g_ascii_strcasecmp(h, "kernel") == 0 ? &ck
                : g_ascii_strcasecmp(h, "count") == 0 ? &cc
                : (g_ascii_strcasecmp(h, "start") == 0 ||
                   g_ascii_strcasecmp(h, "start_s") == 0)
                    ? &cs
                : (g_ascii_strcasecmp(h, "end") == 0 ||
                   g_ascii_strcasecmp(h, "end_s") == 0)
                    ? &ce
                    : NULL;
    if (slot == NULL || *slot >= 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %u: %s column '%s' (columns: kernel,start,end[,count])",
                  windows_path, row.line, i + 1,
                  slot == NULL ? "unknown" : "repeated", h);
      csv_row_clear(&row);
      return NULL;
    }
    *slot = (int)i;
  }
  if (ck < 0 || cs < 0 || ce < 0) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: missing column '%s' (columns: kernel,start,end)",
                windows_path, row.line,
                ck < 0 ? "kernel" : cs < 0 ? "start" : "end");
    csv_row_clear(&row);
    return NULL;
  }

  g_autoptr(Profile) p = profile_new(windows_path, PROFILE_KERNEL);
  /* (kernel, mem, sm) -> Acc, in order of first appearance. */
  g_autoptr(GHashTable) accs =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
  gboolean ok = TRUE;
  guint n_rows = 0;
  while (ok && csv_next(&r, &row, &err)) {
    guint line = row.line;
    n_rows++;
    if (row.fields->len != n_cols) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: %u columns, the header has %u", windows_path, line,
                  row.fields->len, n_cols);
      ok = FALSE;
      break;
    }
    const char *kname = g_ptr_array_index(row.fields, (guint)ck);
    if (kname[0] == '\0') {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (kernel): empty value", windows_path,
                  line, ck + 1);
      ok = FALSE;
      break;
    }
    double t[2];
    const int cols[2] = {cs, ce};
    for (int k = 0; k < 2 && ok; k++) {
      const char *f = g_ptr_array_index(row.fields, (guint)cols[k]);
      if (parse_timestamp(f, &t[k]))
        continue;
      if (!parse_number(windows_path, line, (guint)cols[k] + 1,
                        k == 0 ? "start" : "end", f, &t[k], NULL)) {
        g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                    "%s:%u: column %d (%s): '%s' is neither seconds nor "
                    "'YYYY/MM/DD hh:mm:ss.fff'",
                    windows_path, line, cols[k] + 1,
                    k == 0 ? "start" : "end", f);
        ok = FALSE;
        break;
      }
      t[k] += s[0].t;  /* seconds since the first sample */
    }
    if (!ok)
      break;
    if (!(t[1] > t[0])) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (end): the window ends before it starts",
                  windows_path, line, ce + 1);
      ok = FALSE;
      break;
    }
    if (t[0] < s[0].t || t[1] > s[n - 1].t) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE,
                  "%s:%u: window %.6f-%.6f s (from the first sample) is "
                  "outside the sampled span 0-%.6f s of %s",
                  windows_path, line, t[0] - s[0].t, t[1] - s[0].t,
                  s[n - 1].t - s[0].t, samples_path);
      ok = FALSE;
      break;
    }
    double count = 1;
    if (cc >= 0 &&
        !parse_positive(windows_path, line, (guint)cc + 1, "count",
                        g_ptr_array_index(row.fields, (guint)cc), &count,
                        error)) {
      ok = FALSE;
      break;
    }
    double e;
    guint sm, mem;
    if (integrate(s, n, t[0], t[1], &e, &sm, &mem) == 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE,
                  "%s:%u: window of %.3f ms contains no power sample of %s: "
                  "the sampling period is too long for it (repeat the kernel "
                  "for seconds, see docs/validation.md)",
                  windows_path, line, (t[1] - t[0]) * 1e3, samples_path);
      ok = FALSE;
      break;
    }
    if (!(e > 0)) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: window energy %g J is not positive", windows_path,
                  line, e);
      ok = FALSE;
      break;
    }
    ProfileOp *op = g_hash_table_lookup(by_name, kname);
    if (op == NULL) {
      op = g_new0(ProfileOp, 1);
      op->name = g_strdup(kname);
      op->klass = SIM_CLASS_OTHER;
      op->count = 1;
      op->points = g_array_new(FALSE, FALSE, sizeof(ProfilePoint));
      g_ptr_array_add(p->ops, op);
      g_hash_table_insert(by_name, op->name, op);
    }
    g_autofree char *key = g_strdup_printf("%s\x1f%u\x1f%u", kname, mem, sm);
    Acc *acc = g_hash_table_lookup(accs, key);
    if (acc == NULL) {
      acc = g_new0(Acc, 1);
      g_hash_table_insert(accs, g_strdup(key), acc);
      ProfilePoint pt = {sm, mem, 0, 0};
      g_array_append_val(op->points, pt);
    }
    acc->time_sum += (t[1] - t[0]) / count;
    acc->energy_sum += e / count;
    acc->n++;
  }
  if (err != NULL) {
    g_propagate_error(error, err);
    ok = FALSE;
  }
  if (ok && n_rows == 0) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: no windows after the header", windows_path, r.line);
    ok = FALSE;
  }
  csv_row_clear(&row);
  if (!ok)
    return NULL;
  /* Means of the repetitions. */
  for (guint i = 0; i < p->ops->len; i++) {
    ProfileOp *op = g_ptr_array_index(p->ops, i);
    for (guint j = 0; j < op->points->len; j++) {
      ProfilePoint *pt = &g_array_index(op->points, ProfilePoint, j);
      g_autofree char *key =
          g_strdup_printf("%s\x1f%u\x1f%u", op->name, pt->mem_mhz, pt->sm_mhz);
      const Acc *acc = g_hash_table_lookup(accs, key);
      pt->time_s = acc->time_sum / acc->n;
      pt->energy_j = acc->energy_sum / acc->n;
    }
  }
  sort_points(p);
  return g_steal_pointer(&p);
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
  if (!csv_open(path, &text, &r, &row, error))
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
      csv_row_clear(&row);
      return NULL;
    }
    col[k] = (int)i;
  }
  for (int c = 0; c < 3; c++)
    if (col[c] < 0) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: missing column '%s' (columns: rank,time_s,energy_j)",
                  path, row.line, names[c]);
      csv_row_clear(&row);
      return NULL;
    }
  g_autoptr(GArray) out = g_array_new(FALSE, FALSE, sizeof(ProfileRank));
  g_autoptr(GHashTable) seen = g_hash_table_new(g_direct_hash, g_direct_equal);
  gboolean ok = TRUE;
  while (ok && csv_next(&r, &row, &err)) {
    guint line = row.line;
    if (row.fields->len != n_cols) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: %u columns, the header has %u", path, line,
                  row.fields->len, n_cols);
      ok = FALSE;
      break;
    }
    ProfileRank pr = {0};
    if (!parse_index(path, line, (guint)col[0] + 1, "rank",
                     g_ptr_array_index(row.fields, (guint)col[0]), &pr.rank,
                     error) ||
        !parse_positive(path, line, (guint)col[1] + 1, "time_s",
                        g_ptr_array_index(row.fields, (guint)col[1]),
                        &pr.time_s, error) ||
        !parse_positive(path, line, (guint)col[2] + 1, "energy_j",
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
  csv_row_clear(&row);
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
