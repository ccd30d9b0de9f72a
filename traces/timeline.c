/* traces/timeline.c -- Chrome trace-event JSON from engine observations.
 *
 * Output (the "JSON object format" of the Trace Event Format that Perfetto
 * and chrome://tracing read):
 *
 *   {"displayTimeUnit":"ns","otherData":{...},"traceEvents":[ EVENT, ... ]}
 *
 * Events (ts and dur in microseconds of simulated time, written as exact
 * decimals with three digits: nanosecond resolution):
 *   - per GPU g (pid = g) and stream s (tid = s), when first seen:
 *     metadata "process_name" ("GPU g"), "process_sort_index",
 *     "thread_name" ("stream s"), "thread_sort_index" ("ph":"M");
 *   - per kernel or communication op: a complete event ("ph":"X") named
 *     after the op, cat = its class, args {class, phase, kind, iteration,
 *     op (index in the rank's op array), sm_mhz and mem_mhz (kernels: the
 *     clocks actually run), power_w (board power while it runs alone),
 *     energy_j (power_w x duration), and for communication coll, bytes,
 *     group or peer};
 *   - per communication op that waited for its peers: a "blocked" complete
 *     event on the same stream from arrival to start, args {waiting_for,
 *     power_w, energy_j} (power when the blocked power is known);
 *   - per marker: an instant event ("ph":"i", thread scope);
 *   - per GPU, counter tracks ("ph":"C") "sm_mhz" (the clock of the latest
 *     kernel start, sampled when it changes) and "power_w" (board power
 *     P(t) = P_idle + sum of the increments of everything active, the
 *     engine's additive model; sampled at every change).
 *
 * Streaming: complete, blocked, instant and metadata events are written as
 * the engine reports ops, in the engine's (deterministic, not time-sorted)
 * order; viewers sort by time.  Counters need the overlap of all streams of
 * a GPU, so their change points are kept for the current iteration only
 * (the engine finishes iteration i before reporting any op of i+1; records
 * carry the iteration) and swept, sorted, when the iteration ends: memory
 * is bounded by one iteration's ops on the selected GPUs within the window,
 * never by the whole timeline.  The power counter is exact when the idle
 * and blocked powers given are the machine's (without per-GPU power
 * variability they are).
 *
 * Filters: a GPU subset and a window [t0, t1]: an op is written when its
 * interval overlaps the window; counter samples are written inside the
 * window (with the state at t0 when the sweep crosses it).
 *
 * Strings: names are escaped for JSON ('"', '\\', control characters) and
 * invalid UTF-8 bytes become U+FFFD, so any kernel name (C++ templates,
 * quotes) gives valid JSON.  Numbers are formatted with g_ascii_formatd
 * (no locale dependence); non-finite values are written as 0.
 *
 * Durability: the file is written to a temporary file next to the target
 * and renamed on close; on error it is removed (io/atomic.h).
 *
 * HDF5 (trace_timeline_open_h5): no events; the counter samples of the
 * same sweep are kept per GPU, one row whenever power or clock changes,
 * and stored by the close as /timelines/<run> of a results file
 * (io/results.h), which res_timeline_write makes appear whole or not at
 * all.
 */
#include "traces/timeline.h"
#include "io/atomic.h"
#include "io/fault.h"
#include "io/input.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef JOULESIM_VERSION
#define JOULESIM_VERSION "unknown"
#endif

G_DEFINE_QUARK(trace-timeline-error-quark, trace_timeline_error)

#define TL_FILE_BUFFER (1u << 20)

/* One change point of a GPU's counters within the current iteration. */
typedef struct {
  gint64 t;
  double dpower;    /* power increment added (edge +1) or removed (-1) */
  gint8 edge;       /* +1 an interval starts, -1 it ends, 0 a clock sample */
  guint8 kernel;    /* the interval is a kernel's (the limit holds) */
  guint8 stream;
  guint16 sm_mhz;   /* edge 0 */
} TlPoint;

typedef struct {
  guint64 streams_named;  /* bit s: thread metadata of stream s written */
  gboolean named;         /* process metadata written */
  GArray *points;         /* TlPoint of the current iteration */
  gboolean listed;        /* in TraceTimeline.dirty */
  double last_power;
  gboolean have_power;
  guint16 last_sm;
  gboolean have_sm;
  GArray *time_s, *power_w, *sm_mhz; /* HDF5: the samples (double) */
  double limit_w;         /* the board limit its records carry (0: none) */
} TlGpu;

