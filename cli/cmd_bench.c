/* cli/cmd_bench.c -- `joulesim bench`: the performance figures of DESIGN
 * section 10 (issue 8), as text or as JSON.
 *
 * Every case runs in a child process (this binary, `bench --case ...` or
 * `run SCRIPT`), so its wall time and peak memory are its own: the parent
 * forks, reads the child's stdout, and takes the peak RSS from wait4().  A
 * child prints its own figures as one line of `key=value` pairs (numbers,
 * or strings without spaces); the parent adds `wall_s` and `peak_rss_mb`
 * and prints the lot as a table line or as one JSON object per case.
 *
 * Cases (the full set; --quick runs the small sizes of each kind):
 *   replay      generate and replay one GPT-3 iteration; single GPU (ops/s
 *               on one core), 175B on 1,024 and 8,192 GPUs, unfolded and
 *               folded
 *   planner     kernel-level DVFS planner on 175B/1,024 (by name and by op,
 *               0 ms and the GPU's switching latency)
 *   perseus     Perseus frontier for 8 stages x 96 microbatches (needs the
 *               stage profile from tests/data/profiles; skipped elsewhere)
 *   native      native trace save and load of 175B/1,024
 *   import      Kineto JSON import throughput on a synthetic trace, and
 *               each --trace FILE against loading its native file
 *   sweep       sweep points per second with 1 and N forked jobs
 *   sweep-mpi   the same across 1, 2 and 4 MPI ranks (MPI build only)
 * A case whose target (DESIGN section 10) is known prints it and whether
 * it was met.  Timings live here and never in tests.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "run/session.h"
#include "models/cluster.h"
#include "models/dvfs/planner.h"
#include "models/gpu.h"
#include "models/net.h"
#include "traces/gpt.h"
#include "traces/import.h"
#include "traces/native.h"

#include <errno.h>
#include <math.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static const char usage_bench[] =
  "usage: joulesim bench [--quick] [--json] [--scaling] [--only ID]...\n"
  "                      [--trace FILE]...\n"
  "\n"
  "Measures the simulator: replayed ops per second on one core; wall time\n"
  "and peak memory of one GPT-3 175B iteration at kernel-level detail on\n"
  "1,024 GPUs (TP8 PP8 DP16) and 8,192 GPUs (DP128), unfolded and folded;\n"
  "the kernel-level DVFS planner; the Perseus frontier for 8 stages x 96\n"
  "microbatches; native trace save/load; Kineto import MB/s; and sweep\n"
  "points per second with 1 and N jobs (and MPI ranks in an MPI build).\n"
  "Every case runs in its own process; peak memory is that process's.\n"
  "  --quick      small sizes (seconds, not minutes)\n"
  "  --json       one JSON document on stdout instead of the table\n"
  "  --scaling    instead: wall time and memory against GPU count (8 to\n"
  "               8,192) and microbatches (8 to 256), unfolded and folded\n"
  "  --only ID    run only the cases whose id starts with ID (repeatable)\n"
  "  --trace F    also import profiler trace F and compare with loading\n"
  "               its native file (repeatable)\n";

/* ---- child side: one case, figures as key=value --------------------------- */

static double child_rss_mb(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

static double since_s(gint64 t0)
{
  return (double)(g_get_monotonic_time() - t0) * 1e-6;
}

static gboolean gpt_cfg(GptConfig *cfg, const char *model, guint tp, guint pp,
                        guint dp, guint mb, gboolean fold, GError **error)
{
  gpt_config_init(cfg);
  if (!gpt_config_set_model(cfg, model, error))
    return FALSE;
  cfg->tp = tp;
  cfg->pp = pp;
  cfg->dp = dp;
  cfg->microbatches = mb;
  cfg->fold = fold;
  return gpt_config_validate(cfg, error);
}

/* replay MODEL TP PP DP MB FOLD */
static gboolean case_replay(JsSession *s, char **a, GError **error)
{
  GptConfig cfg;
  guint tp = atoi(a[1]), pp = atoi(a[2]), dp = atoi(a[3]), n = tp * pp * dp;
  if (!gpt_cfg(&cfg, a[0], tp, pp, dp, atoi(a[4]), atoi(a[5]) != 0, error))
    return FALSE;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            error);
  if (gpu == NULL)
    return FALSE;
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(SimWorkload) w = gpt_generate(&cfg, gpu, error);
  if (w == NULL)
    return FALSE;
  double gen_s = since_s(t0);
  g_autoptr(NetSpec) net = net_preset("dgx-a100", error);
  g_autoptr(Cluster) c = net ? cluster_new(gpu, net, n, 8, error) : NULL;
  if (c == NULL)
    return FALSE;
  DvfsPolicy pol = {.kind = DVFS_MAX};
  JsRunOptions opt = {.iterations = 1, .seed = s->seed,
                      .switch_latency_ms = -1};
  t0 = g_get_monotonic_time();
  g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &opt, error);
  if (r == NULL)
    return FALSE;
  double sim_s = since_s(t0);
  double it_s = (double)r->time_ns * 1e-9;
  printf("gpus=%u ops=%" G_GUINT64_FORMAT " ops_replayed=%" G_GUINT64_FORMAT
         " gen_s=%.3f replay_s=%.3f mops_per_s=%.2f iteration_s=%.6f "
         "energy_j=%.6e tflops_per_gpu=%.2f\n", n, r->ops_represented,
         r->ops, gen_s, sim_s, (double)r->ops / MAX(sim_s, 1e-9) * 1e-6,
         it_s, r->energy_j, r->flops / it_s / n * 1e-12);
  return TRUE;
}

