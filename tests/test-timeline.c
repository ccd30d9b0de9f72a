/* tests/test-timeline.c -- Chrome trace-event export: the JSON parses, has
 * one complete event per replayed op (and per blocked wait) on the right
 * process and thread, the power counter integrates to the engine's energy,
 * GPU and window filters work, hostile kernel names stay valid JSON, and
 * failures leave no file. */
#include "run/session.h"
#include "models/net.h"
#include "traces/gpt.h"
#include "traces/timeline.h"
#include "testresults.h"
#include "testutil.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <yajl/yajl_tree.h>

/* ---- runs ----------------------------------------------------------------------- */

static SimWorkload *gen_gpt(guint tp, guint pp, guint dp, guint mb)
{
  GError *error = NULL;
  GptConfig cfg;
  gpt_config_init(&cfg);
  g_assert_true(gpt_config_set_model(&cfg, "gpt3-125m", &error));
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = dp;
  cfg.microbatches = mb;
  cfg.seq_len = 256;
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  const GpuSpec *gpu = gpu_catalogue_lookup(cat, "A100-SXM4-80GB", &error);
  SimWorkload *w = gpt_generate(&cfg, gpu, &error);
  g_assert_no_error(error);
  return w;
}

/* What the test expects per GPU, counted from the engine's records with
 * the exporter's filter rules, independently of the exporter. */
typedef struct {
  TraceTimeline *tl;
  const SimWorkload *w;
  const guint8 *sel;     /* NULL: all */
  gint64 t0, t1;         /* t1 < 0: open */
  guint64 complete[16], blocked[16], instant[16];
  guint64 records;
} Expect;

static gboolean overlaps(const Expect *e, gint64 a, gint64 b)
{
  return b >= e->t0 && (e->t1 < 0 || a <= e->t1);
}

static void chain(gpointer data, const SimOpRecord *rec)
{
  Expect *e = data;
  e->records++;
  g_assert_cmpuint(rec->gpu, <, 16);
  if (e->sel == NULL || e->sel[rec->gpu]) {
    const SimOp *op = &e->w->ranks[rec->gpu].ops[rec->op];
    if (op->kind == SIM_OP_MARKER) {
      if (overlaps(e, rec->start_ns, rec->end_ns))
        e->instant[rec->gpu]++;
    } else {
      if (overlaps(e, rec->start_ns, rec->end_ns))
        e->complete[rec->gpu]++;
      if (rec->arrive_ns < rec->start_ns &&
          overlaps(e, rec->arrive_ns, rec->start_ns))
        e->blocked[rec->gpu]++;
    }
  }
  trace_timeline_observe(e->tl, rec);
}

/* Simulates w on an A100 cluster (one GPU per rank), exporting to path
 * with opt (idle/blocked powers filled in here).  Returns the result. */
static SimResult *run_export(const SimWorkload *w, const char *path,
                             TraceTimelineOptions *opt, Expect *e,
                             guint iterations, TraceTimelineCounts *counts)
{
  GError *error = NULL;
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            &error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_autoptr(Cluster) c = cluster_new(gpu, net, w->n_ranks,
                                     MIN(w->n_ranks, 8), &error);
  g_assert_no_error(error);
  opt->idle_power_w = gpu->idle_power_w.v;
  opt->blocked_power_w = gpu->blocked_power_w.v;
  e->tl = trace_timeline_open(path, w, opt, &error);
  g_assert_no_error(error);
  e->w = w;
  e->t0 = opt->t0_ns;
  e->t1 = opt->t1_ns;
  DvfsPolicy pol;
  memset(&pol, 0, sizeof pol);
  pol.kind = DVFS_MAX;
  JsRunOptions ro;
  memset(&ro, 0, sizeof ro);
  ro.iterations = iterations;
  ro.seed = 1;
  ro.switch_latency_ms = -1;
  ro.observer = chain;
  ro.observer_data = e;
  SimResult *r = js_simulate(s, c, w, &pol, &ro, &error);
  g_assert_no_error(error);
  g_assert_true(trace_timeline_close(e->tl, counts, &error));
  g_assert_no_error(error);
  e->tl = NULL;
  return r;
}

/* ---- reading the JSON back -------------------------------------------------------- */

static yajl_val parse_file(const char *path)
{
  g_autofree char *text = NULL;
  g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
  char err[256] = "";
  yajl_val root = yajl_tree_parse(text, err, sizeof err);
  if (root == NULL)
    g_error("%s does not parse as JSON: %s", path, err);
  return root;
}