struct TraceTimeline {
  char *path;             /* target */
  IoAtomic out;           /* the temporary file */
  FILE *f;
  char *fbuf;
  const SimWorkload *w;
  guint8 *sel;            /* n_ranks flags; NULL = every GPU */
  TlGpu **gpu;            /* n_ranks, created when first seen */
  gint64 t0, t1;          /* window; t1 = G_MAXINT64 when open */
  double idle_w, blocked_w;
  gboolean power;         /* idle power known: power counter on */
  char **esc;             /* JSON-escaped names, per name id, lazily */
  GString *ev;            /* the event being built */
  GArray *dirty;          /* guint32 GPUs with points this iteration */
  guint iter;
  gboolean started;       /* an event has been written (comma needed) */
  gboolean failed;
  int err;                /* errno of the first write failure */
  TraceTimelineCounts counts;
  /* HDF5 (trace_timeline_open_h5; run NULL: JSON): the timeline's name,
   * whether it may replace one, the new file's attributes (owned). */
  char *run;
  gboolean replace;
  ResMeta meta;
};

void trace_timeline_options_init(TraceTimelineOptions *opt)
{
  g_return_if_fail(opt != NULL);
  memset(opt, 0, sizeof *opt);
  opt->t1_ns = -1;
}

/* ---- output helpers ----------------------------------------------------------- */

/* Appends s as a JSON string literal (quotes included). */
static void json_string(GString *out, const char *s)
{
  g_string_append_c(out, '"');
  const char *p = s;
  while (*p != '\0') {
    /* Escape the longest valid prefix, then replace one bad byte. */
    const char *stop = NULL;
    g_utf8_validate(p, -1, &stop);
    for (; p < stop; p++) {
      guchar c = (guchar)*p;
      switch (c) {
      case '"': g_string_append(out, "\\\""); break;
      case '\\': g_string_append(out, "\\\\"); break;
      case '\n': g_string_append(out, "\\n"); break;
      case '\r': g_string_append(out, "\\r"); break;
      case '\t': g_string_append(out, "\\t"); break;
      default:
        if (c < 0x20)
          g_string_append_printf(out, "\\u%04x", c);
        else
          g_string_append_c(out, (char)c);
      }
    }
    if (*p != '\0') {
      g_string_append(out, "\\ufffd");
      p++;
    }
  }
  g_string_append_c(out, '"');
}

/* Appends ns as microseconds with three decimals (exact). */
static void append_us(GString *out, gint64 ns)
{
  if (ns < 0) {
    g_string_append_c(out, '-');
    ns = -ns;
  }
  g_string_append_printf(out, "%" G_GINT64_FORMAT ".%03d", ns / 1000,
                         (int)(ns % 1000));
}

/* Starts e afresh with a Chrome complete event's head: phase X on GPU g's
 * row of stream `stream`, over [t0, t1]. */
static void span_head(GString *e, guint g, guint stream, gint64 t0,
                      gint64 t1)
{
  g_string_truncate(e, 0);
  g_string_append_printf(e, "{\"ph\":\"X\",\"pid\":%u,\"tid\":%u,\"ts\":",
                         g, stream);
  append_us(e, t0);
  g_string_append(e, ",\"dur\":");
  append_us(e, t1 - t0);
}

/* Appends a number with printf format fmt, locale-independent; 0 when not
 * finite (JSON has no inf/nan). */
static void append_num(GString *out, const char *fmt, double v)
{
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  g_string_append(out, g_ascii_formatd(buf, sizeof buf, fmt,
                                       isfinite(v) ? v : 0.0));
}

static const char *tl_name(TraceTimeline *tl, guint32 id)
{
  if (tl->esc[id] == NULL) {
    GString *s = g_string_new(NULL);
    json_string(s, sim_workload_name(tl->w, id));
    tl->esc[id] = g_string_free(s, FALSE);
  }
  return tl->esc[id];
}

/* Writes the event in tl->ev (comma-separated from the previous one). */
static void tl_emit(TraceTimeline *tl)
{
  if (tl->failed)
    return;
  if (tl->started && fputs(",\n", tl->f) == EOF)
    goto fail;
  tl->started = TRUE;
  if (fwrite(tl->ev->str, 1, tl->ev->len, tl->f) != tl->ev->len)
    goto fail;
  return;
fail:
  tl->failed = TRUE;
  tl->err = errno != 0 ? errno : EIO;
}

static void tl_meta(TraceTimeline *tl, const char *name, guint gpu,
                    int tid, const char *key, const char *sval, long ival)
{
  GString *e = tl->ev;
  g_string_truncate(e, 0);
  g_string_append_printf(e, "{\"ph\":\"M\",\"pid\":%u,", gpu);
  if (tid >= 0)
    g_string_append_printf(e, "\"tid\":%d,", tid);
  g_string_append_printf(e, "\"name\":\"%s\",\"args\":{\"%s\":", name, key);
  if (sval != NULL)
    json_string(e, sval);
  else
    g_string_append_printf(e, "%ld", ival);
  g_string_append(e, "}}");
  tl_emit(tl);
  tl->counts.metadata++;
}

/* The state of GPU g, writing its process and stream metadata the first
 * time they appear. */
