/* traces/import_select.c -- steps 1-5 of the import builder (see
 * traces/import_build.c): launch times and operator work, the window each
 * rank keeps, and per rank its selected ops, phases, streams, order and
 * recorded dependencies (trace_analyse_rank).
 */
#include "traces/import-private.h"
#include "traces/classify.h"
#include "sim/search.h"
#include "io/fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- the builder -------------------------------------------------------- */

static int cmp_launch(const void *a, const void *b)
{
  const TraceRawLaunch *x = a, *y = b;
  return x->corr < y->corr ? -1 : x->corr > y->corr;
}

static int cmp_range_start(const void *a, const void *b)
{
  const TraceRawRange *x = a, *y = b;
  if (x->start_ns != y->start_ns)
    return x->start_ns < y->start_ns ? -1 : 1;
  return x->end_ns < y->end_ns ? -1 : x->end_ns > y->end_ns;
}

int trace_cmp_i64(const void *a, const void *b)
{
  gint64 x = *(const gint64 *)a, y = *(const gint64 *)b;
  return x < y ? -1 : x > y;
}

/* Parses a member list "[0, 1, 2]" / "0,1,2" into ascending distinct
 * ranks; NULL when malformed or empty. */
GArray *trace_parse_members(const char *s)
{
  if (s == NULL)
    return NULL;
  GArray *a = g_array_new(FALSE, FALSE, sizeof(gint64));
  const char *p = s;
  while (*p != '\0') {
    if (g_ascii_isdigit(*p)) {
      gint64 v = 0;
      while (g_ascii_isdigit(*p)) {
        if (v > G_MAXINT32) {
          g_array_unref(a);
          return NULL;
        }
        v = v * 10 + (*p++ - '0');
      }
      g_array_append_val(a, v);
    } else if (*p == '-') {
      g_array_unref(a);
      return NULL;
    } else {
      p++;
    }
  }
  if (a->len == 0) {
    g_array_unref(a);
    return NULL;
  }
  g_array_sort(a, trace_cmp_i64);
  guint k = 1;
  for (guint i = 1; i < a->len; i++)
    if (g_array_index(a, gint64, i) != g_array_index(a, gint64, k - 1))
      g_array_index(a, gint64, k++) = g_array_index(a, gint64, i);
  g_array_set_size(a, k);
  return a;
}


static void windows_clear(Window *win, guint n)
{
  if (win == NULL)
    return;
  for (guint i = 0; i < n; i++)
    if (win[i].steps != NULL)
      g_array_unref(win[i].steps);
  g_free(win);
}


void trace_build_clear(Build *b)
{
  if (b->rw != NULL)
    for (guint i = 0; i < b->n; i++) {
      if (b->rw[i].sel != NULL)
        g_array_unref(b->rw[i].sel);
      if (b->rw[i].deps != NULL)
        g_array_unref(b->rw[i].deps);
      g_free(b->rw[i].stream_off);
    }
  g_free(b->rw);
  g_free(b->global);
  windows_clear(b->win, b->n);
  if (b->gkeys != NULL)
    g_ptr_array_unref(b->gkeys);
  if (b->gkey_index != NULL)
    g_hash_table_unref(b->gkey_index);
}

/* Workload rank of global rank g, or -1 when g was not imported. */
gint trace_local_rank(const Build *b, gint64 g)
{
  guint32 at;
  SIM_LOWER_BOUND(at, 0, b->n, k, b->global[k], g);
  return at < b->n && b->global[at] == g ? (gint)at : -1;
}

/* Interns a member list of workload ranks; returns its key index. */
guint32 trace_gkey_intern(Build *b, GArray *local)
{
  GString *k = g_string_new(NULL);
  for (guint i = 0; i < local->len; i++)
    g_string_append_printf(k, i ? ",%u" : "%u",
                           g_array_index(local, guint32, i));
  gpointer v = g_hash_table_lookup(b->gkey_index, k->str);
  if (v != NULL) {
    g_string_free(k, TRUE);
    g_array_unref(local);
    return GPOINTER_TO_UINT(v) - 1;
  }
  g_ptr_array_add(b->gkeys, local);
  guint32 idx = b->gkeys->len - 1;
  g_hash_table_insert(b->gkey_index, g_string_free(k, FALSE),
                      GUINT_TO_POINTER(idx + 1));
  return idx;
}