static yajl_val get(yajl_val obj, const char *key)
{
  const char *path[] = { key, NULL };
  return yajl_tree_get(obj, path, yajl_t_any);
}

static const char *get_str(yajl_val obj, const char *key)
{
  yajl_val v = get(obj, key);
  return YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL;
}

static double get_num(yajl_val obj, const char *key)
{
  yajl_val v = get(obj, key);
  g_assert_true(YAJL_IS_NUMBER(v));
  return YAJL_GET_DOUBLE(v);
}

static yajl_val events_of(yajl_val root)
{
  g_assert_true(YAJL_IS_OBJECT(root));
  g_assert_cmpstr(get_str(root, "displayTimeUnit"), ==, "ns");
  yajl_val ev = get(root, "traceEvents");
  g_assert_true(YAJL_IS_ARRAY(ev));
  return ev;
}

typedef struct {
  guint64 complete[16], blocked[16], instant[16], meta[16];
  guint64 power[16], clock[16];
  gboolean process_named[16];
  guint64 thread_named[16]; /* stream bits */
  guint64 used_streams[16];
} Seen;

/* Checks every event's shape and counts them per GPU. */
static void scan(yajl_val ev, Seen *s, gint64 t0, gint64 t1)
{
  memset(s, 0, sizeof *s);
  double lo_us = (double)t0 / 1e3, hi_us = t1 < 0 ? 1e300 : (double)t1 / 1e3;
  for (size_t i = 0; i < YAJL_GET_ARRAY(ev)->len; i++) {
    yajl_val e = YAJL_GET_ARRAY(ev)->values[i];
    const char *ph = get_str(e, "ph");
    g_assert_nonnull(ph);
    guint pid = (guint)get_num(e, "pid");
    g_assert_cmpuint(pid, <, 16);
    if (strcmp(ph, "M") == 0) {
      s->meta[pid]++;
      const char *name = get_str(e, "name");
      if (strcmp(name, "process_name") == 0)
        s->process_named[pid] = TRUE;
      if (strcmp(name, "thread_name") == 0)
        s->thread_named[pid] |= G_GUINT64_CONSTANT(1)
                                << (guint)get_num(e, "tid");
      continue;
    }
    double ts = get_num(e, "ts");
    if (strcmp(ph, "C") == 0) {
      g_assert_true(ts >= lo_us - 1e-9 && ts <= hi_us + 1e-9);
      yajl_val args = get(e, "args");
      if (strcmp(get_str(e, "name"), "power_w") == 0) {
        double p = get_num(args, "power_w");
        g_assert_cmpfloat(p, >=, 50);
        g_assert_cmpfloat(p, <=, 1500);
        s->power[pid]++;
      } else {
        g_assert_cmpstr(get_str(e, "name"), ==, "sm_mhz");
        g_assert_cmpfloat(get_num(args, "sm_mhz"), >=, 210);
        g_assert_cmpfloat(get_num(args, "sm_mhz"), <=, 1410);
        s->clock[pid]++;
      }
      continue;
    }
    guint tid = (guint)get_num(e, "tid");
    s->used_streams[pid] |= G_GUINT64_CONSTANT(1) << tid;
    g_assert_nonnull(get_str(e, "name"));
    if (strcmp(ph, "i") == 0) {
      s->instant[pid]++;
      continue;
    }
    g_assert_cmpstr(ph, ==, "X");
    double dur = get_num(e, "dur");
    g_assert_cmpfloat(dur, >=, 0);
    /* Overlaps the window (µs rounding: 1 ns slack). */
    g_assert_true(ts <= hi_us + 1e-3 && ts + dur >= lo_us - 1e-3);
    yajl_val args = get(e, "args");
    g_assert_true(YAJL_IS_OBJECT(args));
    if (g_strcmp0(get_str(e, "cat"), "blocked") == 0) {
      g_assert_cmpstr(get_str(e, "name"), ==, "blocked");
      g_assert_nonnull(get_str(args, "waiting_for"));
      g_assert_cmpfloat(get_num(args, "power_w"), >, 0);
      s->blocked[pid]++;
      continue;
    }
    g_assert_nonnull(get_str(args, "class"));
    g_assert_cmpstr(get_str(args, "class"), ==, get_str(e, "cat"));
    g_assert_nonnull(get_str(args, "phase"));
    double p = get_num(args, "power_w");
    g_assert_cmpfloat(p, >, 0);
    /* energy = power x duration (µs -> s), to the printed precision */
    g_assert_true(test_close(get_num(args, "energy_j"), p * dur * 1e-6,
                             1e-4));
    if (strcmp(get_str(args, "kind"), "kernel") == 0)
      g_assert_cmpfloat(get_num(args, "sm_mhz"), >, 0);
    else
      g_assert_nonnull(get_str(args, "coll"));
    s->complete[pid]++;
  }
}