/* planner NAME|OP LATENCY(0|gpu) MODEL TP PP DP MB */
static gboolean case_planner(JsSession *s, char **a, GError **error)
{
  GptConfig cfg;
  guint tp = atoi(a[3]), pp = atoi(a[4]), dp = atoi(a[5]);
  if (!gpt_cfg(&cfg, a[2], tp, pp, dp, atoi(a[6]), FALSE, error))
    return FALSE;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            error);
  g_autoptr(SimWorkload) w = gpu ? gpt_generate(&cfg, gpu, error) : NULL;
  g_autoptr(NetSpec) net = w ? net_preset("dgx-a100", error) : NULL;
  g_autoptr(Cluster) c =
      net ? cluster_new(gpu, net, tp * pp * dp, 8, error) : NULL;
  if (c == NULL)
    return FALSE;
  DvfsPolicy p;
  dvfs_policy_init(&p, DVFS_KERNEL);
  p.slowdown = 0.01;
  p.granularity = strcmp(a[0], "op") == 0 ? DVFS_GRANULARITY_OP
                                          : DVFS_GRANULARITY_NAME;
  c->switch_latency_ms = strcmp(a[1], "0") == 0 ? 0 : -1;
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(DvfsPlanResult) r = dvfs_planner_run(&p, c, w, s->catalogue,
                                                 error);
  if (r == NULL)
    return FALSE;
  printf("plan_s=%.3f latency_ms=%.0f classes=%u evaluations=%u replays=%u "
         "saving_pct=%.3f slowdown_pct=%.3f\n", since_s(t0), r->latency_ms,
         r->n_classes, r->evaluations, r->simulations,
         100 * (1 - r->energy_j / r->base_energy_j),
         100 * (r->time_s / r->base_time_s - 1));
  return TRUE;
}

/* native MODEL TP PP DP MB: save once, load best of three. */
static gboolean case_native(JsSession *s, char **a, GError **error)
{
  GptConfig cfg;
  if (!gpt_cfg(&cfg, a[0], atoi(a[1]), atoi(a[2]), atoi(a[3]), atoi(a[4]),
               FALSE, error))
    return FALSE;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            error);
  g_autoptr(SimWorkload) w = gpu ? gpt_generate(&cfg, gpu, error) : NULL;
  if (w == NULL)
    return FALSE;
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *path = g_build_filename(dir, "trace.h5", NULL);
  gboolean ok = FALSE;
  gint64 t0 = g_get_monotonic_time();
  if (!trace_native_save(w, path, error))
    goto out;
  double save_s = since_s(t0), load_s = G_MAXDOUBLE;
  for (int k = 0; k < 3; k++) {
    t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) l = trace_native_load(path, error);
    if (l == NULL)
      goto out;
    load_s = MIN(load_s, since_s(t0));
  }
  GStatBuf st;
  double mb = g_stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
  guint64 ops = sim_workload_n_ops(w);
  printf("ops=%" G_GUINT64_FORMAT " file_mb=%.1f save_s=%.3f load_s=%.3f "
         "load_mops_per_s=%.1f load_gb_per_s=%.2f\n", ops, mb, save_s, load_s,
         (double)ops / MAX(load_s, 1e-9) * 1e-6,
         mb * 1e-3 / MAX(load_s, 1e-9));
  ok = TRUE;
out:
  g_unlink(path);
  g_rmdir(dir);
  return ok;
}

/* import-kineto MBYTES: a synthetic trace of realistic events
 * (traces/import.c), uncompressed JSON. */