static TlGpu *tl_gpu(TraceTimeline *tl, guint g, guint stream)
{
  TlGpu *s = tl->gpu[g];
  if (s == NULL) {
    s = tl->gpu[g] = g_new0(TlGpu, 1);
    s->points = g_array_new(FALSE, FALSE, sizeof(TlPoint));
  }
  if (tl->run != NULL)
    return s; /* HDF5: no events */
  if (!s->named) {
    char name[48];
    g_snprintf(name, sizeof name, "GPU %u", g);
    tl_meta(tl, "process_name", g, -1, "name", name, 0);
    tl_meta(tl, "process_sort_index", g, -1, "sort_index", NULL, (long)g);
    s->named = TRUE;
  }
  if (stream < 64 && !(s->streams_named & (G_GUINT64_CONSTANT(1) << stream))) {
    char name[32];
    g_snprintf(name, sizeof name, "stream %u", stream);
    tl_meta(tl, "thread_name", g, (int)stream, "name", name, 0);
    tl_meta(tl, "thread_sort_index", g, (int)stream, "sort_index", NULL,
            (long)stream);
    s->streams_named |= G_GUINT64_CONSTANT(1) << stream;
  }
  return s;
}

static void tl_point(TraceTimeline *tl, guint g, TlGpu *s, TlPoint p)
{
  if (!s->listed) {
    s->listed = TRUE;
    g_array_append_val(tl->dirty, g);
  }
  g_array_append_val(s->points, p);
}

/* ---- counters ---------------------------------------------------------------- */

static gint cmp_point(gconstpointer pa, gconstpointer pb)
{
  const TlPoint *a = pa, *b = pb;
  if (a->t != b->t)
    return a->t < b->t ? -1 : 1;
  if (a->edge != b->edge)
    return a->edge < b->edge ? -1 : 1;
  if (a->stream != b->stream)
    return a->stream < b->stream ? -1 : 1;
  if (a->sm_mhz != b->sm_mhz)
    return a->sm_mhz < b->sm_mhz ? -1 : 1;
  return a->dpower < b->dpower ? -1 : a->dpower > b->dpower ? 1 : 0;
}

static void tl_counter(TraceTimeline *tl, guint g, gint64 t, const char *name,
                       double v, const char *fmt)
{
  GString *e = tl->ev;
  g_string_truncate(e, 0);
  g_string_append_printf(e, "{\"ph\":\"C\",\"pid\":%u,\"ts\":", g);
  append_us(e, t);
  g_string_append_printf(e, ",\"name\":\"%s\",\"args\":{\"%s\":", name, name);
  append_num(e, fmt, v);
  g_string_append(e, "}}");
  tl_emit(tl);
  tl->counts.counter++;
}

/* HDF5: one row of the state at t when power or clock changed. */
static void tl_row(TraceTimeline *tl, TlGpu *s, gint64 t, double power, gboolean have_clock,
                   guint16 sm)
{
  gboolean new_sm = have_clock && (!s->have_sm || s->last_sm != sm);
  gboolean new_power = !s->have_power || fabs(s->last_power - power) > 1e-9;
  if (!new_sm && !new_power)
    return;
  if (s->time_s == NULL) {
    s->time_s = g_array_new(FALSE, FALSE, sizeof(double));
    s->power_w = g_array_new(FALSE, FALSE, sizeof(double));
    s->sm_mhz = g_array_new(FALSE, FALSE, sizeof(double));
  }
  double ts = (double)t * 1e-9, f = have_clock ? (double)sm : NAN;
  g_array_append_val(s->time_s, ts);
  g_array_append_val(s->power_w, power);
  g_array_append_val(s->sm_mhz, f);
  tl->counts.counter++;
  s->last_power = power;
  s->have_power = TRUE;
  s->last_sm = sm;
  s->have_sm = have_clock;
}

/* Emits the counter samples of the state (power, clock) at time t when it
 * differs from the last sample written. */
static void tl_sample(TraceTimeline *tl, guint g, TlGpu *s, gint64 t,
                      double power, gboolean have_clock, guint16 sm)
{
  if (tl->run != NULL) {
    tl_row(tl, s, t, power, have_clock, sm);
    return;
  }
  if (have_clock && (!s->have_sm || s->last_sm != sm)) {
    tl_counter(tl, g, t, "sm_mhz", sm, "%.0f");
    s->last_sm = sm;
    s->have_sm = TRUE;
  }
  if (tl->power && (!s->have_power || fabs(s->last_power - power) > 1e-9)) {
    tl_counter(tl, g, t, "power_w", power, "%.3f");
    s->last_power = power;
    s->have_power = TRUE;
  }
}

/* Sweeps GPU g's change points of the finished iteration in time order and
 * writes its counter samples inside the window. */
/* Board power as the engine holds it: while a kernel runs, the sum of
 * what runs is cut to the limit (sim/engine.h). */