/* Integrates a GPU's power counter from 0 to end_ns (idle before its first
 * sample). */
static double power_integral(yajl_val ev, guint gpu, double idle_w,
                             gint64 end_ns)
{
  g_autoptr(GArray) pts = g_array_new(FALSE, FALSE, sizeof(double) * 2);
  for (size_t i = 0; i < YAJL_GET_ARRAY(ev)->len; i++) {
    yajl_val e = YAJL_GET_ARRAY(ev)->values[i];
    if (strcmp(get_str(e, "ph"), "C") != 0 ||
        strcmp(get_str(e, "name"), "power_w") != 0 ||
        (guint)get_num(e, "pid") != gpu)
      continue;
    double p[2] = { get_num(e, "ts") * 1e-6,
                    get_num(get(e, "args"), "power_w") };
    g_array_append_vals(pts, p, 1);
  }
  double t = 0, pw = idle_w, energy = 0;
  for (guint i = 0; i < pts->len; i++) {
    const double *p = &g_array_index(pts, double, 2 * i);
    g_assert_cmpfloat(p[0], >=, t); /* samples in time order per GPU */
    energy += pw * (p[0] - t);
    t = p[0];
    pw = p[1];
  }
  energy += pw * ((double)end_ns * 1e-9 - t);
  return energy;
}

/* ---- tests ---------------------------------------------------------------------------- */

static guint dir_entries(const char *dir)
{
  GDir *d = g_dir_open(dir, 0, NULL);
  g_assert_nonnull(d);
  guint n = 0;
  while (g_dir_read_name(d) != NULL)
    n++;
  g_dir_close(d);
  return n;
}

/* Everything: one complete event per replayed op and iteration, blocked
 * waits, names for every process and thread, counters whose power
 * integrates to the engine's energy per GPU. */
static void test_full_export(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "t.json", NULL);
  g_autoptr(SimWorkload) w = gen_gpt(2, 2, 2, 4);
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);
  opt.label = "test \"run\"";
  Expect e;
  memset(&e, 0, sizeof e);
  TraceTimelineCounts n;
  const guint iterations = 2;
  g_autoptr(SimResult) r = run_export(w, path, &opt, &e, iterations, &n);
  g_assert_cmpuint(dir_entries(dir), ==, 1);
  g_assert_cmpuint(e.records, ==, iterations * sim_workload_n_ops(w));

  yajl_val root = parse_file(path);
  const char *lp[] = { "otherData", "label", NULL };
  g_assert_cmpstr(YAJL_GET_STRING(yajl_tree_get(root, lp, yajl_t_string)),
                  ==, "test \"run\"");
  yajl_val ev = events_of(root);
  Seen s;
  scan(ev, &s, 0, -1);
  guint64 blocked = 0, complete = 0, counters = 0, meta = 0;
  for (guint g = 0; g < w->n_ranks; g++) {
    /* Independent count: every non-marker op, every iteration. */
    guint64 ops = 0;
    for (guint32 i = 0; i < w->ranks[g].n_ops; i++)
      ops += w->ranks[g].ops[i].kind != SIM_OP_MARKER;
    g_assert_cmpuint(s.complete[g], ==, ops * iterations);
    g_assert_cmpuint(s.complete[g], ==, e.complete[g]);
    g_assert_cmpuint(s.blocked[g], ==, e.blocked[g]);
    g_assert_true(s.process_named[g]);
    g_assert_cmpuint(s.thread_named[g], ==, s.used_streams[g]);
    g_assert_cmpuint(s.clock[g], >=, 1);
    g_assert_cmpuint(s.power[g], >=, 2);
    double ej = power_integral(ev, g, opt.idle_power_w, r->time_ns);
    if (!test_close(ej, r->per_gpu[g].energy_j, 1e-5))
      g_error("GPU %u: power counter integrates to %.9g J, engine %.9g J",
              g, ej, r->per_gpu[g].energy_j);
    blocked += s.blocked[g];
    complete += s.complete[g];
    counters += s.power[g] + s.clock[g];
    meta += s.meta[g];
  }
  g_assert_cmpuint(blocked, >, 0); /* pipeline and DP waits exist */
  g_assert_cmpuint(n.complete, ==, complete);
  g_assert_cmpuint(n.blocked, ==, blocked);
  g_assert_cmpuint(n.counter, ==, counters);
  g_assert_cmpuint(n.metadata, ==, meta);
  g_assert_cmpuint(n.instant, ==, 0);
  g_test_message("%" G_GUINT64_FORMAT " complete, %" G_GUINT64_FORMAT
                 " blocked, %" G_GUINT64_FORMAT " counter, %" G_GUINT64_FORMAT
                 " metadata events", n.complete, n.blocked, n.counter,
                 n.metadata);
  yajl_tree_free(root);

  /* Same run, same bytes. */
  g_autofree char *again = g_build_filename(dir, "again.json", NULL);
  Expect e2;
  memset(&e2, 0, sizeof e2);
  trace_timeline_options_init(&opt);
  opt.label = "test \"run\"";
  g_autoptr(SimResult) r2 = run_export(w, again, &opt, &e2, iterations,
                                       NULL);
  g_autofree char *a = NULL, *b = NULL;
  gsize na = 0, nb = 0;
  g_assert_true(g_file_get_contents(path, &a, &na, NULL));
  g_assert_true(g_file_get_contents(again, &b, &nb, NULL));
  g_assert_cmpmem(a, na, b, nb);
  test_rmdir(dir);
}

