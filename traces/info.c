/* traces/info.c -- what a workload holds: counts per class, kind and
 * stream, GPU busy time per rank, collectives per kind of group, FLOPs
 * and bytes, host streams (trace_stats_compute), and the readable summary
 * built from them (trace_info, printed by `joulesim trace info` and
 * returned by js.trace.info).  For any workload: loaded, imported or
 * generated.  See traces/info.h.
 */
#include "traces/info.h"
#include "sim/engine.h"

#include <string.h>

/* ---- statistics and summary ------------------------------------------------ */

void trace_group_label(const SimWorkload *w, guint32 g, char *out,
                       gsize out_len)
{
  guint n = 0;
  const guint32 *m = sim_workload_group(w, g, &n);
  if (m == NULL || n == 0) {
    g_snprintf(out, out_len, "empty");
    return;
  }
  /* A uniform stride between consecutive members (0 for one member). */
  guint64 stride = n > 1 ? (guint64)m[1] - m[0] : 0;
  gboolean uniform = TRUE;
  for (guint i = 2; i < n && uniform; i++)
    uniform = (guint64)m[i] - m[i - 1] == stride;
  /* Context parallelism (the GPT generator's provenance) puts cp ranks
   * between TP and DP; the DP group then spans data and context ranks. */
  const char *cps = w->provenance != NULL
                        ? g_hash_table_lookup(w->provenance,
                                              "context_parallel")
                        : NULL;
  guint64 tp = w->tp, pp = w->pp, dp = w->dp;
  guint64 cp = cps != NULL ? g_ascii_strtoull(cps, NULL, 10) : 1;
  guint64 cd = cp * dp;
  gboolean layout = tp > 0 && pp > 0 && cd > 0 && tp * pp * cd == w->n_ranks;
  if (layout && uniform && n > 1) {
    if (n == tp && stride == 1)
      g_snprintf(out, out_len, "tp");
    else if (n == cd && stride == tp)
      g_snprintf(out, out_len, "dp");
    else if (n == 2 && pp > 1 && stride == tp * cd * (pp - 1))
      g_snprintf(out, out_len, "embedding");
    else if (n == pp && stride == tp * cd)
      g_snprintf(out, out_len, "pp");
    else
      out[0] = '\0';
    if (out[0] != '\0')
      return;
  }
  if (n == w->n_ranks && n > 1)
    g_snprintf(out, out_len, "world");
  else
    g_snprintf(out, out_len, "%u rank%s", n, n == 1 ? "" : "s");
}

/* Folded workloads (SimWorkload.fold_rep): rank r runs its
 * representative's ops, its collectives on the images of the
 * representative's groups.  The image of group g for r is taken to be the
 * group of r with g's label and size (trace_group_label: for a Megatron
 * layout, r's own TP, DP, PP or embedding group); g itself when r has
 * none.  InfoFold holds what finding it needs: every group's label and
 * size, and the groups of every rank. */
typedef struct {
  char s[32];
} InfoLabel;

typedef struct {
  InfoLabel *label;     /* per group */
  guint *size;         /* per group */
  guint32 *off;        /* n_ranks + 1 offsets into of */
  guint32 *of;         /* group ids, per rank ascending */
  guint32 *map;        /* per group: its image for the current rank */
} InfoFold;

static void info_fold_init(InfoFold *f, const SimWorkload *w)
{
  guint ng = sim_workload_n_groups(w);
  f->label = g_new0(InfoLabel, MAX(ng, 1));
  f->size = g_new0(guint, MAX(ng, 1));
  f->map = g_new0(guint32, MAX(ng, 1));
  f->off = g_new0(guint32, w->n_ranks + 1);
  for (guint g = 0; g < ng; g++) {
    const guint32 *m = sim_workload_group(w, g, &f->size[g]);
    trace_group_label(w, g, f->label[g].s, sizeof f->label[g].s);
    for (guint i = 0; i < f->size[g]; i++)
      f->off[m[i] + 1]++;
  }
  for (guint r = 0; r < w->n_ranks; r++)
    f->off[r + 1] += f->off[r];
  f->of = g_new(guint32, MAX(f->off[w->n_ranks], 1));
  g_autofree guint32 *fill = g_memdup2(f->off, sizeof(guint32) * w->n_ranks);
  for (guint g = 0; g < ng; g++) {
    guint n;
    const guint32 *m = sim_workload_group(w, g, &n);
    for (guint i = 0; i < n; i++)
      f->of[fill[m[i]]++] = g;
  }
}