/* Launch time of every op: its launch record's CPU time, else GPU start. */
static void resolve_launches(TraceRawRank *raw)
{
  GArray *l = raw->launches;
  g_array_sort(l, cmp_launch);
  const TraceRawLaunch *la = (const TraceRawLaunch *)(void *)l->data;
  for (guint i = 0; i < raw->ops->len; i++) {
    TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, i);
    op->launch_ns = op->ts_ns;
    if (op->corr < 0 || l->len == 0)
      continue;
    guint32 at;
    SIM_LOWER_BOUND(at, 0, l->len, k, la[k].corr, op->corr);
    if (at < l->len && la[at].corr == op->corr)
      op->launch_ns = la[at].ts_ns;
  }
}

/* ---- kernel shapes -----------------------------------------------------
 *
 * A kernel's work comes from the CPU operator that launched it: the
 * kernel's correlation id finds its runtime launch; the launch's External
 * id finds the cpu_op with the same External id (how Kineto links them);
 * when no cpu_op carries that id (sampled or post-processed traces renumber
 * one side), the innermost cpu_op on the launch's thread whose time range
 * holds the launch's start is taken instead (PyTorch launches inside the
 * operator that issues the kernel, and the operators on one thread nest).
 * An operator that launches several kernels gives its whole work to the
 * longest of them (first in the file on a tie), its "main" kernel: GEMMs
 * come with split-K reductions or casts and layer norm backward with a
 * small second kernel; those keep class-only pricing.  The work's
 * FLOP/byte ratio, which decides the main kernel's clock sensitivity, is
 * the operator's.  Only kernels take work (memcpy and memset activities
 * are priced by their class: a host copy's bytes cross PCIe, not DRAM). */

/* Position of correlation id corr in the launch table (sorted), or -1. */
static gint64 launch_pos(const TraceRawRank *raw, gint64 corr)
{
  const GArray *l = raw->launches;
  const TraceRawLaunch *la = (const TraceRawLaunch *)(void *)l->data;
  guint32 at;
  SIM_LOWER_BOUND(at, 0, l->len, k, la[k].corr, corr);
  return at < l->len && la[at].corr == corr ? (gint64)at : -1;
}

typedef struct {
  gint64 tid, ts, end;
  guint32 idx;
  gboolean is_op;
} SweepKey;

/* By thread, then time; at one time operators before launches, and the
 * outer (longer) operator first. */