/* The HDF5 power timeline (trace_timeline_open_h5) of one policy of each
 * family -- the baseline, locked clocks, a planned one, the pipeline
 * policies (whose runs are replayed once more for the observer) --
 * integrates, GPU by GPU, to the run's energy: each row holds until the
 * GPU's next, the last until the run's end. */
static void test_h5_policies(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "t.h5", NULL);
  g_autoptr(SimWorkload) w = gen_gpt(2, 2, 1, 4);
  GError *error = NULL;
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            &error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_autoptr(Cluster) c = cluster_new(gpu, net, w->n_ranks, w->n_ranks,
                                     &error);
  g_assert_no_error(error);
  static const struct {
    const char *run;
    DvfsKind kind;
  } cases[] = {
    {"max", DVFS_MAX},         {"fixed", DVFS_FIXED},
    {"iteration", DVFS_ITERATION}, {"perseus", DVFS_PERSEUS},
    {"envpipe", DVFS_ENVPIPE}, {"zeus", DVFS_ZEUS},
  };
  for (gsize k = 0; k < G_N_ELEMENTS(cases); k++) {
    DvfsPolicy pol;
    dvfs_policy_init(&pol, cases[k].kind);
    pol.sm_mhz = cases[k].kind == DVFS_FIXED ? 1200 : 0;
    pol.slowdown = 0.05;
    TraceTimelineOptions opt;
    trace_timeline_options_init(&opt);
    opt.idle_power_w = gpu->idle_power_w.v;
    opt.blocked_power_w = gpu->blocked_power_w.v;
    ResMeta meta = {"test", NULL, NULL, 1, NULL, NULL};
    TraceTimeline *tl = trace_timeline_open_h5(path, cases[k].run, FALSE,
                                               &meta, w, &opt, &error);
    g_assert_no_error(error);
    JsRunOptions ro;
    memset(&ro, 0, sizeof ro);
    ro.iterations = 2;
    ro.seed = 1;
    ro.switch_latency_ms = -1;
    ro.observer = trace_timeline_observe;
    ro.observer_data = tl;
    g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &ro, &error);
    g_assert_no_error(error);
    TraceTimelineCounts n;
    g_assert_true(trace_timeline_close(tl, &n, &error));
    g_assert_no_error(error);

    g_autoptr(GPtrArray) rows = res_timeline_read(path, cases[k].run, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(rows->len, ==, n.counter);
    double end_s = (double)r->time_ns * 1e-9;
    guint i = 0;
    for (guint g = 0; g < w->n_ranks; g++) {
      double energy = 0, t = -1, p = 0;
      for (; i < rows->len; i++) {
        GPtrArray *row = g_ptr_array_index(rows, i);
        if (test_cell(row, "gpu")->i != g)
          break;
        double ti = test_cell(row, "time_s")->f;
        g_assert_cmpfloat(ti, >=, t);
        if (t >= 0)
          energy += p * (ti - t);
        t = ti;
        p = test_cell(row, "power_w")->f;
      }
      g_assert_cmpfloat(t, >=, 0); /* the GPU has rows */
      energy += p * (end_s - t);
      if (!test_close(energy, r->per_gpu[g].energy_j, 1e-9))
        g_error("%s, GPU %u: power integrates to %.9g J, engine %.9g J",
                cases[k].run, g, energy, r->per_gpu[g].energy_j);
    }
    g_assert_cmpuint(i, ==, rows->len);
  }
  /* An existing run is refused unless replaced; nothing else changes. */
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);
  opt.idle_power_w = gpu->idle_power_w.v;
  TraceTimeline *tl = trace_timeline_open_h5(path, "max", FALSE, NULL, w,
                                             &opt, &error);
  g_assert_no_error(error);
  g_assert_false(trace_timeline_close(tl, NULL, &error));
  g_assert_error(error, RES_ERROR, RES_ERROR_EXISTS);
  g_clear_error(&error);
  /* No idle power: no power series. */
  opt.idle_power_w = 0;
  g_assert_null(trace_timeline_open_h5(path, "x", FALSE, NULL, w, &opt,
                                       &error));
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID);
  g_clear_error(&error);
  test_rmdir(dir);
}