static double held(const TlGpu *s, double power, gint64 kernels)
{
  return kernels > 0 && s->limit_w > 0 && power > s->limit_w ? s->limit_w
                                                              : power;
}

static void tl_sweep(TraceTimeline *tl, guint g, TlGpu *s)
{
  GArray *pts = s->points;
  g_array_sort(pts, cmp_point);
  const TlPoint *p = (const TlPoint *)(void *)pts->data;
  double inc = 0.0;
  gint64 active = 0, kernels = 0;
  gboolean have_clock = s->have_sm;
  guint16 sm = s->last_sm;
  gboolean before = FALSE; /* swept points before t0 not yet sampled */
  for (guint i = 0; i < pts->len;) {
    gint64 t = p[i].t;
    if (t > tl->t1)
      break;
    if (t > tl->t0 && before) {
      tl_sample(tl, g, s, tl->t0, held(s, tl->idle_w + inc, kernels),
                have_clock, sm);
      before = FALSE;
    }
    for (; i < pts->len && p[i].t == t; i++) {
      if (p[i].edge == 0) {
        sm = p[i].sm_mhz;
        have_clock = TRUE;
      } else {
        inc += p[i].edge > 0 ? p[i].dpower : -p[i].dpower;
        active += p[i].edge;
        if (p[i].kernel)
          kernels += p[i].edge;
      }
    }
    /* Nothing active: exactly the baseline (no rounding residue). */
    if (active == 0)
      inc = 0.0;
    if (t < tl->t0) {
      before = TRUE;
    } else {
      before = FALSE;
      tl_sample(tl, g, s, t, held(s, tl->idle_w + inc, kernels), have_clock,
                sm);
    }
  }
  if (before)
    tl_sample(tl, g, s, tl->t0, held(s, tl->idle_w + inc, kernels),
              have_clock, sm);
  g_array_set_size(pts, 0);
  s->listed = FALSE;
}