static gboolean case_import_kineto(JsSession *s, char **a, GError **error)
{
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *json = g_build_filename(dir, "kineto.json", NULL);
  guint64 n_events = 0, bytes = (guint64)g_ascii_strtoull(a[0], NULL, 10);
  gboolean ok = trace_kineto_write_synthetic(json, bytes * 1000000,
                                             &n_events, error);
  GStatBuf js;
  double mb = ok && g_stat(json, &js) == 0 ? (double)js.st_size / 1e6 : 0;
  if (ok) {
    TraceImportOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.catalogue = s->catalogue;
    opt.iteration = TRACE_ITERATION_ALL;
    const char *jp = json;
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) x = trace_import(&jp, 1, &opt, error);
    double sec = since_s(t0);
    if (x == NULL)
      ok = FALSE;
    else
      printf("file_mb=%.1f gpu_events=%" G_GUINT64_FORMAT " import_s=%.3f "
             "mb_per_s=%.1f\n", mb, n_events, sec, mb / MAX(sec, 1e-9));
  }
  g_unlink(json);
  g_rmdir(dir);
  return ok;
}

/* import-file PATH: import (best of three) against native load. */
static gboolean case_import_file(JsSession *s, char **a, GError **error)
{
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.catalogue = s->catalogue;
  const char *src = a[0];
  double import_s = G_MAXDOUBLE, load_s = G_MAXDOUBLE;
  g_autoptr(SimWorkload) t = NULL;
  for (int k = 0; k < 3; k++) {
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) x = trace_import(&src, 1, &opt, error);
    if (x == NULL)
      return FALSE;
    import_s = MIN(import_s, since_s(t0));
    if (t == NULL)
      t = g_steal_pointer(&x);
  }
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *path = g_build_filename(dir, "trace.h5", NULL);
  gboolean ok = trace_native_save(t, path, error);
  for (int k = 0; ok && k < 3; k++) {
    gint64 t0 = g_get_monotonic_time();
    g_autoptr(SimWorkload) l = trace_native_load(path, error);
    ok = l != NULL;
    load_s = MIN(load_s, since_s(t0));
  }
  if (ok)
    printf("ops=%" G_GUINT64_FORMAT " import_s=%.4f load_s=%.4f "
           "speedup=%.1f\n", sim_workload_n_ops(t), import_s, load_s,
           import_s / MAX(load_s, 1e-9));
  g_unlink(path);
  g_rmdir(dir);
  return ok;
}

typedef struct {
  const char *name;
  guint argc;
  gboolean (*fn)(JsSession *s, char **argv, GError **error);
} ChildCase;

static const ChildCase child_cases[] = {
  {"replay", 6, case_replay},
  {"planner", 7, case_planner},
  {"native", 5, case_native},
  {"import-kineto", 1, case_import_kineto},
  {"import-file", 1, case_import_file},
};

static int run_child(int argc, char **argv)
{
  for (guint i = 0; i < G_N_ELEMENTS(child_cases); i++) {
    const ChildCase *cc = &child_cases[i];
    if (argc < 1 || strcmp(argv[0], cc->name) != 0)
      continue;
    if ((guint)argc - 1 != cc->argc) {
      fprintf(stderr, "joulesim bench --case %s: needs %u arguments\n",
              cc->name, cc->argc);
      return EXIT_USAGE;
    }
    g_autoptr(JsSession) s = cli_session_new(1);
    GError *err = NULL;
    if (!cc->fn(s, argv + 1, &err)) {
      fprintf(stderr, "joulesim: %s\n", err->message);
      g_error_free(err);
      return EXIT_USER;
    }
    printf("child_rss_mb=%.0f\n", child_rss_mb());
    return 0;
  }
  fprintf(stderr, "joulesim bench --case: unknown case '%s'\n",
          argc > 0 ? argv[0] : "");
  return EXIT_USAGE;
}

/* ---- Lua cases ------------------------------------------------------------ */

/* arg: OUT.h5 N_POINTS.  N points of one GPT-3 6.7B iteration on 64 A100s
 * (TP1 and TP2, 16 microbatches: about 0.1 s each). */
static const char sweep_lua[] =
  "local js = require 'joulesim'\n"
  "local seeds = {}\n"
  "for i = 1, tonumber(arg[2]) // 2 do seeds[i] = i end\n"
  "js.sweep{ grid = { seed = seeds, tp = { 1, 2 } },\n"
  "  out = arg[1], table = 'bench', mode = 'replace',\n"
  "  run = function(p)\n"
  "    local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 64 }\n"
  "    local w = js.gpt{ model = 'gpt3-6.7b', tp = p.tp, dp = 64 // p.tp,\n"
  "                      microbatches = 16 }\n"
  "    local r = js.simulate{ cluster = c, workload = w, seed = p.seed }\n"
  "    return { time_s = r.time_s, energy_j = r.energy_j }\n"
  "  end }\n"
  "print('points=' .. arg[2])\n";

