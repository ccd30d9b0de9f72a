/* traces/import_host.c -- the host streams of the import builder: each
 * CPU thread's runtime calls as SIM_OP_HOST ops (the rules below), and the
 * host-side warnings and shape coverage of the provenance.
 */
#include "traces/import-private.h"
#include "traces/classify.h"
#include "sim/search.h"
#include "io/fault.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- host streams --------------------------------------------------------
 *
 * The CPU side of a rank.  Each CPU thread with runtime calls in the host
 * window becomes one host stream after the GPU streams; its ops
 * (SIM_OP_HOST) last what the thread spent, so the sum of a stream's host
 * ops up to any call is the time from the window's start to that call's
 * end, less the waits replayed as dependencies or not at all (below).
 * Only two kinds of calls need ops of their own:
 *
 *  - a launch (kernel, copy, memset or CUDA graph) whose GPU op was
 *    imported: a host op from the previous op's end to the call's end,
 *    which the GPU op waits for (through its correlation id; every op of
 *    a graph carries its launch's).  A launch that found the launch queue
 *    full waited for the op that freed a slot (queue_release);
 *  - a synchronising call that did wait: cudaStreamSynchronize,
 *    cudaEventSynchronize, cudaDeviceSynchronize, or a copy that ended
 *    before its call returned (a synchronous cudaMemcpy, a copy to pageable
 *    memory: PyTorch's .item()).  It waited when a GPU op launched before
 *    it (smaller correlation id) ended while it ran; that op is the one it
 *    waited for (cudaEventSynchronize), the last op launched before it on
 *    that op's stream (cudaStreamSynchronize, copies), or the last op
 *    launched before it on every stream (cudaDeviceSynchronize).  It is a
 *    host op for the CPU time before the call (HN_GAP; a synchronous copy
 *    waits for it), then a host op that waits for those GPU ops and lasts
 *    what the call took after the last of them ended.
 *
 * Every other call (cudaEventRecord, cudaStreamWaitEvent, queries, launches
 * of ops outside the import) is folded into the CPU time before the next
 * op, and a last op (HN_TAIL) runs to the window's end.  A thread's first
 * call follows the thread that handed it the work (host_handoffs).
 * Replayed at the recorded clocks, each host op then ends when its call
 * ended (earlier, by the waits for work outside the import that are not
 * replayed: a full queue's, a hand-off's), and a GPU op
 * starts no earlier than its launch returned; slower kernels delay the
 * host only through the synchronisations.  With TRACE_STEP_ALL a marker
 * named after the step opens each step on the stream of the thread that
 * records the steps.
 *
 * Every dependency goes from a smaller correlation id to a larger one (or
 * from a launch to its own GPU op, or from a thread's first op to an op of
 * another thread that ended before it began), so the graph has no cycle
 * when the trace is consistent; emit_rank checks and falls back to GPU
 * order when a damaged trace makes one.
 */

typedef struct {
  gint64 tid, ts, corr;
  guint32 idx;
} CallKey;

static int cmp_call(const void *a, const void *b)
{
  const CallKey *x = a, *y = b;
  if (x->tid != y->tid)
    return x->tid < y->tid ? -1 : 1;
  if (x->ts != y->ts)
    return x->ts < y->ts ? -1 : 1;
  if (x->corr != y->corr)
    return x->corr < y->corr ? -1 : 1;
  return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* What the host builder of one rank looks things up in. */
typedef struct {
  RankWork *rw;
  TraceRawRank *raw;
  CorrKey *by_corr;      /* selected GPU ops with a correlation id */
  guint n_corr;
  CorrKey *stream_corr;  /* all selected GPU ops, per stream by corr
                            (stream s: [stream_off[s], stream_off[s+1])) */
  TimeKey *by_end;       /* selected GPU ops with a correlation id, by end */
  guint n_end;
  gint64 *all_corr;      /* every GPU op of the file, sorted */
  guint n_all;
  TimeKey *all_end;      /* every GPU op of the file with a correlation
                            id, by end (pos: its raw index) */
  guint n_all_end;
  guint32 *sel_of_raw;   /* raw index -> selected position, G_MAXUINT32 */
  GArray *ends;          /* TimeKey: each host op's end in the trace */
  gint64 first_ts[SIM_MAX_STREAMS];   /* host stream: its first call's
                                         start (G_MAXINT64: none) */
  guint32 first_pos[SIM_MAX_STREAMS]; /* host stream: its first op */
  gint64 tid[SIM_MAX_STREAMS];        /* host stream: its thread */
  guint32 first_sync[SIM_MAX_STREAMS]; /* host stream: its first
                                          synchronisation that waited */
} HostCtx;

static const TraceRawOp *sel_raw(const HostCtx *h, guint32 pos)
{
  const Sel *s = &g_array_index(h->rw->sel, Sel, pos);
  return &g_array_index(h->raw->ops, TraceRawOp, s->raw);
}

static gint64 sel_end(const HostCtx *h, guint32 pos)
{
  const TraceRawOp *o = sel_raw(h, pos);
  return trace_ns_add(o->ts_ns, o->dur_ns);
}

/* Index of the first of the n keys a (sorted by corr) whose corr is >=
 * corr. */
static guint corr_lower_bound(const CorrKey *a, guint n, gint64 corr)
{
  guint32 at;
  SIM_LOWER_BOUND(at, 0, n, k, a[k].corr, corr);
  return at;
}

/* How many of the n keys a (sorted by t) have t <= t. */
static guint time_upper_bound(const TimeKey *a, guint n, gint64 t)
{
  guint32 at;
  SIM_UPPER_BOUND(at, 0, n, k, a[k].t, t);
  return at;
}

/* The first of the selected GPU ops launched by correlation id corr (a
 * CUDA graph launches several) as an index into h->by_corr, or
 * G_MAXUINT32. */
static guint32 first_of_corr(const HostCtx *h, gint64 corr)
{
  guint lo = corr_lower_bound(h->by_corr, h->n_corr, corr);
  return lo < h->n_corr && h->by_corr[lo].corr == corr ? lo : G_MAXUINT32;
}

/* The op of GPU stream s launched last before correlation id corr, or
 * G_MAXUINT32. */
static guint32 last_before(const HostCtx *h, guint s, gint64 corr)
{
  const CorrKey *a = h->stream_corr + h->rw->stream_off[s];
  guint n = h->rw->stream_off[s + 1] - h->rw->stream_off[s];
  guint lo = corr_lower_bound(a, n, corr);
  return lo > 0 && a[lo - 1].corr >= 0 ? a[lo - 1].pos : G_MAXUINT32;
}

/* The GPU op a call over [t0, t1] with correlation id corr waited for: the
 * latest-ending op launched before it that ended inside the call, or
 * G_MAXUINT32 when none did (the call did not wait). */
static guint32 released_by(const HostCtx *h, gint64 t0, gint64 t1,
                           gint64 corr)
{
  for (guint k = time_upper_bound(h->by_end, h->n_end, t1);
       k-- > 0 && h->by_end[k].t >= t0;) {
    guint32 pos = h->by_end[k].pos;
    if (sel_raw(h, pos)->corr < corr)
      return pos;
  }
  return G_MAXUINT32;
}

/* CUDA's launch queue holds about 1,024 operations; a launch into a full
 * queue returns only when one finishes.  The depth is not documented, but
 * traces show it: on a 1 x V100 trace (HolisticTraceAnalysis's
 * ns_resolution_trace) every launch over 50 us returned 3-8 us after an
 * earlier op ended, with 1,019-1,021 ops pending, while no launch of the
 * seven host-bound traces in tests/data/traces saw more than 569.  A launch
 * that returned with at least this many pending found the queue full. */
#define LAUNCH_QUEUE_FULL 1000

/* Index of the first of the n sorted values a that is >= v. */
static guint lower_bound_i64(const gint64 *a, guint n, gint64 v)
{
  guint32 at;
  SIM_LOWER_BOUND(at, 0, n, k, a[k], v);
  return at;
}

static gboolean file_has_corr(const HostCtx *h, gint64 corr)
{
  guint lo = lower_bound_i64(h->all_corr, h->n_all, corr);
  return lo < h->n_all && h->all_corr[lo] == corr;
}

/* How many of the file's ops with a correlation id ended by t. */
static guint ended_by(const HostCtx *h, gint64 t)
{
  return time_upper_bound(h->all_end, h->n_all_end, t);
}

/* Ops launched before correlation id corr that had not ended at t. */
static gint64 pending_at(const HostCtx *h, gint64 corr, gint64 t)
{
  gint64 launched = (gint64)lower_bound_i64(h->all_corr, h->n_all, corr) -
                    (gint64)lower_bound_i64(h->all_corr, h->n_all, 0);
  return launched - (gint64)ended_by(h, t);
}

/* A launch over [t0, t1] with correlation id corr that found CUDA's launch
 * queue full: the end of the op launched before it (on any stream, whether
 * imported or not) that ended last inside the call, which freed the slot
 * the call waited for; G_MININT64 when the queue was not full or no
 * earlier op ended during the call (it did not wait: a short call that saw
 * an op end by chance is no wait).  *pos is that op's selected position,
 * or G_MAXUINT32 when it lies outside the import. */
static gint64 queue_release(const HostCtx *h, gint64 t0, gint64 t1,
                            gint64 corr, guint32 *pos)
{
  *pos = G_MAXUINT32;
  if (pending_at(h, corr, t1) < LAUNCH_QUEUE_FULL)
    return G_MININT64;
  for (guint k = ended_by(h, t1); k-- > 0 && h->all_end[k].t > t0;) {
    guint32 r = h->all_end[k].pos;
    if (g_array_index(h->raw->ops, TraceRawOp, r).corr < corr) {
      *pos = h->sel_of_raw[r];
      return h->all_end[k].t;
    }
  }
  return G_MININT64;
}

/* Appends a host entry on stream `stream` that ended at t_end in the trace
 * (G_MININT64: a step marker); returns its position. */
static guint32 host_add(HostCtx *h, guint stream, guint8 kind,
                        guint32 name, gint64 dur_ns, gint64 t_end)
{
  RankWork *rw = h->rw;
  if (t_end != G_MININT64) {
    TimeKey e = {t_end, rw->sel->len};
    g_array_append_val(h->ends, e);
  }
  Sel s = {0};
  s.stream = stream;
  s.phase = SIM_PHASE_OTHER;
  s.host = kind;
  s.hname = name;
  s.host_ns = MAX(dur_ns, 0);
  g_array_append_val(rw->sel, s);
  return rw->sel->len - 1;
}

static void add_dep(RankWork *rw, guint32 consumer, guint32 producer)
{
  guint32 pair[2] = {consumer, producer};
  g_array_append_vals(rw->deps, pair, 1);
}

/* The host stream of one thread: calls[0..n) in time order.  Returns FALSE
 * (nothing added) when the thread neither launches an imported op nor
 * synchronises nor records the steps. */
static gboolean host_thread(Build *b, HostCtx *h, guint stream,
                            const CallKey *calls, guint n, const Window *win,
                            gint64 h0, gint64 h1, gboolean step_thread)
{
  RankWork *rw = h->rw;
  TraceRawRank *raw = h->raw;
  guint32 first = rw->sel->len, first_dep = rw->deps->len;
  h->first_sync[stream] = G_MAXUINT32;
  guint64 n_host = 0, n_sync = 0, n_nowhere = 0, n_blocked = 0;
  gboolean anchored = step_thread;
  const GArray *steps = step_thread ? win->steps : NULL;
  guint k_step = 0;
  gint64 prev = h0;
  for (guint c = 0; c <= n; c++) {
    /* Step markers due before this call (or, after the last, all left). */
    while (steps != NULL && k_step < steps->len &&
           (c == n || g_array_index(steps, TraceRawRange, k_step).start_ns <=
                          calls[c].ts)) {
      gint64 s0 = g_array_index(steps, TraceRawRange, k_step).start_ns;
      if (s0 > prev) {
        host_add(h, stream, HS_OP, HN_GAP, trace_ns_sub(s0, prev), s0);
        prev = s0;
      }
      guint32 m = host_add(h, stream, HS_STEP, 0, 0, G_MININT64);
      g_array_index(rw->sel, Sel, m).peer = k_step++;
    }
    if (c == n)
      break;
    const TraceRawLaunch *l = &g_array_index(raw->launches, TraceRawLaunch,
                                             calls[c].idx);
    gint64 end = trace_ns_add(l->ts_ns, MAX(l->dur_ns, 0));
    TraceCall call = (TraceCall)l->call;
    if (call == TRACE_CALL_LAUNCH || call == TRACE_CALL_MEMCPY ||
        call == TRACE_CALL_MEMSET) {
      guint32 g_index = first_of_corr(h, l->corr);
      if (g_index == G_MAXUINT32) {
        n_nowhere += !file_has_corr(h, l->corr);
        continue;
      }
      guint32 g = h->by_corr[g_index].pos;
      gint64 g_end = sel_end(h, g);
      if (call == TRACE_CALL_MEMCPY && g_end <= end && g_end >= l->ts_ns) {
        /* A synchronous copy: launched at the call's start, waited for. */
        guint32 gap = host_add(h, stream, HS_OP, HN_GAP,
                               trace_ns_sub(l->ts_ns, prev), l->ts_ns);
        prev = MAX(prev, l->ts_ns);
        add_dep(rw, g, gap);
        guint32 sy = host_add(h, stream, HS_OP, l->name,
                              trace_ns_sub(end, MAX(prev, g_end)), end);
        guint gs = g_array_index(rw->sel, Sel, g).stream;
        add_dep(rw, sy, last_before(h, gs, l->corr + 1));
        n_host += 2;
        n_sync++;
        h->first_sync[stream] = MIN(h->first_sync[stream], sy);
      } else {
        /* A launch returns once its op is queued; when the queue was full
         * it returned as an earlier op finished.  The call then waited for
         * that op: the host op after the wait depends on it, and a wait
         * for an op outside the import (the previous step's) is not
         * replayed, since that op is not there to wait for. */
        guint32 rel_pos;
        gint64 rel = queue_release(h, l->ts_ns, end, l->corr, &rel_pos);
        guint32 op;
        if (rel > l->ts_ns) {
          host_add(h, stream, HS_OP, HN_GAP, trace_ns_sub(l->ts_ns, prev),
                   l->ts_ns);
          prev = MAX(prev, l->ts_ns);
          op = host_add(h, stream, HS_OP, l->name,
                        trace_ns_sub(end, MAX(prev, rel)), end);
          if (rel_pos != G_MAXUINT32)
            add_dep(rw, op, rel_pos);
          n_host++;
          n_blocked++;
        } else {
          op = host_add(h, stream, HS_OP, l->name, trace_ns_sub(end, prev),
                        end);
        }
        /* A CUDA graph's ops all carry its launch's correlation id. */
        for (guint k = g_index; k < h->n_corr &&
                                h->by_corr[k].corr == l->corr; k++)
          add_dep(rw, h->by_corr[k].pos, op);
        n_host++;
      }
      prev = MAX(prev, end);
      anchored = TRUE;
    } else if (call == TRACE_CALL_SYNC_STREAM ||
               call == TRACE_CALL_SYNC_EVENT ||
               call == TRACE_CALL_SYNC_DEVICE) {
      guint32 r = released_by(h, l->ts_ns, end, l->corr);
      if (r == G_MAXUINT32)
        continue; /* it did not wait: CPU time */
      guint32 prod[SIM_MAX_STREAMS];
      guint np = 0;
      if (call == TRACE_CALL_SYNC_EVENT) {
        prod[np++] = r;
      } else if (call == TRACE_CALL_SYNC_STREAM) {
        prod[np++] = last_before(h, g_array_index(rw->sel, Sel, r).stream,
                                 l->corr);
      } else {
        for (guint s = 0; s < rw->ns_gpu; s++) {
          guint32 p = last_before(h, s, l->corr);
          if (p != G_MAXUINT32)
            prod[np++] = p;
        }
      }
      gint64 last_end = G_MININT64;
      for (guint k = 0; k < np; k++)
        last_end = MAX(last_end, sel_end(h, prod[k]));
      host_add(h, stream, HS_OP, HN_GAP, trace_ns_sub(l->ts_ns, prev),
               l->ts_ns);
      prev = MAX(prev, l->ts_ns);
      guint32 sy = host_add(h, stream, HS_OP, l->name,
                            trace_ns_sub(end, MAX(prev, last_end)), end);
      for (guint k = 0; k < np; k++)
        add_dep(rw, sy, prod[k]);
      prev = MAX(prev, end);
      n_host += 2;
      n_sync++;
      h->first_sync[stream] = MIN(h->first_sync[stream], sy);
      anchored = TRUE;
    }
  }
  if (!anchored) {
    g_array_set_size(rw->sel, first);
    g_array_set_size(rw->deps, first_dep);
    while (h->ends->len > 0 &&
           g_array_index(h->ends, TimeKey, h->ends->len - 1).pos >= first)
      g_array_set_size(h->ends, h->ends->len - 1);
    b->nowhere += n_nowhere;
    return FALSE;
  }
  if (h1 > prev)
    host_add(h, stream, HS_OP, HN_TAIL, trace_ns_sub(h1, prev), h1);
  h->first_ts[stream] = n > 0 ? calls[0].ts : G_MAXINT64;
  h->first_pos[stream] = first;
  h->tid[stream] = n > 0 ? calls[0].tid : win->step_tid;
  b->host_syncs += n_sync;
  b->host_blocked += n_blocked;
  b->nowhere += n_nowhere;
  return TRUE;
}

/* A thread's first call in the window follows another thread's work: the
 * autograd engine's thread launches the backward pass once the main thread
 * has called backward(), and sits idle before.  The time before that call
 * is therefore no CPU work of its own: its first op waits for the op of
 * another host stream that ended last before the call, and lasts from
 * there.  The main thread (the one that records the steps, else the one
 * whose first call comes first) keeps its start. */
static void host_handoffs(HostCtx *h, guint s0, guint s1, gint64 h0,
                          gint64 step_tid)
{
  RankWork *rw = h->rw;
  guint origin = s0;
  for (guint s = s0; s < s1; s++)
    if (h->first_ts[s] < h->first_ts[origin])
      origin = s;
  for (guint s = s0; s < s1; s++)
    if (step_tid >= 0 && h->tid[s] == step_tid)
      origin = s;
  const TimeKey *e = (const TimeKey *)(void *)h->ends->data;
  for (guint s = s0; s < s1; s++) {
    if (s == origin || h->first_ts[s] == G_MAXINT64)
      continue;
    guint32 f = h->first_pos[s], prod = G_MAXUINT32;
    gint64 t_prod = G_MININT64, t_first = G_MININT64;
    for (guint k = 0; k < h->ends->len; k++) {
      if (e[k].pos == f)
        t_first = e[k].t;
      else if (g_array_index(rw->sel, Sel, e[k].pos).stream != s &&
               e[k].t <= h->first_ts[s] && e[k].t > t_prod) {
        t_prod = e[k].t;
        prod = e[k].pos;
      }
    }
    if (prod == G_MAXUINT32 || t_first == G_MININT64)
      continue;
    /* A thread that synchronised with the GPU before the hand-off ran at
     * the pace of GPU work the step alone may not hold (the previous
     * step's): the thread it woke keeps its recorded start. */
    guint ps = g_array_index(rw->sel, Sel, prod).stream;
    if (h->first_sync[ps] < prod)
      continue;
    Sel *first = &g_array_index(rw->sel, Sel, f);
    first->host_ns = MAX(trace_ns_sub(t_first, MAX(h0, t_prod)), 0);
    add_dep(rw, f, prod);
  }
}

/* Adds rank i's host streams (see above) to its selection. */
gboolean trace_host_streams(Build *b, guint i, const Window *win,
                            GError **error)
{
  (void)error;
  RankWork *rw = &b->rw[i];
  TraceRawRank *raw = rw->raw;
  guint32 n = rw->n_gpu;
  b->bad_durs += raw->bad_host_durs;
  raw->bad_host_durs = 0;
  b->gpu_ops += n;
  HostCtx h = {.rw = rw, .raw = raw};
  h.ends = g_array_new(FALSE, FALSE, sizeof(TimeKey));
  h.by_corr = g_new(CorrKey, MAX(n, 1));
  h.stream_corr = g_new(CorrKey, MAX(n, 1));
  h.by_end = g_new(TimeKey, MAX(n, 1));
  for (guint32 k = 0; k < n; k++) {
    const TraceRawOp *o = sel_raw(&h, k);
    h.stream_corr[k] = (CorrKey){o->corr, k};
    if (o->corr < 0)
      continue;
    h.by_corr[h.n_corr++] = (CorrKey){o->corr, k};
    h.by_end[h.n_end++] = (TimeKey){trace_ns_add(o->ts_ns, o->dur_ns), k};
  }
  qsort(h.by_corr, h.n_corr, sizeof *h.by_corr, trace_cmp_corr);
  qsort(h.by_end, h.n_end, sizeof *h.by_end, trace_cmp_time);
  for (guint s = 0; s < rw->ns_gpu; s++)
    qsort(h.stream_corr + rw->stream_off[s],
          rw->stream_off[s + 1] - rw->stream_off[s], sizeof *h.stream_corr,
          trace_cmp_corr);
  h.n_all = raw->ops->len;
  h.all_corr = g_new(gint64, MAX(h.n_all, 1));
  for (guint k = 0; k < h.n_all; k++)
    h.all_corr[k] = g_array_index(raw->ops, TraceRawOp, k).corr;
  qsort(h.all_corr, h.n_all, sizeof *h.all_corr, trace_cmp_i64);
  h.all_end = g_new(TimeKey, MAX(h.n_all, 1));
  h.sel_of_raw = g_new(guint32, MAX(h.n_all, 1));
  for (guint k = 0; k < h.n_all; k++) {
    const TraceRawOp *o = &g_array_index(raw->ops, TraceRawOp, k);
    h.sel_of_raw[k] = G_MAXUINT32;
    if (o->corr >= 0)
      h.all_end[h.n_all_end++] = (TimeKey){trace_ns_add(o->ts_ns, o->dur_ns),
                                           k};
  }
  for (guint32 k = 0; k < n; k++)
    h.sel_of_raw[g_array_index(rw->sel, Sel, k).raw] = k;
  qsort(h.all_end, h.n_all_end, sizeof *h.all_end, trace_cmp_time);

  /* The calls in the window, by thread and time. */
  gboolean all = win->h0 > win->h1;
  g_autoptr(GArray) calls = g_array_new(FALSE, FALSE, sizeof(CallKey));
  gint64 h0 = G_MAXINT64, h1 = G_MININT64;
  for (guint k = 0; k < raw->launches->len; k++) {
    const TraceRawLaunch *l = &g_array_index(raw->launches, TraceRawLaunch,
                                             k);
    if (!all && (l->ts_ns < win->h0 || l->ts_ns >= win->h1))
      continue;
    CallKey ck = {l->tid, l->ts_ns, l->corr, k};
    g_array_append_val(calls, ck);
    h0 = MIN(h0, l->ts_ns);
    h1 = MAX(h1, trace_ns_add(l->ts_ns, MAX(l->dur_ns, 0)));
  }
  if (win->steps != NULL && win->steps->len > 0) {
    h0 = MIN(h0, g_array_index(win->steps, TraceRawRange, 0).start_ns);
    for (guint k = 0; k < win->steps->len; k++)
      h1 = MAX(h1, g_array_index(win->steps, TraceRawRange, k).end_ns);
  }
  if (!all) {
    h0 = win->h0;
    h1 = win->h1;
  }
  g_array_sort(calls, cmp_call);
  const CallKey *ck = (const CallKey *)(void *)calls->data;
  gboolean markers =
      win->steps != NULL && trace_step_mode(b->opt) == TRACE_STEP_ALL;
  gboolean step_done = !markers;
  guint ns = rw->ns_gpu, skipped = 0;
  for (guint c0 = 0; c0 < calls->len || !step_done;) {
    guint c1 = c0;
    gint64 tid = c0 < calls->len ? ck[c0].tid : win->step_tid;
    while (c1 < calls->len && ck[c1].tid == tid)
      c1++;
    /* The thread that records the steps gets their markers; when it makes
     * no call, a stream of its own after the others. */
    gboolean st = !step_done && (tid == win->step_tid || c0 >= calls->len);
    if (ns >= SIM_MAX_STREAMS) {
      skipped++;
    } else if (host_thread(b, &h, ns, c1 > c0 ? ck + c0 : NULL, c1 - c0, win,
                           h0, h1, st)) {
      ns++;
      step_done |= st;
    }
    if (c0 >= calls->len)
      break;
    c0 = c1;
  }
  host_handoffs(&h, rw->ns_gpu, ns, h0, win->step_tid);
  if (skipped > 0)
    trace_warn(b->opt, "%s: %u CPU threads left out (at most %d streams per "
               "rank); their launches are not modelled", raw->path, skipped,
               SIM_MAX_STREAMS);
  /* Layout: the new streams' offsets. */
  rw->stream_off = g_renew(guint32, rw->stream_off, ns + 1);
  for (guint s = rw->ns_gpu + 1; s <= ns; s++)
    rw->stream_off[s] = rw->stream_off[s - 1];
  for (guint32 k = n; k < rw->sel->len; k++)
    rw->stream_off[g_array_index(rw->sel, Sel, k).stream + 1]++;
  for (guint s = rw->ns_gpu + 1; s <= ns; s++)
    rw->stream_off[s] = MAX(rw->stream_off[s], rw->stream_off[s - 1]);
  rw->n_streams = ns;
  /* GPU ops that wait for no launch. */
  g_autofree gboolean *launched = g_new0(gboolean, MAX(n, 1));
  const guint32 *dp = (const guint32 *)(void *)rw->deps->data;
  for (guint k = 0; k < rw->deps->len; k++)
    if (dp[2 * k] < n && dp[2 * k + 1] >= n)
      launched[dp[2 * k]] = TRUE;
  for (guint32 k = 0; k < n; k++)
    b->orphans += !launched[k];
  for (guint32 k = n; k < rw->sel->len; k++)
    b->host_ops += g_array_index(rw->sel, Sel, k).host == HS_OP;
  g_free(h.by_corr);
  g_free(h.stream_corr);
  g_free(h.by_end);
  g_free(h.all_corr);
  g_free(h.all_end);
  g_free(h.sel_of_raw);
  g_array_free(h.ends, TRUE);
  return TRUE;
}

/* The import's warnings about the host side. */
void trace_host_warnings(Build *b)
{
  if (b->opt->gpu_only)
    return;
  if (b->orphans > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " GPU "
               "ops have no runtime launch in the trace; they replay in GPU "
               "order only", b->orphans, b->gpu_ops);
  if (b->nowhere > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " runtime launches name a "
               "correlation id with no GPU activity in the file; taken as CPU "
               "time", b->nowhere);
  if (b->bad_durs > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " runtime calls have a negative "
               "duration; taken as 0", b->bad_durs);
}

/* Kernel shapes: the coverage in the provenance and the warnings. */
void trace_shape_report(const Build *b, GHashTable *pv)
{
  double cover = b->kernel_ns > 0
                     ? (double)b->shaped_ns / (double)b->kernel_ns : 0.0;
  g_hash_table_insert(pv, g_strdup("shape_coverage"),
                      g_strdup_printf("%.4f", cover));
  g_hash_table_insert(pv, g_strdup("shape_kernels"),
                      g_strdup_printf("%" G_GUINT64_FORMAT " of %"
                                      G_GUINT64_FORMAT, b->shaped_kernels,
                                      b->n_kernels));
  guint64 bad = 0, priced = 0;
  const char *first = NULL;
  for (guint i = 0; i < b->n; i++) {
    const TraceRawRank *r = b->rw[i].raw;
    bad += r->bad_shapes;
    priced += r->works->len;
    if (first == NULL && r->bad_shape_op != NULL)
      first = r->bad_shape_op;
  }
  if (bad > 0)
    trace_warn(b->opt, "%" G_GUINT64_FORMAT " CPU operators have unusable "
               "shapes (wrong rank, non-numeric or inconsistent dims; the "
               "first: %s); their kernels keep class-only pricing", bad,
               first);
  /* Only for traces that record shapes (record_shapes=True): the others
   * are priced by class as before, which `trace info` reports. */
  if (priced + bad > 0 && b->n_kernels > 0 &&
      b->shaped_kernels < b->n_kernels)
    trace_warn(b->opt, "kernel shapes: %.1f%% of kernel time (%"
               G_GUINT64_FORMAT " of %" G_GUINT64_FORMAT " kernels) has "
               "FLOPs and bytes from its operator's recorded shapes; the "
               "rest is priced by class fractions", 100.0 * cover,
               b->shaped_kernels, b->n_kernels);
}