static gint cmp_u32(gconstpointer a, gconstpointer b)
{
  guint32 x = *(const guint32 *)a, y = *(const guint32 *)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* Writes the counters of every GPU touched in the current iteration, in
 * GPU order. */
static void tl_flush_iteration(TraceTimeline *tl)
{
  g_array_sort(tl->dirty, cmp_u32);
  for (guint k = 0; k < tl->dirty->len; k++) {
    guint32 g = g_array_index(tl->dirty, guint32, k);
    tl_sweep(tl, g, tl->gpu[g]);
  }
  g_array_set_size(tl->dirty, 0);
}

/* ---- the observer ------------------------------------------------------------- */

static gboolean tl_overlaps(const TraceTimeline *tl, gint64 a, gint64 b)
{
  return b >= tl->t0 && a <= tl->t1;
}

/* Appends the args shared by kernel and communication events. */
static void tl_op_args(TraceTimeline *tl, const SimOp *op,
                       const SimOpRecord *rec)
{
  GString *e = tl->ev;
  g_string_append_printf(e, ",\"args\":{\"class\":\"%s\",\"phase\":\"%s\","
                         "\"kind\":\"%s\",\"iteration\":%u,\"op\":%u",
                         sim_class_name((SimOpClass)op->klass),
                         sim_phase_name((SimPhase)op->phase),
                         sim_kind_name((SimOpKind)op->kind), rec->iter,
                         rec->op);
  if (op->kind == SIM_OP_KERNEL)
    g_string_append_printf(e, ",\"sm_mhz\":%u,\"mem_mhz\":%u",
                           rec->clocks.sm_mhz, rec->clocks.mem_mhz);
  else if (op->kind == SIM_OP_HOST)
    ; /* CPU time: no clocks, no transfer */
  else {
    const SimShape *sh = &g_array_index(tl->w->shapes, SimShape, op->shape);
    g_string_append_printf(e, ",\"coll\":\"%s\",\"bytes\":",
                           op->kind == SIM_OP_COLLECTIVE
                             ? sim_coll_name((SimCollType)sh->coll)
                             : sim_kind_name((SimOpKind)op->kind));
    append_num(e, "%.17g", sh->bytes);
    g_string_append_printf(e, ",\"%s\":%u",
                           op->kind == SIM_OP_COLLECTIVE ? "group" : "peer",
                           sim_op_peer(&tl->w->ranks[rec->gpu], op));
  }
  double dur_s = (double)(rec->end_ns - rec->start_ns) * 1e-9;
  g_string_append(e, ",\"power_w\":");
  append_num(e, "%.3f", rec->power_w);
  g_string_append(e, ",\"energy_j\":");
  append_num(e, "%.9g", rec->power_w * dur_s);
  g_string_append(e, "}}");
}

void trace_timeline_observe(gpointer timeline, const SimOpRecord *rec)
{
  TraceTimeline *tl = timeline;
  const SimWorkload *w = tl->w;
  if (tl->failed || rec->gpu >= w->n_ranks ||
      rec->op >= w->ranks[rec->gpu].n_ops)
    return;
  if (rec->iter != tl->iter) {
    tl_flush_iteration(tl);
    tl->iter = rec->iter;
  }
  if (tl->sel != NULL && !tl->sel[rec->gpu])
    return;
  const SimOp *op = &w->ranks[rec->gpu].ops[rec->op];
  gboolean blocked = rec->arrive_ns < rec->start_ns;
  gboolean in_op = tl_overlaps(tl, rec->start_ns, rec->end_ns);
  gboolean in_blocked =
    blocked && tl_overlaps(tl, rec->arrive_ns, rec->start_ns);
  if (!in_op && !in_blocked)
    return;
  guint g = rec->gpu;
  TlGpu *s = tl_gpu(tl, g, op->stream);
  GString *e = tl->ev;

  gboolean json = tl->run == NULL;
  if (op->kind == SIM_OP_MARKER) {
    if (!json)
      return;
    g_string_truncate(e, 0);
    g_string_append_printf(e, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%u,"
                           "\"tid\":%u,\"ts\":", g, op->stream);
    append_us(e, rec->start_ns);
    g_string_append(e, ",\"name\":");
    g_string_append(e, tl_name(tl, op->name));
    g_string_append_printf(e, ",\"cat\":\"marker\",\"args\":{\"phase\":"
                           "\"%s\",\"iteration\":%u,\"op\":%u}}",
                           sim_phase_name((SimPhase)op->phase), rec->iter,
                           rec->op);
    tl_emit(tl);
    tl->counts.instant++;
    return;
  }

  if (in_blocked && json) {
    span_head(e, g, op->stream, rec->arrive_ns, rec->start_ns);
    g_string_append(e, ",\"name\":\"blocked\",\"cat\":\"blocked\","
                       "\"args\":{\"waiting_for\":");
    g_string_append(e, tl_name(tl, op->name));
    g_string_append_printf(e, ",\"iteration\":%u,\"op\":%u", rec->iter,
                           rec->op);
    if (tl->blocked_w > 0) {
      g_string_append(e, ",\"power_w\":");
      append_num(e, "%.3f", tl->blocked_w);
      g_string_append(e, ",\"energy_j\":");
      append_num(e, "%.9g", tl->blocked_w *
                             (double)(rec->start_ns - rec->arrive_ns) * 1e-9);
    }
    g_string_append(e, "}}");
    tl_emit(tl);
    tl->counts.blocked++;
  }
  if (in_blocked) {
    if (tl->power && tl->blocked_w > 0) {
      double d = tl->blocked_w - tl->idle_w;
      tl_point(tl, g, s, (TlPoint){ rec->arrive_ns, d, 1, 0, op->stream, 0 });
      tl_point(tl, g, s, (TlPoint){ rec->start_ns, d, -1, 0, op->stream, 0 });
    }
  }

  if (!in_op)
    return;
  if (json) {
    span_head(e, g, op->stream, rec->start_ns, rec->end_ns);
    g_string_append(e, ",\"name\":");
    g_string_append(e, tl_name(tl, op->name));
    g_string_append_printf(e, ",\"cat\":\"%s\"",
                           op->kind == SIM_OP_HOST
                               ? "host"
                               : sim_class_name((SimOpClass)op->klass));
    tl_op_args(tl, op, rec);
    tl_emit(tl);
    tl->counts.complete++;
  }
  if (op->kind == SIM_OP_KERNEL)
    tl_point(tl, g, s, (TlPoint){ rec->start_ns, 0, 0, 0, op->stream,
                                  rec->clocks.sm_mhz });
  if (tl->power && rec->end_ns > rec->start_ns) {
    double d = rec->power_w - tl->idle_w;
    guint8 k = op->kind == SIM_OP_KERNEL;
    s->limit_w = rec->limit_w;
    tl_point(tl, g, s, (TlPoint){ rec->start_ns, d, 1, k, op->stream, 0 });
    tl_point(tl, g, s, (TlPoint){ rec->end_ns, d, -1, k, op->stream, 0 });
  }
}

void trace_timeline_counts(const TraceTimeline *tl, TraceTimelineCounts *out)
{
  g_return_if_fail(tl != NULL && out != NULL);
  *out = tl->counts;
}

/* ---- open / close ------------------------------------------------------------ */

static void tl_free(TraceTimeline *tl, gboolean remove_tmp)
{
  if (tl == NULL)
    return;
  if (tl->f != NULL)
    fclose(tl->f);
  if (remove_tmp)
    io_atomic_abort(&tl->out);
  if (tl->gpu != NULL)
    for (guint g = 0; g < tl->w->n_ranks; g++)
      if (tl->gpu[g] != NULL) {
        TlGpu *s = tl->gpu[g];
        g_array_unref(s->points);
        if (s->time_s != NULL) {
          g_array_unref(s->time_s);
          g_array_unref(s->power_w);
          g_array_unref(s->sm_mhz);
        }
        g_free(s);
      }
  if (tl->esc != NULL)
    for (guint i = 0; i < tl->w->names->len; i++)
      g_free(tl->esc[i]);
  g_free(tl->esc);
  g_free(tl->gpu);
  g_free(tl->sel);
  g_free(tl->fbuf);
  if (tl->ev != NULL)
    g_string_free(tl->ev, TRUE);
  if (tl->dirty != NULL)
    g_array_unref(tl->dirty);
  g_free(tl->path);
  g_free(tl->run);
  g_free((char *)tl->meta.version);
  g_free((char *)tl->meta.scenario_path);
  g_free((char *)tl->meta.scenario_source);
  g_free(tl);
}

void trace_timeline_abort(TraceTimeline *tl)
{
  tl_free(tl, TRUE);
}

/* A new exporter of w to path after checking opt (both formats), with no
 * file yet; NULL with error set. */
static TraceTimeline *tl_new(const char *path, const SimWorkload *w,
                             const TraceTimelineOptions *opt, GError **error)
{
  if (path[0] == '\0') {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO,
                "cannot write a timeline: the file name is empty");
    return NULL;
  }
  if (g_file_test(path, G_FILE_TEST_IS_DIR)) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO,
                "%s: cannot write a timeline: it is a directory", path);
    return NULL;
  }
  if (opt->t0_ns < 0 || (opt->t1_ns >= 0 && opt->t1_ns < opt->t0_ns)) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "%s: the time window [%" G_GINT64_FORMAT ", %" G_GINT64_FORMAT
                "] ns is empty or negative", path, opt->t0_ns, opt->t1_ns);
    return NULL;
  }
  if (opt->gpus == NULL && opt->n_gpus > 0) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "%s: a GPU count without a GPU list", path);
    return NULL;
  }
  for (guint i = 0; opt->gpus != NULL && i < opt->n_gpus; i++)
    if (opt->gpus[i] >= w->n_ranks) {
      g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                  "%s: GPU %u is out of range (the run has %u GPUs, 0 to %u)",
                  path, opt->gpus[i], w->n_ranks,
                  w->n_ranks > 0 ? w->n_ranks - 1 : 0);
      return NULL;
    }

  TraceTimeline *tl = g_new0(TraceTimeline, 1);
  tl->out.fd = -1;
  tl->w = w;
  tl->path = g_strdup(path);
  tl->t0 = opt->t0_ns;
  tl->t1 = opt->t1_ns >= 0 ? opt->t1_ns : G_MAXINT64;
  tl->idle_w = opt->idle_power_w > 0 ? opt->idle_power_w : 0.0;
  tl->blocked_w = opt->blocked_power_w > 0 ? opt->blocked_power_w : 0.0;
  tl->power = opt->idle_power_w > 0;
  if (opt->gpus != NULL) {
    tl->sel = g_new0(guint8, MAX(w->n_ranks, 1));
    for (guint i = 0; i < opt->n_gpus; i++)
      tl->sel[opt->gpus[i]] = 1;
  }
  tl->gpu = g_new0(TlGpu *, MAX(w->n_ranks, 1));
  tl->esc = g_new0(char *, MAX(w->names->len, 1));
  tl->ev = g_string_sized_new(512);
  tl->dirty = g_array_new(FALSE, FALSE, sizeof(guint32));
  return tl;
}