/* A GPU subset and a time window. */
/* A run given its timeline as JsRunOptions.timeline (run/timeline.c, the
 * way js.simulate and trace export write one) writes the same file as one
 * that opens it and observes by hand; a bad GPU list fails before the run,
 * named with its context, and leaves no file. */
static void test_run_spec(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *by_hand = g_build_filename(dir, "hand.json", NULL);
  g_autofree char *by_spec = g_build_filename(dir, "spec.json", NULL);
  g_autoptr(SimWorkload) w = gen_gpt(2, 2, 1, 4);
  const guint32 gpus[] = { 1, 3 };
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);
  opt.gpus = gpus;
  opt.n_gpus = 2;
  opt.t0_ns = 1000;
  opt.label = "spec";
  Expect e;
  memset(&e, 0, sizeof e);
  TraceTimelineCounts want;
  g_autoptr(SimResult) r1 = run_export(w, by_hand, &opt, &e, 2, &want);

  GError *error = NULL;
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            &error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_autoptr(Cluster) c = cluster_new(gpu, net, w->n_ranks, 4, &error);
  g_assert_no_error(error);
  DvfsPolicy pol;
  memset(&pol, 0, sizeof pol);
  pol.kind = DVFS_MAX;
  JsTimelineSpec t;
  js_timeline_spec_init(&t);
  t.path = by_spec;
  t.gpus = "1,3";
  t.t0_ns = 1000;
  t.label = "spec";
  JsRunOptions ro;
  memset(&ro, 0, sizeof ro);
  ro.iterations = 2;
  ro.seed = 1;
  ro.switch_latency_ms = -1;
  ro.timeline = &t;
  g_auto(JsRunReport) rep = {0};
  g_autoptr(SimResult) r2 = js_simulate_report(s, c, w, &pol, &ro, &rep,
                                               &error);
  g_assert_no_error(error);
  g_assert_cmpint(r2->time_ns, ==, r1->time_ns);
  g_assert_cmpfloat(r2->energy_j, ==, r1->energy_j);
  g_assert_cmpmem(&rep.timeline, sizeof rep.timeline, &want, sizeof want);
  g_autofree char *a = NULL, *b = NULL;
  gsize na = 0, nb = 0;
  g_assert_true(g_file_get_contents(by_hand, &a, &na, NULL));
  g_assert_true(g_file_get_contents(by_spec, &b, &nb, NULL));
  g_assert_cmpmem(a, na, b, nb);

  g_autofree char *bad = g_build_filename(dir, "bad.json", NULL);
  t.path = bad;
  t.gpus = "4";
  t.gpus_context = "trace.h5";
  g_auto(JsRunReport) rep2 = {0};
  g_assert_null(js_simulate_report(s, c, w, &pol, &ro, &rep2, &error));
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID);
  g_assert_true(g_str_has_prefix(error->message, "trace.h5: GPU list '4'"));
  g_clear_error(&error);
  g_assert_cmpuint(dir_entries(dir), ==, 2); /* nor a temporary file */
  test_rmdir(dir);
}