static void info_fold_clear(InfoFold *f)
{
  g_free(f->label);
  g_free(f->size);
  g_free(f->map);
  g_free(f->off);
  g_free(f->of);
}

/* Points f->map at rank r's images of the groups of its representative
 * q (the only groups q's collectives name). */
static void info_fold_map(InfoFold *f, guint32 r, guint32 q)
{
  for (guint32 i = f->off[q]; i < f->off[q + 1]; i++) {
    guint32 g = f->of[i];
    f->map[g] = g;
    for (guint32 j = f->off[r]; j < f->off[r + 1]; j++) {
      guint32 h = f->of[j];
      if (f->size[h] == f->size[g] &&
          strcmp(f->label[h].s, f->label[g].s) == 0) {
        f->map[g] = h;
        break;
      }
    }
  }
}

/* A machine that replays every op at its reference duration with no
 * power: the timing the trace recorded (host_bound_share). */
static void hb_kernel(gpointer ctx, guint gpu, guint32 shape, SimClocks req,
                      guint iter, SimCost *out)
{
  (void)ctx; (void)gpu; (void)shape; (void)req; (void)iter;
  memset(out, 0, sizeof *out);
  out->time_scale = 1.0;
}

static gint64 hb_coll(gpointer ctx, guint32 group, double bytes,
                      SimCollType coll, gint64 start_ns)
{
  (void)ctx; (void)group; (void)bytes; (void)coll; (void)start_ns;
  return 0;
}

static gint64 hb_p2p(gpointer ctx, guint src, guint dst, double bytes,
                     gint64 start_ns)
{
  (void)ctx; (void)src; (void)dst; (void)bytes; (void)start_ns;
  return 0;
}

/* Replays w at its recorded durations: the step time and the mean share
 * of it that the ranks' GPUs were idle (neither computing, communicating
 * nor blocked).  FALSE when the replay fails (a folded workload, or one
 * the engine refuses). */
static gboolean host_bound_share(const SimWorkload *w, gint64 *step_ns,
                                 double *share)
{
  g_autofree double *zero = g_new0(double, MAX(w->n_ranks, 1));
  SimMachine m = {0};
  m.n_gpus = w->n_ranks;
  m.idle_power_w = m.blocked_power_w = m.comm_power_w = zero;
  m.kernel_cost = hb_kernel;
  m.collective_ns = hb_coll;
  m.p2p_ns = hb_p2p;
  m.uniform_pricing = TRUE;
  g_autoptr(SimEngine) e = sim_engine_new(w, &m, NULL);
  if (e == NULL)
    return FALSE;
  g_autoptr(SimPlan) plan = sim_plan_new_uniform(w->n_ranks,
                                                 (SimClocks){0, 0});
  g_autoptr(SimResult) r = sim_engine_run(e, plan, 1, NULL);
  if (r == NULL || r->time_ns <= 0)
    return FALSE;
  double sum = 0;
  for (guint g = 0; g < r->n_gpus; g++)
    sum += r->per_gpu[g].idle_ns / (double)r->time_ns;
  *step_ns = r->time_ns;
  *share = sum / MAX(r->n_gpus, 1);
  return TRUE;
}

/* Counts op `op` of rank r (running its own or its representative's ops,
 * with gmap the image of its groups then) into st, the collective ops and
 * bytes per group and the rank's kernel time *busy. */
static void stats_count_op(TraceStats *st, guint r, const SimRank *rk,
                           const SimOp *op,
                           const SimShape *shapes, const guint32 *gmap,
                           guint64 *coll_ops, double *coll_bytes,
                           gint64 *busy)
{
  const SimShape *sh = &shapes[op->shape];
  st->by_kind[op->kind]++;
  if (op->kind == SIM_OP_HOST) {
    st->host_ops++;
    return;
  }
  st->by_class[op->klass]++;
  switch (op->kind) {
  case SIM_OP_KERNEL:
    /* Saturating: a valid workload bounds each ref_ns, not the sum
     * (fuzzing: an imported trace of two 2^62 ns kernels). */
    *busy = op->ref_ns > G_MAXINT64 - *busy ? G_MAXINT64
                                            : *busy + op->ref_ns;
    if (op->phase < SIM_PHASE_COUNT) {
      gint64 *ph = &st->busy_phase_ns[(gsize)r * SIM_PHASE_COUNT +
                                      op->phase];
      *ph = op->ref_ns > G_MAXINT64 - *ph ? G_MAXINT64 : *ph + op->ref_ns;
    }
    st->kernel_flops += sh->flops;
    st->kernel_bytes += sh->bytes;
    st->kernel_ns += (double)op->ref_ns;
    if (sh->flops > 0 || sh->bytes > 0)
      st->shaped_ns += (double)op->ref_ns;
    break;
  case SIM_OP_COLLECTIVE:
    st->comm_bytes += sh->bytes;
    st->coll_by_type[sh->coll]++;
    st->coll_bytes_by_type[sh->coll] += sh->bytes;
    coll_ops[gmap != NULL ? gmap[sim_op_peer(rk, op)] : sim_op_peer(rk, op)]++;
    coll_bytes[gmap != NULL ? gmap[sim_op_peer(rk, op)]
                            : sim_op_peer(rk, op)] += sh->bytes;
    break;
  case SIM_OP_SEND:
    st->comm_bytes += sh->bytes;
    st->p2p_sends++;
    st->p2p_bytes += sh->bytes;
    break;
  case SIM_OP_RECV:
    st->comm_bytes += sh->bytes;
    break;
  default:
    break;
  }
}