TraceTimeline *trace_timeline_open(const char *path, const SimWorkload *w,
                                   const TraceTimelineOptions *opt,
                                   GError **error)
{
  g_return_val_if_fail(path != NULL && w != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  TraceTimelineOptions defaults;
  if (opt == NULL) {
    trace_timeline_options_init(&defaults);
    opt = &defaults;
  }
  TraceTimeline *tl = tl_new(path, w, opt, error);
  if (tl == NULL)
    return NULL;
  int e = io_atomic_open(&tl->out, path, "timeline");
  if (e != 0) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO,
                "%s: cannot write a timeline: cannot create a file in %s: %s",
                path, tl->out.dir, g_strerror(e));
    tl_free(tl, TRUE);
    return NULL;
  }
  tl->f = fdopen(tl->out.fd, "w");
  if (tl->f == NULL) {
    e = errno;
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO,
                "%s: cannot write a timeline: %s", path, g_strerror(e));
    tl_free(tl, TRUE);
    return NULL;
  }
  tl->out.fd = -1; /* the stream's now */
  tl->fbuf = g_malloc(TL_FILE_BUFFER);
  setvbuf(tl->f, tl->fbuf, _IOFBF, TL_FILE_BUFFER);

  GString *h = g_string_new("{\"displayTimeUnit\":\"ns\",\"otherData\":{"
                            "\"generator\":\"joulesim " JOULESIM_VERSION
                            "\",\"time\":\"simulated\"");
  if (opt->label != NULL) {
    g_string_append(h, ",\"label\":");
    json_string(h, opt->label);
  }
  g_string_append(h, "},\"traceEvents\":[\n");
  if (fwrite(h->str, 1, h->len, tl->f) != h->len) {
    tl->failed = TRUE;
    tl->err = errno != 0 ? errno : EIO;
  }
  g_string_free(h, TRUE);
  return tl;
}