static void test_filters(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "f.json", NULL);
  g_autoptr(SimWorkload) w = gen_gpt(2, 2, 1, 4);
  /* The whole run first, for its length. */
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);
  Expect all;
  memset(&all, 0, sizeof all);
  g_autoptr(SimResult) r = run_export(w, path, &opt, &all, 1, NULL);

  /* GPUs 1 and 3 only. */
  const guint32 gpus[] = { 3, 1 };
  const guint8 sel[4] = { 0, 1, 0, 1 };
  trace_timeline_options_init(&opt);
  opt.gpus = gpus;
  opt.n_gpus = 2;
  Expect e;
  memset(&e, 0, sizeof e);
  e.sel = sel;
  g_autoptr(SimResult) r1 = run_export(w, path, &opt, &e, 1, NULL);
  yajl_val root = parse_file(path);
  Seen s;
  scan(events_of(root), &s, 0, -1);
  for (guint g = 0; g < 4; g++) {
    if (sel[g]) {
      g_assert_cmpuint(s.complete[g], ==, all.complete[g]);
      g_assert_cmpuint(s.blocked[g], ==, all.blocked[g]);
      g_assert_cmpuint(s.power[g], >, 0);
    } else {
      g_assert_cmpuint(s.complete[g] + s.blocked[g] + s.meta[g] +
                         s.power[g] + s.clock[g], ==, 0);
    }
  }
  yajl_tree_free(root);

  /* The middle third of the run. */
  trace_timeline_options_init(&opt);
  opt.t0_ns = r->time_ns / 3;
  opt.t1_ns = 2 * r->time_ns / 3;
  memset(&e, 0, sizeof e);
  TraceTimelineCounts n;
  g_autoptr(SimResult) r2 = run_export(w, path, &opt, &e, 1, &n);
  root = parse_file(path);
  yajl_val ev = events_of(root);
  scan(ev, &s, opt.t0_ns, opt.t1_ns); /* asserts every event is inside */
  guint64 in = 0, total = 0;
  for (guint g = 0; g < 4; g++) {
    g_assert_cmpuint(s.complete[g], ==, e.complete[g]);
    g_assert_cmpuint(s.blocked[g], ==, e.blocked[g]);
    in += s.complete[g];
    total += all.complete[g];
  }
  g_assert_cmpuint(in, >, 0);
  g_assert_cmpuint(in, <, total);
  g_assert_cmpuint(n.complete, ==, in);
  /* Each GPU's power counter starts with its state at t0 (every GPU is
   * busy across the middle of the run). */
  for (guint g = 0; g < 4; g++) {
    double first = -1;
    for (size_t i = 0; i < YAJL_GET_ARRAY(ev)->len && first < 0; i++) {
      yajl_val x = YAJL_GET_ARRAY(ev)->values[i];
      if (strcmp(get_str(x, "ph"), "C") == 0 &&
          strcmp(get_str(x, "name"), "power_w") == 0 &&
          (guint)get_num(x, "pid") == g)
        first = get_num(x, "ts");
    }
    g_assert_cmpfloat(fabs(first * 1e3 - (double)opt.t0_ns), <, 1.0);
  }
  yajl_tree_free(root);
  test_rmdir(dir);
}