static int cmp_sweep(const void *a, const void *b)
{
  const SweepKey *x = a, *y = b;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->is_op != y->is_op)
    return x->is_op ? -1 : 1;
  if (x->end != y->end)
    return x->end > y->end ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_ext(const void *a, const void *b)
{
  const gint64 *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The cpu_op of every launch (G_MAXUINT32: none), launches in table order
 * (sorted by correlation id).  Returns a new array. */
static guint32 *launch_ops(const TraceRawRank *raw)
{
  guint nl = raw->launches->len, no = raw->cpu_ops->len;
  const TraceRawLaunch *la = (const TraceRawLaunch *)(void *)
                                 raw->launches->data;
  const TraceRawCpuOp *co = (const TraceRawCpuOp *)(void *)
                                raw->cpu_ops->data;
  guint32 *out = g_new(guint32, MAX(nl, 1));
  for (guint i = 0; i < nl; i++)
    out[i] = G_MAXUINT32;
  /* Containment: one sweep over (thread, time) with the stack of open
   * operators. */
  g_autofree SweepKey *keys = g_new(SweepKey, MAX(nl + no, 1));
  guint n = 0;
  for (guint i = 0; i < no; i++)
    keys[n++] = (SweepKey){co[i].tid, co[i].ts_ns, co[i].end_ns, i, TRUE};
  for (guint i = 0; i < nl; i++)
    keys[n++] = (SweepKey){la[i].tid, la[i].ts_ns, 0, i, FALSE};
  qsort(keys, n, sizeof *keys, cmp_sweep);
  g_autofree guint32 *stack = g_new(guint32, MAX(no, 1));
  guint depth = 0;
  gint64 tid = G_MININT64;
  for (guint i = 0; i < n; i++) {
    const SweepKey *k = &keys[i];
    if (k->tid != tid) {
      depth = 0;
      tid = k->tid;
    }
    while (depth > 0 && co[stack[depth - 1]].end_ns <= k->ts)
      depth--;
    if (k->is_op)
      stack[depth++] = k->idx;
    else if (depth > 0)
      out[k->idx] = stack[depth - 1];
  }
  /* External ids, where they match, win. */
  g_autofree gint64 *ext = g_new(gint64, 2 * MAX(no, 1));
  guint ne = 0;
  for (guint i = 0; i < no; i++)
    if (co[i].ext >= 0) {
      ext[2 * ne] = co[i].ext;
      ext[2 * ne + 1] = i;
      ne++;
    }
  qsort(ext, ne, 2 * sizeof(gint64), cmp_ext);
  for (guint i = 0; i < nl && ne > 0; i++) {
    if (la[i].ext < 0)
      continue;
    guint32 at;
    SIM_LOWER_BOUND(at, 0, ne, k, ext[2 * k], la[i].ext);
    if (at < ne && ext[2 * at] == la[i].ext)
      out[i] = (guint32)ext[2 * at + 1];
  }
  return out;
}

/* Gives each operator's work to its main kernel (TraceRawOp.work).  Needs
 * the launch table sorted (resolve_launches). */
static void resolve_work(TraceRawRank *raw)
{
  for (guint k = 0; k < raw->ops->len; k++)
    g_array_index(raw->ops, TraceRawOp, k).work = G_MAXUINT32;
  if (raw->works->len == 0 || raw->launches->len == 0)
    return;
  g_autofree guint32 *lop = launch_ops(raw);
  guint no = raw->cpu_ops->len;
  g_autofree guint32 *main_op = g_new(guint32, MAX(no, 1));
  for (guint c = 0; c < no; c++)
    main_op[c] = G_MAXUINT32;
  for (guint k = 0; k < raw->ops->len; k++) {
    const TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, k);
    if (op->kind != TRACE_RAW_KERNEL || op->comm != G_MAXUINT32 ||
        op->corr < 0)
      continue;
    gint64 l = launch_pos(raw, op->corr);
    if (l < 0 || lop[l] == G_MAXUINT32)
      continue;
    guint32 c = lop[l];
    if (g_array_index(raw->cpu_ops, TraceRawCpuOp, c).work == G_MAXUINT32)
      continue;
    if (main_op[c] == G_MAXUINT32 ||
        op->dur_ns > g_array_index(raw->ops, TraceRawOp, main_op[c]).dur_ns)
      main_op[c] = k;
  }
  for (guint c = 0; c < no; c++)
    if (main_op[c] != G_MAXUINT32)
      g_array_index(raw->ops, TraceRawOp, main_op[c]).work =
          g_array_index(raw->cpu_ops, TraceRawCpuOp, c).work;
}


