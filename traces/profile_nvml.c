/* traces/profile_nvml.c -- profiles from NVML / DCGM sample series
 * (profile_load_nvml; contract in traces/profile.h).
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
 * refresh cadence.  Assumptions and limits (docs/sources.md): the driver
 * refreshes power every 20-100 ms and on A100/H100 the sensor averages only
 * 25 ms out of every 100 ms, so a window needs many sample periods (seconds
 * of repeated kernels, not one launch) for the integral to be meaningful;
 * each window must contain at least one sample and lie inside the sampled
 * span.  A window may hold `count` launches of its kernel (optional
 * column): its time and energy are divided by it.  Windows of the same
 * kernel at the same clocks (repetitions) are averaged into one point; the
 * window's SM clock is the most frequent sampled clock inside it (locked
 * clocks make it unique).
 */
#include "traces/profile-private.h"
#include "io/fault.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* Reads the nvidia-smi CSV at path (columns found by name: timestamp,
 * clocks.sm, power.draw and optionally clocks.mem; units allowed).
 * Returns the samples (Sample, the caller's), at least 2, in strictly
 * increasing time; NULL with a PROFILE_ERROR naming the file, and the line
 * and column of a missing, repeated or bad field. */
static GArray *load_samples(const char *path, GError **error)
{
  g_autofree char *text = NULL;
  GError *err = NULL;
  CsvReader r;
  CsvRow row;
  if (!profile_csv_open(path, &text, &r, &row, error))
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
      profile_csv_row_clear(&row);
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
    profile_csv_row_clear(&row);
    return NULL;
  }
  gboolean ok = TRUE;
  while (ok && profile_csv_next(&r, &row, &err)) {
    guint line = row.line;
    if (!profile_csv_check_width(&row, n_cols, path, error)) {
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
        !profile_parse_number(path, line, (guint)ts + 1, "timestamp", f_ts,
                              &s.t, NULL)) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (timestamp): '%s' is neither "
                  "'YYYY/MM/DD hh:mm:ss.fff' nor a number of seconds",
                  path, line, ts + 1, f_ts);
      ok = FALSE;
      break;
    }
    double pwv;
    if (!profile_parse_clock(path, line, (guint)sm + 1, "clocks.sm", f_sm,
                             &s.sm_mhz, error) ||
        (f_mem != NULL && !profile_parse_clock(path, line, (guint)mem + 1,
                                               "clocks.mem", f_mem, &s.mem_mhz,
                                               error)) ||
        !profile_parse_number(path, line, (guint)pw + 1, "power.draw", f_pw,
                              &pwv, error)) {
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
  profile_csv_row_clear(&row);
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

/* The windows file being read: its columns (indices, -1 absent), the
 * samples, and the points accumulated so far. */
typedef struct {
  const char *samples_path, *windows_path;
  const Sample *s;
  guint n;
  int ck, cs, ce, cc;   /* kernel, start, end, count */
  guint n_cols;
  Profile *p;
  GHashTable *accs;     /* "kernel\x1fmem\x1fsm" -> Acc */
  GHashTable *by_name;  /* kernel -> its ProfileOp (borrowed) */
} Windows;

/* The windows file's header row: sets the column indices. */
static gboolean window_columns(Windows *wl, const CsvRow *row, GError **error)
{
  const char *windows_path = wl->windows_path;
  int ck = -1, cs = -1, ce = -1, cc = -1;
  guint n_cols = row->fields->len;
  for (guint i = 0; i < n_cols; i++) {
    const char *h = g_ptr_array_index(row->fields, i);
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
                  windows_path, row->line, i + 1,
                  slot == NULL ? "unknown" : "repeated", h);
      return FALSE;
    }
    *slot = (int)i;
  }
  if (ck < 0 || cs < 0 || ce < 0) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: missing column '%s' (columns: kernel,start,end)",
                windows_path, row->line,
                ck < 0 ? "kernel" : cs < 0 ? "start" : "end");
    return FALSE;
  }
  wl->ck = ck;
  wl->cs = cs;
  wl->ce = ce;
  wl->cc = cc;
  wl->n_cols = n_cols;
  return TRUE;
}

/* One window: its time and energy (the power integral over it, per launch)
 * added to the point of its kernel at its clocks. */