/* Names that break naive JSON writers. */
static void test_escaping(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "esc.json", NULL);
  static const char *const names[] = {
    "void gemm<float, \"quoted\">(x)",
    "back\\slash\ttab\nnewline\x01" "ctl",
    "utf8 \xce\xb1\xce\xb2 and bad \xff byte",
    "ProfilerStep#1",
  };
  static const char *const decoded[] = {
    "void gemm<float, \"quoted\">(x)",
    "back\\slash\ttab\nnewline\x01" "ctl",
    "utf8 \xce\xb1\xce\xb2 and bad \xef\xbf\xbd byte",
    "ProfilerStep#1",
  };
  g_autoptr(SimWorkload) w = sim_workload_new(1);
  g_autoptr(SimRankBuilder) b = sim_rank_builder_new();
  for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
    guint32 id = sim_workload_intern(w, names[i]);
    SimShape sh = { 1e9, 1e6, id, SIM_CLASS_GEMM, 0, 1, 0 };
    SimOp op;
    memset(&op, 0, sizeof op);
    op.shape = sim_workload_add_shape(w, &sh);
    op.name = id;
    op.ref_ns = 1000 * (i + 1);
    op.wait = SIM_NO_WAIT;
    op.kind = i == 3 ? SIM_OP_MARKER : SIM_OP_KERNEL;
    op.klass = i == 3 ? SIM_CLASS_OTHER : SIM_CLASS_GEMM;
    op.phase = SIM_PHASE_FORWARD;
    sim_rank_builder_add(b, &op);
  }
  sim_rank_builder_finish(b, w, 0);
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);
  Expect e;
  memset(&e, 0, sizeof e);
  TraceTimelineCounts n;
  g_autoptr(SimResult) r = run_export(w, path, &opt, &e, 1, &n);
  g_assert_cmpuint(n.complete, ==, 3);
  g_assert_cmpuint(n.instant, ==, 1);
  yajl_val root = parse_file(path); /* yajl checks UTF-8 too */
  yajl_val ev = events_of(root);
  guint found = 0;
  for (size_t i = 0; i < YAJL_GET_ARRAY(ev)->len; i++) {
    yajl_val x = YAJL_GET_ARRAY(ev)->values[i];
    const char *ph = get_str(x, "ph");
    if (strcmp(ph, "X") != 0 && strcmp(ph, "i") != 0)
      continue;
    const char *name = get_str(x, "name");
    gboolean ok = FALSE;
    for (guint k = 0; k < G_N_ELEMENTS(decoded); k++)
      ok = ok || strcmp(name, decoded[k]) == 0;
    if (!ok)
      g_error("unexpected name '%s'", name);
    found++;
  }
  g_assert_cmpuint(found, ==, 4);
  yajl_tree_free(root);
  test_rmdir(dir);
}

static void test_open_errors(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autoptr(SimWorkload) w = gen_gpt(2, 1, 1, 1);
  GError *error = NULL;
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);

  g_assert_null(trace_timeline_open(dir, w, &opt, &error));
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, dir));
  g_clear_error(&error);

  g_autofree char *nodir = g_build_filename(dir, "no", "t.json", NULL);
  g_assert_null(trace_timeline_open(nodir, w, &opt, &error));
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, nodir));
  g_clear_error(&error);

  g_autofree char *path = g_build_filename(dir, "t.json", NULL);
  const guint32 gpus[] = { 0, 2 };
  opt.gpus = gpus;
  opt.n_gpus = 2;
  g_assert_null(trace_timeline_open(path, w, &opt, &error));
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID);
  g_assert_nonnull(strstr(error->message, "GPU 2"));
  g_clear_error(&error);

  trace_timeline_options_init(&opt);
  opt.t0_ns = 100;
  opt.t1_ns = 50;
  g_assert_null(trace_timeline_open(path, w, &opt, &error));
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID);
  g_clear_error(&error);

  /* Abandoned: nothing left. */
  trace_timeline_options_init(&opt);
  TraceTimeline *tl = trace_timeline_open(path, w, &opt, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(dir_entries(dir), ==, 1); /* the temporary file */
  g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS));
  trace_timeline_abort(tl);
  g_assert_cmpuint(dir_entries(dir), ==, 0);
  test_rmdir(dir);
}

/* A write failure (file size limit) is reported at close and leaves no
 * file, not even a previous one's temporary. */
static void test_write_failure(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "big.json", NULL);
  g_autoptr(SimWorkload) w = gen_gpt(2, 2, 1, 8);
  GError *error = NULL;
  g_autoptr(JsSession) s = js_session_new(1);
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            &error);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", &error);
  g_autoptr(Cluster) c = cluster_new(gpu, net, w->n_ranks, 4, &error);
  TraceTimelineOptions opt;
  trace_timeline_options_init(&opt);
  opt.idle_power_w = gpu->idle_power_w.v;
  TraceTimeline *tl = trace_timeline_open(path, w, &opt, &error);
  g_assert_no_error(error);
  struct rlimit old_lim, lim;
  g_assert_cmpint(getrlimit(RLIMIT_FSIZE, &old_lim), ==, 0);
  void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = old_lim;
  lim.rlim_cur = 32 * 1024;
  g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &lim), ==, 0);
  DvfsPolicy pol;
  memset(&pol, 0, sizeof pol);
  JsRunOptions ro;
  memset(&ro, 0, sizeof ro);
  ro.iterations = 1;
  ro.switch_latency_ms = -1;
  ro.observer = trace_timeline_observe;
  ro.observer_data = tl;
  g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &ro, &error);
  gboolean ok = trace_timeline_close(tl, NULL, &error);
  g_assert_cmpint(setrlimit(RLIMIT_FSIZE, &old_lim), ==, 0);
  signal(SIGXFSZ, old_sig);
  g_assert_nonnull(r);
  g_assert_false(ok);
  g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, path));
  g_test_message("%s", error->message);
  g_clear_error(&error);
  g_assert_cmpuint(dir_entries(dir), ==, 0);
  test_rmdir(dir);
}