int trace_cmp_time(const void *a, const void *b)
{
  const TimeKey *x = a, *y = b;
  if (x->t != y->t)
    return x->t < y->t ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Iteration ranges of a raw rank, sorted by start (new array). */
GArray *trace_step_ranges(const TraceRawRank *raw)
{
  GArray *s = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  for (guint i = 0; i < raw->ranges->len; i++) {
    const TraceRawRange *r = &g_array_index(raw->ranges, TraceRawRange, i);
    if (r->step >= 0)
      g_array_append_val(s, *r);
  }
  g_array_sort(s, cmp_range_start);
  return s;
}

/* The step mode an options record asks for (resolving TRACE_STEP_AUTO). */
TraceStep trace_step_mode(const TraceImportOptions *opt)
{
  if (opt->step != TRACE_STEP_AUTO)
    return opt->step;
  if (opt->iteration == TRACE_ITERATION_ALL)
    return TRACE_STEP_ALL;
  return opt->iteration != 0 ? TRACE_STEP_INDEX : TRACE_STEP_MEDIAN;
}

/* Index of the step of median CPU duration among s (sorted by start): the
 * lower median, the earlier step on a tie. */
static guint median_step(const GArray *s)
{
  g_autofree TimeKey *k = g_new(TimeKey, MAX(s->len, 1));
  for (guint i = 0; i < s->len; i++) {
    const TraceRawRange *r = &g_array_index(s, TraceRawRange, i);
    k[i].t = trace_ns_sub(r->end_ns, r->start_ns);
    k[i].pos = i;
  }
  qsort(k, s->len, sizeof *k, trace_cmp_time);
  return k[(s->len - 1) / 2].pos;
}

static GArray *one_range(const TraceRawRange *r)
{
  GArray *a = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  g_array_append_vals(a, r, 1);
  return a;
}

/* The index (in time order) of the step the options choose among the
 * reference rank's steps rs (mode first, median, a number or an index). */
static gboolean chosen_step(const Build *b, TraceStep mode, gint ref,
                            const GArray *rs, guint *out, GError **error)
{
  const TraceImportOptions *opt = b->opt;
  guint idx = 0;
  switch (mode) {
  case TRACE_STEP_FIRST:
    idx = 0;
    break;
  case TRACE_STEP_MEDIAN:
    idx = median_step(rs);
    break;
  case TRACE_STEP_NUMBER:
    for (idx = 0; idx < rs->len; idx++)
      if (g_array_index(rs, TraceRawRange, idx).step == opt->step_number)
        break;
    if (idx == rs->len) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "step %" G_GINT64_FORMAT " does not exist: %s marks %u "
                  "steps (%" G_GINT64_FORMAT " to %" G_GINT64_FORMAT ")",
                  opt->step_number, b->rw[ref].raw->path, rs->len,
                  g_array_index(rs, TraceRawRange, 0).step,
                  g_array_index(rs, TraceRawRange, rs->len - 1).step);
      return FALSE;
    }
    break;
  default: /* TRACE_STEP_INDEX */
    if ((guint)opt->iteration >= rs->len) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "iteration %d out of range: %s marks %u iterations "
                  "(steps %" G_GINT64_FORMAT " to %" G_GINT64_FORMAT ")",
                  opt->iteration, b->rw[ref].raw->path, rs->len,
                  g_array_index(rs, TraceRawRange, 0).step,
                  g_array_index(rs, TraceRawRange, rs->len - 1).step);
      return FALSE;
    }
    idx = (guint)opt->iteration;
    break;
  }
  *out = idx;
  return TRUE;
}

/* The start of the first launch (kernel, copy, memset) in [t0, t1), or
 * G_MAXINT64. */
static gint64 first_launch(const TraceRawRank *r, gint64 t0, gint64 t1)
{
  gint64 first = G_MAXINT64;
  for (guint k = 0; k < r->launches->len; k++) {
    const TraceRawLaunch *l = &g_array_index(r->launches, TraceRawLaunch, k);
    TraceCall c = (TraceCall)l->call;
    if ((c == TRACE_CALL_LAUNCH || c == TRACE_CALL_MEMCPY ||
         c == TRACE_CALL_MEMSET) && l->ts_ns >= t0 && l->ts_ns < t1)
      first = MIN(first, l->ts_ns);
  }
  return first;
}

/* One step of a loop costs one period wherever the loop is cut.  Cut at
 * the step's first launch and the next step's: the CPU work at the top
 * of the loop (data loading) then closes the window, overlapping the GPU
 * work the step left running, as it did in the measured loop, instead of
 * opening it on an idle GPU.  The ops imported are the same. */
static void loop_phase(const TraceRawRank *r, const TraceRawRange *step,
                       const TraceRawRange *next, Window *win)
{
  gint64 f0 = first_launch(r, step->start_ns, step->end_ns);
  gint64 f1 = first_launch(r, next->start_ns, next->end_ns);
  if (f0 == G_MAXINT64 || f1 == G_MAXINT64)
    return;
  win->w0 = win->h0 = f0;
  win->w1 = win->h1 = f1;
}

/* Each rank's window: its step with the chosen number, else its idx-th
 * step (warned), else (no steps at all) everything (warned). */