/* Folds the collective ops and bytes per group into st->groups, one entry
 * per group kind (trace_group_label), in order of first group id. */
static void stats_group_kinds(const SimWorkload *w, TraceStats *st,
                              const guint64 *coll_ops,
                              const double *coll_bytes)
{
  for (guint g = 0; g < st->n_groups; g++) {
    if (coll_ops[g] == 0)
      continue;
    TraceGroupStats gs;
    memset(&gs, 0, sizeof gs);
    trace_group_label(w, g, gs.label, sizeof gs.label);
    guint n = 0;
    sim_workload_group(w, g, &n);
    TraceGroupStats *dst = NULL;
    for (guint k = 0; k < st->groups->len && dst == NULL; k++) {
      TraceGroupStats *e = &g_array_index(st->groups, TraceGroupStats, k);
      if (strcmp(e->label, gs.label) == 0)
        dst = e;
    }
    if (dst == NULL) {
      g_array_append_val(st->groups, gs);
      dst = &g_array_index(st->groups, TraceGroupStats, st->groups->len - 1);
    }
    dst->n_groups++;
    dst->ops += coll_ops[g];
    dst->calls += coll_ops[g] / MAX(n, 1);
    dst->bytes += coll_bytes[g];
  }
}

/* The host-stream figures of a workload with host ops: streams holding
 * them, and the iteration at its recorded durations. */
static void stats_host(const SimWorkload *w, TraceStats *st)
{
  for (guint r = 0; r < w->n_ranks; r++) {
    const SimRank *rk = &w->ranks[r];
    for (guint s = 0; s < rk->n_streams; s++) {
      guint32 i = rk->stream_off[s];
      while (i < rk->stream_off[s + 1] && rk->ops[i].kind == SIM_OP_MARKER)
        i++;
      st->host_streams += i < rk->stream_off[s + 1] &&
                          rk->ops[i].kind == SIM_OP_HOST;
    }
  }
  if (!host_bound_share(w, &st->step_ns, &st->host_bound))
    st->step_ns = 0;
}