/* arg: PROFILE.csv MICROBATCHES.  The Perseus frontier of an 8-stage
 * pipeline on the stage profile (the whole run: load, model, frontier,
 * plan and one simulated iteration). */
static const char perseus_lua[] =
  "local js = require 'joulesim'\n"
  "local m = tonumber(arg[2])\n"
  "local w = js.pipeline{ profile = arg[1], microbatches = m, stages = 8 }\n"
  "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 8,\n"
  "                      blocking_power_w = 83.64 }\n"
  "local r = js.simulate{ cluster = c, workload = w,\n"
  "                       policy = js.policy.perseus{ slowdown = 0 } }\n"
  "print(string.format('stages=8 microbatches=%d frontier_points=%d '\n"
  "  .. 'iteration_s=%.6f', m, #r.frontier, r.time_s))\n";

/* ---- parent side ------------------------------------------------------------ */

typedef struct {
  char *id;            /* e.g. "replay/175b-1024" */
  char *label;         /* human-readable */
  GPtrArray *argv;     /* child command line (this binary first) */
  char *script;        /* Lua source to write to a temp file, or NULL */
  const char *target;  /* DESIGN section 10 target, text, or NULL */
  double target_s;     /* wall-time target (0: none) */
  double target_mb;    /* memory target (0: none) */
  double target_mops;  /* replay-rate target (0: none) */
} BenchCase;

static void bench_case_free(BenchCase *c)
{
  g_free(c->id);
  g_free(c->label);
  g_ptr_array_unref(c->argv);
  g_free(c->script);
  g_free(c);
}

static BenchCase *add_case(GPtrArray *cases, const char *self, const char *id,
                           const char *label, ...)
{
  BenchCase *c = g_new0(BenchCase, 1);
  c->id = g_strdup(id);
  c->label = g_strdup(label);
  c->argv = g_ptr_array_new_with_free_func(g_free);
  g_ptr_array_add(c->argv, g_strdup(self));
  va_list ap;
  va_start(ap, label);
  for (const char *a; (a = va_arg(ap, const char *)) != NULL;)
    g_ptr_array_add(c->argv, g_strdup(a));
  va_end(ap);
  g_ptr_array_add(c->argv, NULL);
  g_ptr_array_add(cases, c);
  return c;
}

typedef struct {
  gboolean ok;
  double wall_s, rss_mb;
  GPtrArray *keys, *values; /* the child's key=value figures */
  char *error;              /* child's stderr when it failed */
} BenchOutcome;

static void outcome_clear(BenchOutcome *o)
{
  g_clear_pointer(&o->keys, g_ptr_array_unref);
  g_clear_pointer(&o->values, g_ptr_array_unref);
  g_clear_pointer(&o->error, g_free);
}

static const char *outcome_get(const BenchOutcome *o, const char *key)
{
  for (guint i = 0; o->keys != NULL && i < o->keys->len; i++)
    if (strcmp(g_ptr_array_index(o->keys, i), key) == 0)
      return g_ptr_array_index(o->values, i);
  return NULL;
}

static double outcome_num(const BenchOutcome *o, const char *key)
{
  const char *v = outcome_get(o, key);
  return v != NULL ? g_ascii_strtod(v, NULL) : 0.0;
}

static char *read_all(int fd)
{
  GString *s = g_string_new(NULL);
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    g_string_append_len(s, buf, n);
  }
  close(fd);
  return g_string_free(s, FALSE);
}

/* Runs one case in a child process; fills *o.  Returns FALSE only when the
 * child could not be started at all. */