static gboolean align_steps(Build *b, Window *win, GPtrArray *steps,
                            guint idx, gint64 number, GError **error)
{
  const TraceImportOptions *opt = b->opt;
  guint n = b->n;
  for (guint i = 0; i < n; i++) {
    GArray *s = g_ptr_array_index(steps, i);
    const TraceRawRange *hit = NULL;
    for (guint k = 0; k < s->len && hit == NULL; k++)
      if (g_array_index(s, TraceRawRange, k).step == number)
        hit = &g_array_index(s, TraceRawRange, k);
    if (hit == NULL && s->len > idx) {
      hit = &g_array_index(s, TraceRawRange, idx);
      trace_warn(opt, "%s: no step %" G_GINT64_FORMAT "; using its "
                 "step %u in time order (step %" G_GINT64_FORMAT ") instead",
                 b->rw[i].raw->path, number, idx, hit->step);
    }
    if (hit == NULL) {
      if (s->len == 0) {
        trace_warn(opt, "%s marks no iterations; importing all its events",
                   b->rw[i].raw->path);
        continue;
      }
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "step %" G_GINT64_FORMAT " (%u-th in time order) is out "
                  "of range for %s (%u steps)", number, idx,
                  b->rw[i].raw->path, s->len);
      return FALSE;
    }
    win[i].w0 = win[i].h0 = hit->start_ns;
    win[i].w1 = win[i].h1 = hit->end_ns;
    win[i].step_tid = hit->tid;
    win[i].steps = one_range(hit);
    if (hit + 1 < &g_array_index(s, TraceRawRange, 0) + s->len)
      loop_phase(b->rw[i].raw, hit, hit + 1, &win[i]);
  }
  return TRUE;
}

/* Picks the windows of every rank (see Window) and the label. */
gboolean trace_pick_windows(Build *b, Window *win, GString *label,
                            GError **error)
{
  const TraceImportOptions *opt = b->opt;
  guint n = b->n;
  for (guint i = 0; i < n; i++) {
    win[i].w0 = win[i].h0 = 1;
    win[i].w1 = win[i].h1 = 0; /* everything */
    win[i].step_tid = -1;
  }
  g_string_assign(label, "all");
  TraceStep mode = trace_step_mode(opt);
  if (mode == TRACE_STEP_INDEX && opt->iteration < 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "iteration %d: must be >= 0 (or TRACE_ITERATION_ALL)",
                opt->iteration);
    return FALSE;
  }
  if ((guint)mode > TRACE_STEP_INDEX) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                "step mode %d is not one of first, median, all, a number",
                (int)mode);
    return FALSE;
  }
  g_autoptr(GPtrArray) steps = g_ptr_array_new_with_free_func(
      (GDestroyNotify)g_array_unref);
  gint ref = -1;
  for (guint i = 0; i < n; i++) {
    GArray *s = trace_step_ranges(b->rw[i].raw);
    if (ref < 0 && s->len > 0)
      ref = (gint)i;
    g_ptr_array_add(steps, s);
  }
  if (mode == TRACE_STEP_ALL) {
    /* Every GPU event; the host streams from the first step's start to
     * the last step's end, with a marker at each step's start. */
    for (guint i = 0; i < n; i++) {
      GArray *s = g_ptr_array_index(steps, i);
      if (s->len == 0)
        continue;
      win[i].h0 = g_array_index(s, TraceRawRange, 0).start_ns;
      win[i].h1 = g_array_index(s, TraceRawRange, s->len - 1).end_ns;
      for (guint k = 1; k < s->len; k++)
        win[i].h1 = MAX(win[i].h1, g_array_index(s, TraceRawRange, k).end_ns);
      win[i].step_tid = g_array_index(s, TraceRawRange, 0).tid;
      win[i].steps = g_array_ref(s);
    }
    return TRUE;
  }
  if (ref < 0) {
    if (mode == TRACE_STEP_INDEX || mode == TRACE_STEP_NUMBER) {
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "step %s: %s marks no steps (no ProfilerStep#N or NVTX "
                  "iteration ranges); import all events instead",
                  mode == TRACE_STEP_NUMBER ? "number" : "index",
                  b->rw[0].raw->path);
      return FALSE;
    }
    return TRUE;
  }
  GArray *rs = g_ptr_array_index(steps, ref);
  guint idx;
  if (!chosen_step(b, mode, ref, rs, &idx, error))
    return FALSE;
  gint64 number = g_array_index(rs, TraceRawRange, idx).step;
  g_string_printf(label, "step %" G_GINT64_FORMAT, number);
  return align_steps(b, win, steps, idx, number, error);
}