void trace_stats_compute(const SimWorkload *w, TraceStats *st)
{
  g_return_if_fail(w != NULL && st != NULL);
  memset(st, 0, sizeof *st);
  st->n_ranks = w->n_ranks;
  st->n_shapes = w->shapes->len;
  st->n_names = w->names->len;
  st->n_groups = sim_workload_n_groups(w);
  st->busy_ns = g_new0(gint64, MAX(w->n_ranks, 1));
  st->busy_phase_ns = g_new0(gint64, (gsize)MAX(w->n_ranks, 1) *
                                         SIM_PHASE_COUNT);
  st->groups = g_array_new(FALSE, TRUE, sizeof(TraceGroupStats));
  const SimShape *shapes = (const SimShape *)(void *)w->shapes->data;
  /* Collective ops per group, then folded into group kinds. */
  g_autofree guint64 *coll_ops = g_new0(guint64, MAX(st->n_groups, 1));
  g_autofree double *coll_bytes = g_new0(double, MAX(st->n_groups, 1));
  st->streams_min = G_MAXUINT;
  /* A folded workload counts every rank's ops as its unfolded twin would
   * (each rank runs its representative's), so both give the same stats. */
  InfoFold fold;
  memset(&fold, 0, sizeof fold);
  if (w->fold_rep != NULL)
    info_fold_init(&fold, w);
  for (guint r = 0; r < w->n_ranks; r++) {
    guint32 q = w->fold_rep != NULL ? w->fold_rep[r] : r;
    const SimRank *rk = &w->ranks[q];
    const guint32 *gmap = NULL;
    if (q != r) {
      info_fold_map(&fold, r, q);
      gmap = fold.map;
    }
    st->n_ops += rk->n_ops;
    st->streams_min = MIN(st->streams_min, rk->n_streams);
    st->streams_max = MAX(st->streams_max, rk->n_streams);
    st->streams_total += rk->n_streams;
    gint64 busy = 0;
    for (guint32 i = 0; i < rk->n_ops; i++)
      stats_count_op(st, r, rk, &rk->ops[i], shapes, gmap, coll_ops, coll_bytes,
                     &busy);
    st->busy_ns[r] = busy;
    if (r == 0 || busy < st->busy_min_ns) {
      st->busy_min_ns = busy;
      st->busy_min_rank = r;
    }
    if (r == 0 || busy > st->busy_max_ns) {
      st->busy_max_ns = busy;
      st->busy_max_rank = r;
    }
    st->busy_mean_ns += (double)busy;
  }
  info_fold_clear(&fold);
  if (w->n_ranks > 0)
    st->busy_mean_ns /= w->n_ranks;
  else
    st->streams_min = 0;
  stats_group_kinds(w, st, coll_ops, coll_bytes);
  if (st->host_ops > 0)
    stats_host(w, st);
}

void trace_stats_clear(TraceStats *st)
{
  if (st == NULL)
    return;
  g_free(st->busy_ns);
  g_free(st->busy_phase_ns);
  if (st->groups != NULL)
    g_array_unref(st->groups);
  memset(st, 0, sizeof *st);
}

static void append_ms(GString *out, gint64 ns)
{
  g_string_append_printf(out, "%.3f ms", (double)ns * 1e-6);
}

static void append_bytes(GString *out, double bytes)
{
  if (bytes >= 1e12)
    g_string_append_printf(out, "%.3f TB", bytes * 1e-12);
  else if (bytes >= 1e9)
    g_string_append_printf(out, "%.3f GB", bytes * 1e-9);
  else if (bytes >= 1e6)
    g_string_append_printf(out, "%.3f MB", bytes * 1e-6);
  else if (bytes >= 1e3)
    g_string_append_printf(out, "%.3f kB", bytes * 1e-3);
  else
    g_string_append_printf(out, "%.0f B", bytes);
}

/* The text of `joulesim trace info` and of js.trace.info's `text`
 * (traces/info.h), read off trace_stats_compute: the counts and layout,
 * then a section per part of TraceStats, left out when the trace has
 * nothing for it (host ops, collectives, point-to-point, provenance). */