typedef struct {
  const char *spec;
  guint n;
  const char *want; /* ids joined by ',' or NULL for an error */
} GpusCase;

static const GpusCase gpus_cases[] = {
  { "0", 4, "0" },        { "0,2-3", 4, "0,2,3" },  { "3,1,1", 4, "1,3" },
  { " 1 , 2 ", 4, "1,2" }, { "0-7", 8, "0,1,2,3,4,5,6,7" },
  { "", 4, NULL },         { "a", 4, NULL },         { "2-1", 4, NULL },
  { "1-", 4, NULL },       { "-1", 4, NULL },        { "4", 4, NULL },
  { "1,,2", 4, NULL },     { "0-4", 4, NULL },       { "1.5", 4, NULL },
};

static void test_parse_gpus(gconstpointer data)
{
  const GpusCase *c = data;
  GError *error = NULL;
  g_autoptr(GArray) ids = trace_timeline_parse_gpus(c->spec, c->n, &error);
  if (c->want == NULL) {
    g_assert_null(ids);
    g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, c->spec));
    g_clear_error(&error);
    return;
  }
  g_assert_no_error(error);
  GString *got = g_string_new(NULL);
  for (guint i = 0; i < ids->len; i++)
    g_string_append_printf(got, "%s%u", i ? "," : "",
                           g_array_index(ids, guint32, i));
  g_assert_cmpstr(got->str, ==, c->want);
  g_string_free(got, TRUE);
}

typedef struct {
  const char *spec;
  gboolean ok;
  gint64 t0, t1;
} WindowCase;

static const WindowCase window_cases[] = {
  { "0.1:0.2", TRUE, 100000000, 200000000 },
  { "10ms:25ms", TRUE, 10000000, 25000000 },
  { ":5us", TRUE, 0, 5000 },
  { "1s:", TRUE, 1000000000, -1 },
  { "100ns:100ns", TRUE, 100, 100 },
  { " 2 : 3 ", TRUE, 2000000000, 3000000000 },
  { "5", FALSE, 0, 0 },
  { "2:1", FALSE, 0, 0 },
  { "a:b", FALSE, 0, 0 },
  { "1:2:3", FALSE, 0, 0 },
  { "-1:2", FALSE, 0, 0 },
  { "1x:2", FALSE, 0, 0 },
  { "1e30:", FALSE, 0, 0 },
};

static void test_parse_window(gconstpointer data)
{
  const WindowCase *c = data;
  GError *error = NULL;
  gint64 t0 = -7, t1 = -7;
  gboolean ok = trace_timeline_parse_window(c->spec, &t0, &t1, &error);
  if (!c->ok) {
    g_assert_false(ok);
    g_assert_error(error, TRACE_TIMELINE_ERROR, TRACE_TIMELINE_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, c->spec));
    g_clear_error(&error);
    return;
  }
  g_assert_no_error(error);
  g_assert_true(ok);
  g_assert_cmpint(t0, ==, c->t0);
  g_assert_cmpint(t1, ==, c->t1);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/timeline/full-export", test_full_export);
  g_test_add_func("/timeline/filters", test_filters);
  g_test_add_func("/timeline/run-spec", test_run_spec);
  g_test_add_func("/timeline/h5-policies", test_h5_policies);
  g_test_add_func("/timeline/escaping", test_escaping);
  g_test_add_func("/timeline/open-errors", test_open_errors);
  g_test_add_func("/timeline/write-failure", test_write_failure);
  for (gsize i = 0; i < G_N_ELEMENTS(gpus_cases); i++) {
    g_autofree char *name = g_strdup_printf("/timeline/parse-gpus/%zu", i);
    g_test_add_data_func(name, &gpus_cases[i], test_parse_gpus);
  }
  for (gsize i = 0; i < G_N_ELEMENTS(window_cases); i++) {
    g_autofree char *name = g_strdup_printf("/timeline/parse-window/%zu", i);
    g_test_add_data_func(name, &window_cases[i], test_parse_window);
  }
  return g_test_run();
}