typedef struct {
  gint64 device, stream;
} StreamKey;

static int cmp_stream_key(const void *a, const void *b)
{
  const StreamKey *x = a, *y = b;
  if (x->device != y->device)
    return x->device < y->device ? -1 : 1;
  return x->stream < y->stream ? -1 : x->stream > y->stream;
}

/* Sorting context for ops of one rank (qsort_r-free: a static-free
 * approach using a key array). */
typedef struct {
  guint32 stream;
  gint64 ts, corr;
  guint32 raw;
} OrderKey;

static int cmp_order(const void *a, const void *b)
{
  const OrderKey *x = a, *y = b;
  if (x->stream != y->stream)
    return x->stream < y->stream ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->corr != y->corr)
    return x->corr < y->corr ? -1 : 1;
  return x->raw < y->raw ? -1 : x->raw > y->raw;
}


int trace_cmp_corr(const void *a, const void *b)
{
  const CorrKey *x = a, *y = b;
  if (x->corr != y->corr)
    return x->corr < y->corr ? -1 : 1;
  return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Step 2: the ops launched in [w0, w1) (w0 > w1: all), as order keys
 * (keys) and their streams (skeys, in the same order).  FALSE when none. */
static gboolean select_ops(const TraceRawRank *raw, gint64 w0, gint64 w1,
                           GArray *keys, GArray *skeys, GError **error)
{
  for (guint k = 0; k < raw->ops->len; k++) {
    const TraceRawOp *op = &g_array_index(raw->ops, TraceRawOp, k);
    if (w0 <= w1 && (op->launch_ns < w0 || op->launch_ns >= w1))
      continue;
    OrderKey ok = {0, op->ts_ns, op->corr, k};
    g_array_append_val(keys, ok);
    StreamKey sk = {op->device, op->stream};
    g_array_append_val(skeys, sk);
  }
  if (keys->len == 0) {
    if (raw->ops->len == 0)
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: no GPU activity (kernels, memcpys or memsets)",
                  raw->path);
    else
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_INVALID,
                  "%s: the selected iteration holds no GPU activity",
                  raw->path);
    return FALSE;
  }

  return TRUE;
}

/* Step 4: rank rw's streams, distinct (device, stream) in ascending order
 * (returned), and its selection grouped by stream in GPU order. */