void trace_info(const SimWorkload *w, GString *out)
{
  g_return_if_fail(w != NULL && out != NULL);
  TraceStats st;
  trace_stats_compute(w, &st);
  g_string_append_printf(out,
                         "ranks         %u\n"
                         "ops           %" G_GUINT64_FORMAT "\n"
                         "shapes        %u\n"
                         "names         %u\n"
                         "groups        %u\n",
                         st.n_ranks, st.n_ops, st.n_shapes, st.n_names,
                         st.n_groups);
  const char *cp = w->provenance != NULL
                       ? g_hash_table_lookup(w->provenance, "context_parallel")
                       : NULL;
  if (w->tp > 0 || w->pp > 0 || w->dp > 0)
    g_string_append_printf(out, "layout        tp %u, %s%s%spp %u, dp %u, "
                           "%u microbatches, schedule %s\n", w->tp,
                           cp != NULL ? "cp " : "", cp != NULL ? cp : "",
                           cp != NULL ? ", " : "", w->pp, w->dp,
                           w->microbatches,
                           w->schedule ? w->schedule : "unknown");
  if (w->ref_gpu != NULL)
    g_string_append_printf(out, "reference GPU %s\n", w->ref_gpu);
  if (w->tokens_per_iteration > 0)
    g_string_append_printf(out, "tokens        %.0f per iteration\n",
                           w->tokens_per_iteration);
  g_string_append_printf(out, "streams       %u to %u per rank, %"
                         G_GUINT64_FORMAT " in all\n", st.streams_min,
                         st.streams_max, st.streams_total);

  g_string_append(out, "\nops per class\n");
  for (int c = 0; c < SIM_CLASS_COUNT; c++)
    if (st.by_class[c] > 0)
      g_string_append_printf(out, "  %-12s %12" G_GUINT64_FORMAT "  %5.1f%%\n",
                             sim_class_name((SimOpClass)c), st.by_class[c],
                             100.0 * (double)st.by_class[c] /
                               (double)MAX(st.n_ops - st.host_ops, 1));
  g_string_append(out, "ops per kind\n");
  for (int k = 0; k < SIM_OP_KIND_COUNT; k++)
    if (st.by_kind[k] > 0)
      g_string_append_printf(out, "  %-12s %12" G_GUINT64_FORMAT "\n",
                             sim_kind_name((SimOpKind)k), st.by_kind[k]);

  if (st.host_ops > 0) {
    g_string_append_printf(out, "host          %" G_GUINT64_FORMAT " ops on %"
                           G_GUINT64_FORMAT " host streams (CPU threads)\n",
                           st.host_ops, st.host_streams);
    if (st.step_ns > 0)
      g_string_append_printf(out, "step          %.3f ms replayed at the "
                             "recorded durations; host-bound %.1f%% (GPU "
                             "idle waiting for the host)\n",
                             (double)st.step_ns * 1e-6,
                             100.0 * st.host_bound);
  }

  g_string_append(out, "\nGPU busy time per rank (sum of kernel ref_ns)\n");
  if (st.n_ranks <= 16) {
    for (guint r = 0; r < st.n_ranks; r++) {
      g_string_append_printf(out, "  rank %-6u ", r);
      append_ms(out, st.busy_ns[r]);
      g_string_append_c(out, '\n');
    }
  } else if (st.n_ranks > 0) {
    g_string_append_printf(out, "  min  (rank %u) ", st.busy_min_rank);
    append_ms(out, st.busy_min_ns);
    g_string_append_printf(out, "\n  mean          %.3f ms\n",
                           st.busy_mean_ns * 1e-6);
    g_string_append_printf(out, "  max  (rank %u) ", st.busy_max_rank);
    append_ms(out, st.busy_max_ns);
    g_string_append_c(out, '\n');
  }

  if (st.groups->len > 0) {
    g_string_append(out, "\ncollectives per group type\n");
    for (guint k = 0; k < st.groups->len; k++) {
      const TraceGroupStats *gs =
        &g_array_index(st.groups, TraceGroupStats, k);
      g_string_append_printf(out, "  %-10s %6u groups %10" G_GUINT64_FORMAT
                             " calls %12" G_GUINT64_FORMAT " rank-ops  ",
                             gs->label, gs->n_groups, gs->calls, gs->ops);
      append_bytes(out, gs->bytes);
      g_string_append_c(out, '\n');
    }
    g_string_append(out, "collectives per type\n");
    for (int t = 0; t < SIM_COLL_COUNT; t++)
      if (st.coll_by_type[t] > 0) {
        g_string_append_printf(out, "  %-15s %12" G_GUINT64_FORMAT
                               " rank-ops  ", sim_coll_name((SimCollType)t),
                               st.coll_by_type[t]);
        append_bytes(out, st.coll_bytes_by_type[t]);
        g_string_append_c(out, '\n');
      }
  }
  if (st.p2p_sends > 0) {
    g_string_append_printf(out, "point-to-point %" G_GUINT64_FORMAT
                           " send/recv pairs, ", st.p2p_sends);
    append_bytes(out, st.p2p_bytes);
    g_string_append_c(out, '\n');
  }
  g_string_append(out, "\nbytes\n  kernels (DRAM)  ");
  append_bytes(out, st.kernel_bytes);
  g_string_append(out, "\n  communication   ");
  append_bytes(out, st.comm_bytes);
  g_string_append_printf(out, "\nkernel work     %.3f TFLOP\n",
                         st.kernel_flops * 1e-12);
  if (st.kernel_ns > 0)
    g_string_append_printf(out, "kernel shapes   %.1f%% of kernel time has "
                           "FLOPs/bytes (roofline pricing; the rest by "
                           "class)\n", 100.0 * st.shaped_ns / st.kernel_ns);

  if (g_hash_table_size(w->provenance) > 0) {
    g_string_append(out, "\nprovenance\n");
    g_autoptr(GPtrArray) keys = sim_workload_provenance_keys(w);
    for (guint i = 0; i < keys->len; i++) {
      const char *k = g_ptr_array_index(keys, i);
      g_string_append_printf(out, "  %-16s %s\n", k,
                             (const char *)g_hash_table_lookup(
                               w->provenance, k));
    }
  }
  trace_stats_clear(&st);
}