TraceTimeline *trace_timeline_open_h5(const char *path, const char *run,
                                      gboolean replace, const ResMeta *meta,
                                      const SimWorkload *w,
                                      const TraceTimelineOptions *opt,
                                      GError **error)
{
  g_return_val_if_fail(path != NULL && run != NULL && w != NULL, NULL);
  g_return_val_if_fail(opt != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  if (opt->idle_power_w <= 0) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "%s: a power timeline needs the GPUs' idle power", path);
    return NULL;
  }
  TraceTimeline *tl = tl_new(path, w, opt, error);
  if (tl == NULL)
    return NULL;
  tl->run = g_strdup(run);
  tl->replace = replace;
  if (meta != NULL) {
    tl->meta.version = g_strdup(meta->version);
    tl->meta.scenario_path = g_strdup(meta->scenario_path);
    tl->meta.scenario_source = g_strdup(meta->scenario_source);
    tl->meta.seed = meta->seed;
  }
  return tl;
}

/* Stores an HDF5 timeline: every selected GPU (every GPU when none was
 * selected), in GPU order, with its samples (none when it ran nothing). */
static gboolean tl_store_h5(TraceTimeline *tl, GError **error)
{
  guint n = tl->w->n_ranks;
  g_autofree ResTimelineGpu *gpus = g_new0(ResTimelineGpu, MAX(n, 1));
  guint k = 0;
  for (guint g = 0; g < n; g++) {
    if (tl->sel != NULL && !tl->sel[g])
      continue;
    const TlGpu *s = tl->gpu[g];
    ResTimelineGpu *tg = &gpus[k++];
    tg->gpu = g;
    if (s == NULL || s->time_s == NULL)
      continue;
    tg->n = s->time_s->len;
    tg->time_s = (const double *)(void *)s->time_s->data;
    tg->power_w = (const double *)(void *)s->power_w->data;
    tg->sm_mhz = (const double *)(void *)s->sm_mhz->data;
  }
  return res_timeline_write(tl->path, tl->run, gpus, k, tl->replace,
                            &tl->meta, error);
}

gboolean trace_timeline_close(TraceTimeline *tl, TraceTimelineCounts *counts,
                              GError **error)
{
  g_return_val_if_fail(tl != NULL, FALSE);
  g_return_val_if_fail(error == NULL || *error == NULL, FALSE);
  tl_flush_iteration(tl);
  if (counts != NULL)
    *counts = tl->counts;
  if (tl->run != NULL) {
    gboolean ok = tl_store_h5(tl, error);
    tl_free(tl, FALSE);
    return ok;
  }
  if (!tl->failed && fputs("\n]}\n", tl->f) == EOF) {
    tl->failed = TRUE;
    tl->err = errno != 0 ? errno : EIO;
  }
  if (!tl->failed && (fault_inject_errno(FAULT_WRITE, "timeline: write") ||
                      fflush(tl->f) != 0 || fsync(fileno(tl->f)) != 0)) {
    tl->failed = TRUE;
    tl->err = errno != 0 ? errno : EIO;
  }
  FILE *f = tl->f;
  tl->f = NULL;
  if (fclose(f) != 0 && !tl->failed) {
    tl->failed = TRUE;
    tl->err = errno != 0 ? errno : EIO;
  }
  if (tl->failed) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO,
                "%s: cannot write the timeline: %s", tl->path,
                g_strerror(tl->err));
    tl_free(tl, TRUE);
    return FALSE;
  }
  int e = io_atomic_commit(&tl->out, IO_ATOMIC_REPLACE);
  if (e != 0) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO,
                "%s: cannot replace it with the timeline: %s", tl->path,
                g_strerror(e));
    tl_free(tl, TRUE);
    return FALSE;
  }
  tl_free(tl, FALSE);
  return TRUE;
}

/* ---- option parsing ----------------------------------------------------------- */