static gboolean run_case(BenchCase *c, const char *tmpdir, BenchOutcome *o,
                         GError **error)
{
  memset(o, 0, sizeof *o);
  g_autofree char *script = NULL;
  if (c->script != NULL) {
    script = g_build_filename(tmpdir, "case.lua", NULL);
    if (!g_file_set_contents(script, c->script, -1, error))
      return FALSE;
    /* argv: self run --quiet [--jobs N] SCRIPT ARGS: SCRIPT replaces the
     * "@" placeholder. */
    for (guint i = 0; i + 1 < c->argv->len; i++)
      if (strcmp(g_ptr_array_index(c->argv, i), "@") == 0) {
        g_free(g_ptr_array_index(c->argv, i));
        g_ptr_array_index(c->argv, i) = g_strdup(script);
      }
  }
  GPid pid;
  int out_fd = -1, err_fd = -1;
  gint64 t0 = g_get_monotonic_time();
  if (!g_spawn_async_with_pipes(NULL, (char **)c->argv->pdata, NULL,
                                G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL, &pid,
                                NULL, &out_fd, &err_fd, error))
    return FALSE;
  /* stderr is small (errors, progress off with --quiet); read stdout
   * first, then stderr. */
  g_autofree char *out = read_all(out_fd);
  g_autofree char *err = read_all(err_fd);
  int status = 0;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0 && errno == EINTR)
    ;
  o->wall_s = since_s(t0);
  o->rss_mb = (double)ru.ru_maxrss / 1024.0;
  g_spawn_close_pid(pid);
  if (script != NULL)
    g_unlink(script);
  o->ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!o->ok) {
    g_strstrip(err);
    o->error = g_strdup(*err != '\0' ? err : "child failed");
    return TRUE;
  }
  o->keys = g_ptr_array_new_with_free_func(g_free);
  o->values = g_ptr_array_new_with_free_func(g_free);
  g_auto(GStrv) words = g_strsplit_set(out, " \n", -1);
  for (char **w = words; *w != NULL; w++) {
    char *eq = strchr(*w, '=');
    if (eq == NULL || eq == *w)
      continue;
    g_ptr_array_add(o->keys, g_strndup(*w, eq - *w));
    g_ptr_array_add(o->values, g_strdup(eq + 1));
  }
  /* Derived rates the child cannot see (its own start-up included). */
  const char *pts = outcome_get(o, "points");
  if (pts != NULL) {
    g_ptr_array_add(o->keys, g_strdup("points_per_s"));
    g_ptr_array_add(o->values, g_strdup_printf(
        "%.2f", g_ascii_strtod(pts, NULL) / MAX(o->wall_s, 1e-9)));
  }
  return TRUE;
}

/* A value prints bare in JSON when it is a finite number. */
static gboolean is_number(const char *v)
{
  char *end = NULL;
  double d = g_ascii_strtod(v, &end);
  return *v != '\0' && end != NULL && *end == '\0' && isfinite(d);
}

static void json_string(GString *s, const char *v)
{
  g_string_append_c(s, '"');
  for (const char *p = v; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\')
      g_string_append_printf(s, "\\%c", *p);
    else if ((unsigned char)*p < 0x20)
      g_string_append_printf(s, "\\u%04x", (unsigned char)*p);
    else
      g_string_append_c(s, *p);
  }
  g_string_append_c(s, '"');
}

/* Whether a case met its targets: -1 no target, 0 missed, 1 met. */
static int target_met(const BenchCase *c, const BenchOutcome *o)
{
  if (c->target == NULL || !o->ok)
    return -1;
  gboolean met = TRUE;
  if (c->target_s > 0)
    met &= o->wall_s < c->target_s;
  if (c->target_mb > 0)
    met &= o->rss_mb < c->target_mb;
  if (c->target_mops > 0)
    met &= outcome_num(o, "mops_per_s") >= c->target_mops;
  return met;
}

static void print_json(GString *s, const BenchCase *c, const BenchOutcome *o)
{
  g_string_append(s, "    {\"id\": ");
  json_string(s, c->id);
  g_string_append(s, ", \"label\": ");
  json_string(s, c->label);
  g_string_append_printf(s, ", \"ok\": %s", o->ok ? "true" : "false");
  if (!o->ok) {
    g_string_append(s, ", \"error\": ");
    json_string(s, o->error);
  } else {
    g_string_append_printf(s, ", \"wall_s\": %.3f, \"peak_rss_mb\": %.0f",
                           o->wall_s, o->rss_mb);
    for (guint i = 0; i < o->keys->len; i++) {
      const char *k = g_ptr_array_index(o->keys, i);
      const char *v = g_ptr_array_index(o->values, i);
      if (strcmp(k, "child_rss_mb") == 0)
        continue;
      g_string_append(s, ", ");
      json_string(s, k);
      g_string_append(s, ": ");
      if (is_number(v))
        g_string_append(s, v);
      else
        json_string(s, v);
    }
  }
  if (c->target != NULL) {
    g_string_append(s, ", \"target\": ");
    json_string(s, c->target);
    int met = target_met(c, o);
    if (met >= 0)
      g_string_append_printf(s, ", \"target_met\": %s",
                             met ? "true" : "false");
  }
  g_string_append(s, "}");
}

static void print_text(const BenchCase *c, const BenchOutcome *o)
{
  printf("%-44s", c->label);
  if (!o->ok) {
    printf(" FAILED: %s\n", o->error);
    return;
  }
  printf(" %8.2f s %7.0f MB ", o->wall_s, o->rss_mb);
  for (guint i = 0; i < o->keys->len; i++) {
    const char *k = g_ptr_array_index(o->keys, i);
    if (strcmp(k, "child_rss_mb") != 0)
      printf(" %s=%s", k, (const char *)g_ptr_array_index(o->values, i));
  }
  int met = target_met(c, o);
  if (met >= 0)
    printf("  [target %s: %s]", c->target, met ? "met" : "MISSED");
  printf("\n");
  fflush(stdout);
}