static GArray *rank_streams(const TraceImportOptions *opt, RankWork *rw,
                            GArray *keys, const GArray *skeys,
                            GError **error)
{
  TraceRawRank *raw = rw->raw;
  /* Streams: distinct (device, stream) in ascending order. */
  g_autoptr(GArray) streams = g_array_copy((GArray *)skeys);
  g_array_sort(streams, cmp_stream_key);
  guint ns = 0;
  for (guint k = 0; k < streams->len; k++)
    if (ns == 0 || cmp_stream_key(&g_array_index(streams, StreamKey, k),
                                  &g_array_index(streams, StreamKey,
                                                 ns - 1)) != 0)
      g_array_index(streams, StreamKey, ns++) =
          g_array_index(streams, StreamKey, k);
  g_array_set_size(streams, ns);
  if (ns > SIM_MAX_STREAMS) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_UNSUPPORTED,
                "%s: %u (device, stream) pairs carry GPU activity; at most "
                "%d streams per rank are supported", raw->path, ns,
                SIM_MAX_STREAMS);
    return NULL;
  }
  guint n_devices = 0;
  for (guint k = 0; k < ns; k++)
    if (k == 0 || g_array_index(streams, StreamKey, k).device !=
                      g_array_index(streams, StreamKey, k - 1).device)
      n_devices++;
  if (n_devices > 1)
    trace_warn(opt, "%s: GPU activity on %u devices; the rank replays it "
               "all on one GPU", raw->path, n_devices);
  gint64 dev0 = g_array_index(streams, StreamKey, 0).device;
  rw->device = g_hash_table_lookup(raw->devices, &dev0);
  for (guint k = 0; k < keys->len; k++) {
    const StreamKey *sk = &g_array_index(skeys, StreamKey, k);
    guint32 at;
    SIM_LOWER_BOUND(at, 0, ns, m,
                    cmp_stream_key(&g_array_index(streams, StreamKey, m), sk),
                    0);
    g_array_index(keys, OrderKey, k).stream = at;
  }
  g_array_sort(keys, cmp_order);
  guint32 n = keys->len;
  rw->n_streams = ns;
  rw->stream_off = g_new0(guint32, ns + 1);
  rw->sel = g_array_sized_new(FALSE, TRUE, sizeof(Sel), n);
  g_array_set_size(rw->sel, n);
  for (guint32 k = 0; k < n; k++) {
    const OrderKey *ok = &g_array_index(keys, OrderKey, k);
    Sel *s = &g_array_index(rw->sel, Sel, k);
    s->raw = ok->raw;
    s->stream = ok->stream;
    rw->stream_off[ok->stream + 1]++;
  }
  for (guint s = 0; s < ns; s++)
    rw->stream_off[s + 1] += rw->stream_off[s];
  rw->n_gpu = n;
  rw->ns_gpu = ns;

  return g_steal_pointer(&streams);
}

/* Step 3: the phase of every selected op.  Sweeps launches in time order
 * against ranges sorted by start, keeping per phase the furthest end of
 * the ranges begun so far. */
static void assign_phases(RankWork *rw)
{
  const TraceRawRank *raw = rw->raw;
  guint32 n = rw->n_gpu;
  g_autoptr(GArray) pr = g_array_new(FALSE, FALSE, sizeof(TraceRawRange));
  for (guint k = 0; k < raw->ranges->len; k++) {
    const TraceRawRange *r = &g_array_index(raw->ranges, TraceRawRange, k);
    if (r->phase >= 0 && r->phase < SIM_PHASE_COUNT)
      g_array_append_val(pr, *r);
  }
  g_array_sort(pr, cmp_range_start);
  SimPhase dflt = pr->len > 0 ? SIM_PHASE_FORWARD : SIM_PHASE_OTHER;
  g_autofree TimeKey *tk = g_new(TimeKey, n);
  for (guint32 k = 0; k < n; k++) {
    const Sel *s = &g_array_index(rw->sel, Sel, k);
    tk[k].t = g_array_index(raw->ops, TraceRawOp, s->raw).launch_ns;
    tk[k].pos = k;
  }
  qsort(tk, n, sizeof *tk, trace_cmp_time);
  gint64 reach[SIM_PHASE_COUNT];
  for (guint p = 0; p < SIM_PHASE_COUNT; p++)
    reach[p] = G_MININT64;
  guint ri = 0;
  for (guint32 k = 0; k < n; k++) {
    gint64 t = tk[k].t;
    for (; ri < pr->len &&
           g_array_index(pr, TraceRawRange, ri).start_ns <= t; ri++) {
      const TraceRawRange *r = &g_array_index(pr, TraceRawRange, ri);
      reach[r->phase] = MAX(reach[r->phase], r->end_ns);
    }
    SimPhase ph = dflt;
    if (reach[SIM_PHASE_OPTIMIZER] > t)
      ph = SIM_PHASE_OPTIMIZER;
    else if (reach[SIM_PHASE_BACKWARD] > t)
      ph = SIM_PHASE_BACKWARD;
    else if (reach[SIM_PHASE_FORWARD] > t)
      ph = SIM_PHASE_FORWARD;
    g_array_index(rw->sel, Sel, tk[k].pos).phase = (guint8)ph;
  }

}