static gboolean parse_uint(const char *s, guint64 *out)
{
  if (s == NULL || !g_ascii_isdigit(*s))
    return FALSE;
  char *end = NULL;
  errno = 0;
  guint64 v = g_ascii_strtoull(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

GArray *trace_timeline_parse_gpus(const char *spec, guint n_gpus,
                                  GError **error)
{
  g_return_val_if_fail(spec != NULL, NULL);
  g_autoptr(GArray) ids = g_array_new(FALSE, FALSE, sizeof(guint32));
  g_autofree char *trimmed = g_strstrip(g_strdup(spec));
  if (trimmed[0] == '\0') {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "GPU list '%s' is empty", spec);
    return NULL;
  }
  g_auto(GStrv) items = g_strsplit(spec, ",", -1);
  g_autofree guint8 *seen = g_new0(guint8, MAX(n_gpus, 1));
  for (guint k = 0; items[k] != NULL; k++) {
    g_autofree char *item = g_strstrip(g_strdup(items[k]));
    guint64 lo = 0, hi = 0;
    char *dash = strchr(item, '-');
    gboolean ok;
    if (dash != NULL) {
      *dash = '\0';
      ok = parse_uint(item, &lo) && parse_uint(dash + 1, &hi) && lo <= hi;
      *dash = '-';
    } else {
      ok = parse_uint(item, &lo);
      hi = lo;
    }
    if (!ok) {
      g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                  "GPU list '%s': '%s' is not a GPU id or a range A-B with "
                  "A <= B", spec, item);
      return NULL;
    }
    if (hi >= n_gpus) {
      g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                  "GPU list '%s': GPU %" G_GUINT64_FORMAT " is out of range "
                  "(the run has %u GPUs, 0 to %u)", spec, hi, n_gpus,
                  n_gpus > 0 ? n_gpus - 1 : 0);
      return NULL;
    }
    for (guint64 g = lo; g <= hi; g++)
      seen[g] = 1;
  }
  for (guint g = 0; g < n_gpus; g++)
    if (seen[g]) {
      guint32 v = g;
      g_array_append_val(ids, v);
    }
  return g_steal_pointer(&ids);
}

/* Parses one window bound ("" = absent) into ns. */
static gboolean parse_time(const char *spec, const char *s, gint64 *ns,
                           gboolean *present, GError **error)
{
  g_autofree char *t = g_strstrip(g_strdup(s));
  *present = t[0] != '\0';
  if (!*present)
    return TRUE;
  char *end = NULL;
  double v = g_ascii_strtod(t, &end);
  double scale = 1e9;
  if (end != t) {
    if (*end == '\0' || strcmp(end, "s") == 0)
      scale = 1e9;
    else if (strcmp(end, "ms") == 0)
      scale = 1e6;
    else if (strcmp(end, "us") == 0)
      scale = 1e3;
    else if (strcmp(end, "ns") == 0)
      scale = 1.0;
    else
      end = t;
  }
  if (end == t || !isfinite(v) || v < 0 || v * scale > 9e18) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "time window '%s': '%s' is not a time >= 0 (a number with an "
                "optional unit ns, us, ms or s)", spec, t);
    return FALSE;
  }
  *ns = (gint64)llround(v * scale);
  return TRUE;
}

gboolean trace_timeline_parse_window(const char *spec, gint64 *t0_ns,
                                     gint64 *t1_ns, GError **error)
{
  g_return_val_if_fail(spec != NULL && t0_ns != NULL && t1_ns != NULL,
                       FALSE);
  const char *colon = strchr(spec, ':');
  if (colon == NULL || strchr(colon + 1, ':') != NULL) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "time window '%s' must be T0:T1 (either may be empty)", spec);
    return FALSE;
  }
  g_autofree char *a = g_strndup(spec, (gsize)(colon - spec));
  gboolean has0, has1;
  gint64 t0 = 0, t1 = -1;
  if (!parse_time(spec, a, &t0, &has0, error) ||
      !parse_time(spec, colon + 1, &t1, &has1, error))
    return FALSE;
  if (!has0)
    t0 = 0;
  if (!has1)
    t1 = -1;
  if (has1 && t1 < t0) {
    g_set_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID,
                "time window '%s' ends before it starts", spec);
    return FALSE;
  }
  *t0_ns = t0;
  *t1_ns = t1;
  return TRUE;
}

/* The header trace_timeline_open writes, up to the generator's name. */
#define TL_MAGIC "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":\"joulesim "

gboolean trace_timeline_probe(const char *path)
{
  /* io/input.h: a FIFO or a device is no timeline, and never waited on.
   * (Not a fault site: a probe has no failure path of its own.) */
  IoInput in;
  fault_suspend();
  gboolean opened = io_input_open(&in, path, "timeline: probe",
                                  TRACE_TIMELINE_ERROR, 0, NULL);
  fault_resume();
  if (!opened)
    return FALSE;
  char head[sizeof TL_MAGIC - 1];
  gboolean ok = pread(in.fd, head, sizeof head, 0) == (ssize_t)sizeof head &&
                memcmp(head, TL_MAGIC, sizeof head) == 0;
  io_input_close(&in);
  return ok;
}