static void add_replay(GPtrArray *cases, const char *self, const char *id,
                       const char *label, const char *model, guint tp,
                       guint pp, guint dp, guint mb, gboolean fold)
{
  char a[5][16];
  g_snprintf(a[0], 16, "%u", tp);
  g_snprintf(a[1], 16, "%u", pp);
  g_snprintf(a[2], 16, "%u", dp);
  g_snprintf(a[3], 16, "%u", mb);
  g_snprintf(a[4], 16, "%d", fold ? 1 : 0);
  add_case(cases, self, id, label, "bench", "--case", "replay", model, a[0],
           a[1], a[2], a[3], a[4], NULL);
}

static const char *profile_175b =
    "tests/data/profiles/gpt3-175b+a100_sxm_bf16.csv";

/* --scaling: one GPT-3 175B iteration (64 microbatches) on 8 to 8,192
 * GPUs, TP8 and up to 8 pipeline stages, then on 1,024 GPUs with 8 to 256
 * microbatches; unfolded and folded.  docs/performance.md tabulates it. */
static void add_scaling(GPtrArray *cases, const char *self, gboolean quick)
{
  guint max_gpus = quick ? 512 : 8192;
  for (guint n = 8; n <= max_gpus; n *= 2) {
    guint pp = MIN(8, n / 8), dp = n / (8 * pp);
    for (int fold = 0; fold < 2; fold++) {
      g_autofree char *id = g_strdup_printf("scaling/gpus-%u%s", n,
                                            fold ? "-folded" : "");
      g_autofree char *label = g_strdup_printf(
          "scaling 175b %u GPUs (tp8 pp%u dp%u)%s", n, pp, dp,
          fold ? ", folded" : "");
      add_replay(cases, self, id, label, "gpt3-175b", 8, pp, dp, 64, fold);
    }
  }
  for (guint mb = 8; mb <= (quick ? 32u : 256u); mb *= 2)
    for (int fold = 0; fold < 2; fold++) {
      g_autofree char *id = g_strdup_printf("scaling/mb-%u%s", mb,
                                            fold ? "-folded" : "");
      g_autofree char *label = g_strdup_printf(
          "scaling 175b %u GPUs, %u microbatches%s", quick ? 64 : 1024, mb,
          fold ? ", folded" : "");
      add_replay(cases, self, id, label, "gpt3-175b", 8, 8, quick ? 1 : 16,
                 mb, fold);
    }
}