static gboolean window_row(Windows *wl, const CsvRow *row, GError **error)
{
  guint line = row->line;
  if (!profile_csv_check_width(row, wl->n_cols, wl->windows_path, error))
    return FALSE;
  const char *kname = g_ptr_array_index(row->fields, (guint)wl->ck);
  if (kname[0] == '\0') {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %d (kernel): empty value", wl->windows_path,
                line, wl->ck + 1);
    return FALSE;
  }
  double t[2];
  const int cols[2] = {wl->cs, wl->ce};
  for (int k = 0; k < 2; k++) {
    const char *f = g_ptr_array_index(row->fields, (guint)cols[k]);
    if (parse_timestamp(f, &t[k]))
      continue;
    if (!profile_parse_number(wl->windows_path, line, (guint)cols[k] + 1,
                              k == 0 ? "start" : "end", f, &t[k], NULL)) {
      g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                  "%s:%u: column %d (%s): '%s' is neither seconds nor "
                  "'YYYY/MM/DD hh:mm:ss.fff'",
                  wl->windows_path, line, cols[k] + 1,
                  k == 0 ? "start" : "end", f);
      return FALSE;
    }
    t[k] += wl->s[0].t;  /* seconds since the first sample */
  }
  if (!(t[1] > t[0])) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: column %d (end): the window ends before it starts",
                wl->windows_path, line, wl->ce + 1);
    return FALSE;
  }
  if (t[0] < wl->s[0].t || t[1] > wl->s[wl->n - 1].t) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE,
                "%s:%u: window %.6f-%.6f s (from the first sample) is "
                "outside the sampled span 0-%.6f s of %s",
                wl->windows_path, line, t[0] - wl->s[0].t, t[1] - wl->s[0].t,
                wl->s[wl->n - 1].t - wl->s[0].t, wl->samples_path);
    return FALSE;
  }
  double count = 1;
  if (wl->cc >= 0 &&
      !profile_parse_positive(wl->windows_path, line, (guint)wl->cc + 1,
                              "count",
                              g_ptr_array_index(row->fields, (guint)wl->cc),
                              &count, error))
    return FALSE;
  double e;
  guint sm, mem;
  if (integrate(wl->s, wl->n, t[0], t[1], &e, &sm, &mem) == 0) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE,
                "%s:%u: window of %.3f ms contains no power sample of %s: "
                "the sampling period is too long for it (repeat the kernel "
                "for seconds, see docs/validation.md)",
                wl->windows_path, line, (t[1] - t[0]) * 1e3, wl->samples_path);
    return FALSE;
  }
  if (!(e > 0)) {
    g_set_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT,
                "%s:%u: window energy %g J is not positive", wl->windows_path,
                line, e);
    return FALSE;
  }
  ProfileOp *op = g_hash_table_lookup(wl->by_name, kname);
  if (op == NULL) {
    op = g_new0(ProfileOp, 1);
    op->name = g_strdup(kname);
    op->klass = SIM_CLASS_OTHER;
    op->count = 1;
    op->points = g_array_new(FALSE, FALSE, sizeof(ProfilePoint));
    g_ptr_array_add(wl->p->ops, op);
    g_hash_table_insert(wl->by_name, op->name, op);
  }
  g_autofree char *key = g_strdup_printf("%s\x1f%u\x1f%u", kname, mem, sm);
  Acc *acc = g_hash_table_lookup(wl->accs, key);
  if (acc == NULL) {
    acc = g_new0(Acc, 1);
    g_hash_table_insert(wl->accs, g_strdup(key), acc);
    ProfilePoint pt = {sm, mem, 0, 0};
    g_array_append_val(op->points, pt);
  }
  acc->time_sum += (t[1] - t[0]) / count;
  acc->energy_sum += e / count;
  acc->n++;
  return TRUE;
}

/* Every point's time and energy: the mean of its windows. */
static void window_means(Profile *p, GHashTable *accs)
{
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
}

Profile *profile_load_nvml(const char *samples_path, const char *windows_path,
                           GError **error)
{
  g_return_val_if_fail(samples_path != NULL && windows_path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_autoptr(GArray) samples = load_samples(samples_path, error);
  if (samples == NULL)
    return NULL;
  g_autofree char *text = NULL;
  GError *err = NULL;
  CsvReader r;
  CsvRow row;
  if (!profile_csv_open(windows_path, &text, &r, &row, error))
    return NULL;
  Windows wl = {samples_path, windows_path, (const Sample *)samples->data,
                samples->len, -1, -1, -1, -1, 0, NULL, NULL, NULL};
  if (!window_columns(&wl, &row, error)) {
    profile_csv_row_clear(&row);
    return NULL;
  }
  g_autoptr(Profile) p = profile_new(windows_path, PROFILE_KERNEL);
  /* (kernel, mem, sm) -> Acc, in order of first appearance. */
  g_autoptr(GHashTable) accs =
      g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
  g_autoptr(GHashTable) by_name = g_hash_table_new(g_str_hash, g_str_equal);
  wl.p = p;
  wl.accs = accs;
  wl.by_name = by_name;
  gboolean ok = TRUE;
  guint n_rows = 0;
  while (ok && profile_csv_next(&r, &row, &err)) {
    n_rows++;
    ok = window_row(&wl, &row, error);
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
  profile_csv_row_clear(&row);
  if (!ok)
    return NULL;
  window_means(p, accs);
  profile_sort_points(p);
  return g_steal_pointer(&p);
}