/* Step 5: the cross-stream waits the trace records, as rw->deps. */
static void recorded_waits(const TraceImportOptions *opt, RankWork *rw,
                           const GArray *streams)
{
  const TraceRawRank *raw = rw->raw;
  guint32 n = rw->n_gpu;
  guint ns = rw->n_streams;
  rw->deps = g_array_new(FALSE, FALSE, sizeof(guint32) * 2);
  if (raw->syncs->len == 0)
    return;
  /* Per stream, its ops by correlation id. */
  g_autofree CorrKey *ck = g_new(CorrKey, n);
  for (guint32 k = 0; k < n; k++) {
    const Sel *s = &g_array_index(rw->sel, Sel, k);
    ck[k].corr = g_array_index(raw->ops, TraceRawOp, s->raw).corr;
    ck[k].pos = k;
  }
  for (guint s = 0; s < ns; s++)
    qsort(ck + rw->stream_off[s], rw->stream_off[s + 1] - rw->stream_off[s],
          sizeof *ck, trace_cmp_corr);
  guint dropped = 0;
  for (guint k = 0; k < raw->syncs->len; k++) {
    const TraceRawSync *sy = &g_array_index(raw->syncs, TraceRawSync, k);
    StreamKey cs = {sy->device, sy->stream}, ps = {sy->device,
                                                   sy->wait_on_stream};
    gint c_stream = -1, p_stream = -1;
    for (guint s = 0; s < ns; s++) {
      if (cmp_stream_key(&g_array_index(streams, StreamKey, s), &cs) == 0)
        c_stream = (gint)s;
      if (cmp_stream_key(&g_array_index(streams, StreamKey, s), &ps) == 0)
        p_stream = (gint)s;
    }
    if (c_stream < 0 || p_stream < 0 || c_stream == p_stream)
      continue;
    /* consumer: smallest corr > sy->corr on c_stream */
    CorrKey *ca = ck + rw->stream_off[c_stream];
    guint cn = rw->stream_off[c_stream + 1] - rw->stream_off[c_stream];
    guint32 at;
    SIM_UPPER_BOUND(at, 0, cn, m, ca[m].corr, sy->corr);
    if (at >= cn || ca[at].corr < 0)
      continue;
    guint32 consumer = ca[at].pos;
    /* producer: largest corr < record_corr on p_stream */
    CorrKey *pa = ck + rw->stream_off[p_stream];
    guint pn = rw->stream_off[p_stream + 1] - rw->stream_off[p_stream];
    SIM_LOWER_BOUND(at, 0, pn, m, pa[m].corr, sy->record_corr);
    if (at == 0 || pa[at - 1].corr < 0)
      continue;
    guint32 producer = pa[at - 1].pos;
    const TraceRawOp *co = &g_array_index(
        raw->ops, TraceRawOp, g_array_index(rw->sel, Sel, consumer).raw);
    const TraceRawOp *po = &g_array_index(
        raw->ops, TraceRawOp, g_array_index(rw->sel, Sel, producer).raw);
    if (trace_ns_add(po->ts_ns, po->dur_ns) > trace_ns_add(co->ts_ns, 1000)) {
      dropped++;
      continue;
    }
    guint32 pair[2] = {consumer, producer};
    g_array_append_vals(rw->deps, pair, 1);
  }
  if (dropped > 0)
    trace_warn(opt, "%s: %u recorded stream waits contradict the recorded "
               "times and were ignored", raw->path, dropped);
}

/* Steps 2-5 for workload rank i: selection, phases, streams, order, deps. */
gboolean trace_analyse_rank(Build *b, guint i, gint64 w0, gint64 w1,
                            GError **error)
{
  RankWork *rw = &b->rw[i];
  resolve_launches(rw->raw);
  resolve_work(rw->raw);
  g_autoptr(GArray) keys = g_array_new(FALSE, FALSE, sizeof(OrderKey));
  g_autoptr(GArray) skeys = g_array_new(FALSE, FALSE, sizeof(StreamKey));
  if (!select_ops(rw->raw, w0, w1, keys, skeys, error))
    return FALSE;
  g_autoptr(GArray) streams = rank_streams(b->opt, rw, keys, skeys, error);
  if (streams == NULL)
    return FALSE;
  assign_phases(rw);
  recorded_waits(b->opt, rw, streams);
  return TRUE;
}