static GPtrArray *make_cases(const char *self, gboolean quick,
                             gboolean scaling, GPtrArray *traces)
{
  GPtrArray *cases = g_ptr_array_new_with_free_func(
      (GDestroyNotify)bench_case_free);
  BenchCase *c;
  if (scaling) {
    add_scaling(cases, self, quick);
    return cases;
  }
  if (quick) {
    add_replay(cases, self, "replay/1gpu", "replay gpt3-1.3b 1 GPU, 64 mb",
               "gpt3-1.3b", 1, 1, 1, 64, FALSE);
    add_replay(cases, self, "replay/6.7b-8", "replay gpt3-6.7b tp2 pp2 dp2",
               "gpt3-6.7b", 2, 2, 2, 16, FALSE);
    add_replay(cases, self, "replay/6.7b-8-folded",
               "replay gpt3-6.7b tp2 pp2 dp2, folded", "gpt3-6.7b", 2, 2, 2,
               16, TRUE);
    add_case(cases, self, "planner/name-0", "kernel planner by name, 6.7b/8",
             "bench", "--case", "planner", "name", "0", "gpt3-6.7b", "2", "2",
             "2", "16", NULL);
    add_case(cases, self, "native/6.7b-8", "native trace gpt3-6.7b/8",
             "bench", "--case", "native", "gpt3-6.7b", "2", "2", "2", "16",
             NULL);
    add_case(cases, self, "import/kineto", "Kineto JSON import (20 MB)",
             "bench", "--case", "import-kineto", "20", NULL);
  } else {
    c = NULL;
    add_replay(cases, self, "replay/1gpu", "replay gpt3-1.3b 1 GPU, 256 mb",
               "gpt3-1.3b", 1, 1, 1, 256, FALSE);
    c = g_ptr_array_index(cases, cases->len - 1);
    c->target = ">= 20 Mops/s";
    c->target_mops = 20;
    add_replay(cases, self, "replay/175b-1024",
               "replay gpt3-175b 1,024 GPUs (tp8 pp8 dp16)", "gpt3-175b", 8,
               8, 16, 64, FALSE);
    c = g_ptr_array_index(cases, cases->len - 1);
    c->target = "< 2 s, < 4 GB";
    c->target_s = 2;
    c->target_mb = 4096;
    add_replay(cases, self, "replay/175b-1024-folded",
               "replay gpt3-175b 1,024 GPUs, folded", "gpt3-175b", 8, 8, 16,
               64, TRUE);
    add_replay(cases, self, "replay/175b-8192",
               "replay gpt3-175b 8,192 GPUs (dp128)", "gpt3-175b", 8, 8, 128,
               64, FALSE);
    c = g_ptr_array_index(cases, cases->len - 1);
    c->target = "< 15 s";
    c->target_s = 15;
    add_replay(cases, self, "replay/175b-8192-folded",
               "replay gpt3-175b 8,192 GPUs, folded", "gpt3-175b", 8, 8, 128,
               64, TRUE);
    c = g_ptr_array_index(cases, cases->len - 1);
    c->target = "< 1 s";
    c->target_s = 1;
    static const char *const plans[4][3] = {
      {"planner/name-0", "kernel planner by name, 0 ms", "name"},
      {"planner/op-0", "kernel planner by op, 0 ms", "op"},
      {"planner/name-gpu", "kernel planner by name, GPU latency", "name"},
      {"planner/op-gpu", "kernel planner by op, GPU latency", "op"},
    };
    for (guint k = 0; k < 4; k++)
      add_case(cases, self, plans[k][0], plans[k][1], "bench", "--case",
               "planner", plans[k][2], k < 2 ? "0" : "gpu", "gpt3-175b", "8",
               "8", "16", "64", NULL);
    if (g_file_test(profile_175b, G_FILE_TEST_IS_REGULAR)) {
      c = add_case(cases, self, "perseus/8x96",
                   "Perseus frontier, 8 stages x 96 mb", "run", "--quiet",
                   "@", profile_175b, "96", NULL);
      c->script = g_strdup(perseus_lua);
    }
    add_case(cases, self, "native/175b-1024", "native trace gpt3-175b/1,024",
             "bench", "--case", "native", "gpt3-175b", "8", "8", "16", "64",
             NULL);
    add_case(cases, self, "import/kineto", "Kineto JSON import (200 MB)",
             "bench", "--case", "import-kineto", "200", NULL);
  }
  for (guint i = 0; i < traces->len; i++) {
    const char *t = g_ptr_array_index(traces, i);
    g_autofree char *id = g_strdup_printf("import/file-%u", i + 1);
    g_autofree char *label = g_strdup_printf("import vs native load: %s", t);
    add_case(cases, self, id, label, "bench", "--case", "import-file", t,
             NULL);
  }
  /* Sweeps: 1 job and one per core, forked workers. */
  guint ncpu = MAX(g_get_num_processors(), 2);
  const char *pts = quick ? "8" : "40";
  for (guint k = 0; k < 2; k++) {
    char jobs[16];
    g_snprintf(jobs, sizeof jobs, "%u", k == 0 ? 1 : ncpu);
    g_autofree char *id = g_strdup_printf("sweep/jobs-%s", jobs);
    g_autofree char *label = g_strdup_printf("sweep, %s points, %s job%s",
                                             pts, jobs, k ? "s" : "");
    c = add_case(cases, self, id, label, "run", "--quiet", "--jobs", jobs,
                 "@", "@OUT", pts, NULL);
    c->script = g_strdup(sweep_lua);
  }
#ifdef JOULESIM_MPI
  g_autofree char *mpirun = g_find_program_in_path("mpirun");
  for (guint r = 1; mpirun != NULL && r <= 4; r *= 2) {
    char nr[8];
    g_snprintf(nr, sizeof nr, "%u", r);
    g_autofree char *id = g_strdup_printf("sweep-mpi/ranks-%u", r);
    g_autofree char *label = g_strdup_printf("sweep, %s points, %u MPI rank%s",
                                             pts, r, r > 1 ? "s" : "");
    if (geteuid() == 0)
      c = add_case(cases, mpirun, id, label, "--oversubscribe",
                   "--allow-run-as-root", "-n", nr, self, "run", "--quiet",
                   "--jobs", "1", "@", "@OUT", pts, NULL);
    else
      c = add_case(cases, mpirun, id, label, "--oversubscribe", "-n", nr,
                   self, "run", "--quiet", "--jobs", "1", "@", "@OUT", pts,
                   NULL);
    c->script = g_strdup(sweep_lua);
  }
#endif
  return cases;
}

static gboolean id_selected(const char *id, GPtrArray *only)
{
  if (only->len == 0)
    return TRUE;
  for (guint i = 0; i < only->len; i++)
    if (g_str_has_prefix(id, g_ptr_array_index(only, i)))
      return TRUE;
  return FALSE;
}

enum { OPT_HELP, OPT_CASE, OPT_QUICK, OPT_JSON, OPT_SCALING, OPT_TRACE,
       OPT_ONLY };

static const CliOption bench_options[] = {
  {"--help", OPT_HELP, FALSE},
  {"-h", OPT_HELP, FALSE},
  {"--case", OPT_CASE, FALSE},
  {"--quick", OPT_QUICK, FALSE},
  {"--json", OPT_JSON, FALSE},
  {"--scaling", OPT_SCALING, FALSE},
  {"--trace", OPT_TRACE, TRUE},
  {"--only", OPT_ONLY, TRUE},
  {NULL, 0, FALSE}};

int cmd_bench(const char *self, int argc, char **argv)
{
  gboolean quick = FALSE, json = FALSE, scaling = FALSE;
  g_autoptr(GPtrArray) traces = g_ptr_array_new();
  g_autoptr(GPtrArray) only = g_ptr_array_new();
  CliArgs a;
  cli_args_init(&a, argc, argv, bench_options, 0);
  for (int id; (id = cli_next(&a)) != CLI_DONE;) {
    if (id == OPT_HELP) {
      fputs(usage_bench, stdout);
      return 0;
    } else if (id == OPT_CASE) {
      /* A child: the rest is its case and arguments. */
      return run_child(CLI_REST_ARGC(&a), CLI_REST_ARGV(&a));
    } else if (id == OPT_QUICK) {
      quick = TRUE;
    } else if (id == OPT_JSON) {
      json = TRUE;
    } else if (id == OPT_SCALING) {
      scaling = TRUE;
    } else if (id == OPT_TRACE && a.value != NULL) {
      g_ptr_array_add(traces, (gpointer)a.value);
    } else if (id == OPT_ONLY && a.value != NULL) {
      g_ptr_array_add(only, (gpointer)a.value);
    } else {
      /* An unknown option, an argument, or --trace/--only without a
       * value. */
      fprintf(stderr, "joulesim bench: unknown option '%s'\n%s", a.arg,
              usage_bench);
      return EXIT_USAGE;
    }
  }
  /* The child cases need this very binary: /proc/self/exe, not argv[0],
   * which may be a bare name found on the PATH. */
  g_autofree char *exe = g_file_read_link("/proc/self/exe", NULL);
  g_autoptr(GPtrArray) cases = make_cases(exe != NULL ? exe : self, quick,
                                          scaling, traces);
  GError *err = NULL;
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", &err);
  if (dir == NULL) {
    fprintf(stderr, "joulesim: %s\n", err->message);
    g_error_free(err);
    return EXIT_USER;
  }
  g_autofree char *out_h5 = g_build_filename(dir, "sweep.h5", NULL);
  GString *js = g_string_new(NULL);
  g_string_append_printf(js, "{\n  \"joulesim\": \"%s\",\n  \"git\": \"%s\",\n"
                         "  \"cores\": %u,\n  \"quick\": %s,\n  \"cases\": [\n",
                         JOULESIM_VERSION, JOULESIM_GIT_REV,
                         g_get_num_processors(), quick ? "true" : "false");
  if (!json)
    printf("joulesim %s bench (%u cores; each case in its own process; wall "
           "time and peak RSS of that process)\n", JOULESIM_VERSION,
           g_get_num_processors());
  guint failed = 0, n_json = 0;
  for (guint i = 0; i < cases->len; i++) {
    BenchCase *c = g_ptr_array_index(cases, i);
    if (!id_selected(c->id, only))
      continue;
    for (guint k = 0; k + 1 < c->argv->len; k++)
      if (strcmp(g_ptr_array_index(c->argv, k), "@OUT") == 0) {
        g_free(g_ptr_array_index(c->argv, k));
        g_ptr_array_index(c->argv, k) = g_strdup(out_h5);
      }
    BenchOutcome o;
    if (!run_case(c, dir, &o, &err)) {
      fprintf(stderr, "joulesim: bench %s: %s\n", c->id, err->message);
      g_clear_error(&err);
      failed++;
      continue;
    }
    if (!o.ok)
      failed++;
    if (json) {
      if (n_json++ > 0)
        g_string_append(js, ",\n");
      print_json(js, c, &o);
    } else {
      print_text(c, &o);
    }
    g_unlink(out_h5);
    outcome_clear(&o);
  }
  g_string_append(js, "\n  ]\n}\n");
  if (json)
    fputs(js->str, stdout);
  g_string_free(js, TRUE);
  g_rmdir(dir);
  if (failed > 0) {
    fprintf(stderr, "joulesim: %u bench case%s failed\n", failed,
            failed == 1 ? "" : "s");
    return EXIT_USER;
  }
  return 0;
}
