/* sim/main.c -- the joulesim command line (DESIGN section 8).
 *
 * The only file that may include every layer.  Exit status: 0 success, 1 a
 * user error (the message names the file, line or field), 2 a usage error.
 * Only this file prints errors.
 */
#include "lua/bind.h"
#include "lua/commands.h"
#include "lua/session.h"
#include "lua/sweep.h"
#include "models/cluster.h"
#include "models/gpu.h"
#include "models/net.h"
#include "sim/engine.h"
#include "traces/gpt.h"
#include "traces/import.h"
#include "traces/native.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define EXIT_USER 1
#define EXIT_USAGE 2

static const char usage_main[] =
  "usage: joulesim COMMAND [ARGS...]\n"
  "\n"
  "commands:\n"
  "  run SCENARIO.lua [--seed N] [--jobs N] [--sandbox] [--quiet] [ARGS...]\n"
  "                      run a Lua scenario script\n"
  "  gpus [NAME]         list the GPU catalogue, or describe one GPU model\n"
  "  bench [--quick]     engine throughput and scale figures\n"
  "  trace gen|import|info|export ...\n"
  "                      generate, import, inspect and export traces\n"
  "  validate PROFILE.csv --gpu NAME [...]\n"
  "                      compare a measured profile with the model\n"
  "\n"
  "options:\n"
  "  --version           print the version and git revision\n"
  "  --help              this text (also: joulesim COMMAND --help)\n";

static const char usage_run[] =
  "usage: joulesim run SCENARIO.lua [--seed N] [--jobs N] [--sandbox] "
  "[--quiet] [ARGS...]\n"
  "\n"
  "Runs a Lua scenario.  Options before the script path are joulesim's;\n"
  "everything after it is passed to the script as the table `arg`.\n"
  "  --seed N     seed for js.simulate and math.random (default 1)\n"
  "  --jobs N     worker processes of js.sweep (default: the number of "
  "cores)\n"
  "  --sandbox    no os/io access; only the joulesim API writes files\n"
  "  --quiet      no progress output\n";

static const char usage_gpus[] =
  "usage: joulesim gpus [NAME]\n"
  "\n"
  "Without NAME, lists the catalogue.  With NAME, prints every parameter of\n"
  "that GPU model with its value, unit and source.\n";

static const char usage_bench[] =
  "usage: joulesim bench [--quick] [--trace FILE]...\n"
  "\n"
  "Prints replayed ops per second on one core, and wall time and peak\n"
  "memory for one GPT-3 175B iteration on 1,024 GPUs (TP8 PP8 DP16, 64\n"
  "microbatches) at kernel-level detail; then the save and load time of\n"
  "that workload as a native trace file.  --quick runs smaller sizes.\n"
  "--trace FILE (repeatable): also import each profiler trace and compare\n"
  "with loading it from a native file.  Then the Kineto JSON import\n"
  "throughput on a synthetic trace, and (MPI build) sweep points per\n"
  "second with 1, 2 and 4 ranks under mpirun.\n";

static int fail(GError *err)
{
  fprintf(stderr, "joulesim: %s\n", err->message);
  g_error_free(err);
  return EXIT_USER;
}

static gboolean parse_u64(const char *s, guint64 *out)
{
  char *end = NULL;
  errno = 0;
  if (s == NULL || *s == '\0' || *s == '-')
    return FALSE;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

static int cmd_run(int argc, char **argv)
{
  guint64 seed = 1, jobs = 0;
  gboolean sandbox = FALSE, quiet = FALSE;
  int i = 0;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage_run, stdout);
      return 0;
    } else if (strcmp(a, "--seed") == 0) {
      if (i + 1 >= argc || !parse_u64(argv[i + 1], &seed)) {
        fprintf(stderr, "joulesim run: --seed needs a non-negative integer\n");
        return EXIT_USAGE;
      }
      i++;
    } else if (strcmp(a, "--jobs") == 0) {
      if (i + 1 >= argc || !parse_u64(argv[i + 1], &jobs) || jobs < 1 ||
          jobs > 4096) {
        fprintf(stderr, "joulesim run: --jobs needs an integer in 1..4096\n");
        return EXIT_USAGE;
      }
      i++;
    } else if (strcmp(a, "--sandbox") == 0) {
      sandbox = TRUE;
    } else if (strcmp(a, "--quiet") == 0) {
      quiet = TRUE;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "joulesim run: unknown option '%s'\n%s", a, usage_run);
      return EXIT_USAGE;
    } else {
      break;
    }
  }
  if (i >= argc) {
    fprintf(stderr, "joulesim run: missing SCENARIO.lua\n%s", usage_run);
    return EXIT_USAGE;
  }
  const char *path = argv[i];
  g_autoptr(JsSession) s = js_session_new(seed);
  s->quiet = quiet;
  s->jobs = (guint)jobs; /* 0: js.sweep uses the number of cores */
  GError *err = NULL;
  gboolean ok = js_run_script(s, path, argc - i - 1, argv + i + 1, sandbox,
                              &err);
  guint failed = js_sweep_take_failed(s);
  if (!ok)
    return fail(err);
  if (failed > 0) {
    fprintf(stderr, "joulesim: %u sweep point%s failed (%s error recorded "
            "in the 'error' column of the results)\n", failed,
            failed == 1 ? "" : "s", failed == 1 ? "its" : "their");
    return EXIT_USER;
  }
  return 0;
}

static int cmd_gpus(int argc, char **argv)
{
  if (argc > 0 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
    fputs(usage_gpus, stdout);
    return 0;
  }
  if (argc > 1) {
    fputs(usage_gpus, stderr);
    return EXIT_USAGE;
  }
  g_autoptr(GpuCatalogue) cat = gpu_catalogue_new();
  GError *err = NULL;
  if (argc == 1) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, argv[0], &err);
    if (g == NULL)
      return fail(err);
    GString *out = g_string_new(NULL);
    gpu_spec_describe(g, out);
    fputs(out->str, stdout);
    g_string_free(out, TRUE);
    return 0;
  }
  g_autoptr(GPtrArray) names = gpu_catalogue_names(cat);
  printf("%-18s %6s %12s %10s %9s %8s\n", "name", "SMs", "SM MHz",
         "mem MHz", "limit W", "TFLOP/s");
  for (guint k = 0; k < names->len; k++) {
    const GpuSpec *g = gpu_catalogue_lookup(cat, g_ptr_array_index(names, k),
                                            NULL);
    char clocks[32];
    g_snprintf(clocks, sizeof clocks, "%.0f-%.0f", g->sm_min_mhz.v,
               g->sm_max_mhz.v);
    printf("%-18s %6.0f %12s %10.0f %9.0f %8.0f\n", g->name, g->n_sm.v,
           clocks, g->mem_mhz[g->n_mem_clocks - 1].v, g->power_limit_w.v,
           gpu_peak_tensor_flops(g, g->sm_max_mhz.v) * 1e-12);
  }
  return 0;
}

/* ---- bench ------------------------------------------------------------------ */

static double peak_rss_mb(void)
{
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_maxrss / 1024.0;
}

typedef struct {
  const char *label;
  const char *model;
  guint tp, pp, dp, microbatches;
  const char *gpu, *net;
} BenchCase;

/* Generates and simulates one case; prints its figures. */
static gboolean bench_case(JsSession *s, const BenchCase *bc, GError **error)
{
  GptConfig cfg;
  gpt_config_init(&cfg);
  if (!gpt_config_set_model(&cfg, bc->model, error))
    return FALSE;
  cfg.tp = bc->tp;
  cfg.pp = bc->pp;
  cfg.dp = bc->dp;
  cfg.microbatches = bc->microbatches;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, bc->gpu, error);
  if (gpu == NULL)
    return FALSE;
  gint64 t0 = g_get_monotonic_time();
  g_autoptr(SimWorkload) w = gpt_generate(&cfg, gpu, error);
  if (w == NULL)
    return FALSE;
  gint64 t1 = g_get_monotonic_time();
  g_autoptr(NetSpec) net = net_preset(bc->net, error);
  if (net == NULL)
    return FALSE;
  guint n = bc->tp * bc->pp * bc->dp;
  g_autoptr(Cluster) c = cluster_new(gpu, net, n, 8, error);
  if (c == NULL)
    return FALSE;
  DvfsPolicy pol = {.kind = DVFS_MAX};
  JsRunOptions opt = {.iterations = 1, .seed = s->seed, .switch_latency_ms = -1};
  g_autoptr(SimResult) r = js_simulate(s, c, w, &pol, &opt, error);
  if (r == NULL)
    return FALSE;
  gint64 t2 = g_get_monotonic_time();
  double gen_s = (double)(t1 - t0) * 1e-6, sim_s = (double)(t2 - t1) * 1e-6;
  printf("%-34s %6u GPUs %11" G_GUINT64_FORMAT " ops  gen %6.2f s  "
         "replay %6.2f s  %6.2f Mops/s  peak RSS %7.0f MB  "
         "(iteration %.3f s, %.1f TFLOP/s/GPU)\n",
         bc->label, n, r->ops, gen_s, sim_s, (double)r->ops / sim_s * 1e-6,
         peak_rss_mb(), (double)r->time_ns * 1e-9,
         r->flops / ((double)r->time_ns * 1e-9) / n * 1e-12);
  fflush(stdout);
  return TRUE;
}

/* Native trace files: save and load of a generated workload, and for each
 * profiler trace given, import time against loading its native file (best
 * of three each, caches warm). */
static gboolean bench_trace_files(JsSession *s, gboolean quick,
                                  GPtrArray *traces, GError **error)
{
  GptConfig cfg;
  gpt_config_init(&cfg);
  if (!gpt_config_set_model(&cfg, quick ? "gpt3-6.7b" : "gpt3-175b", error))
    return FALSE;
  cfg.tp = quick ? 2 : 8;
  cfg.pp = quick ? 2 : 8;
  cfg.dp = quick ? 2 : 16;
  cfg.microbatches = quick ? 16 : 64;
  const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, "A100-SXM4-80GB",
                                            error);
  if (gpu == NULL)
    return FALSE;
  g_autoptr(SimWorkload) w = gpt_generate(&cfg, gpu, error);
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
  gint64 t1 = g_get_monotonic_time(), load_us = G_MAXINT64;
  for (int k = 0; k < 3; k++) {
    gint64 a = g_get_monotonic_time();
    g_autoptr(SimWorkload) l = trace_native_load(path, error);
    if (l == NULL)
      goto out;
    load_us = MIN(load_us, g_get_monotonic_time() - a);
  }
  GStatBuf st;
  double mb = g_stat(path, &st) == 0 ? (double)st.st_size / 1e6 : 0.0;
  printf("native trace, %-20s %11" G_GUINT64_FORMAT " ops  %7.1f MB  "
         "save %6.2f s  load %6.3f s  %6.1f Mops/s  %5.2f GB/s\n",
         quick ? "gpt3-6.7b tp2 pp2 dp2" : "gpt3-175b tp8 pp8 dp16",
         sim_workload_n_ops(w), mb, (double)(t1 - t0) * 1e-6,
         (double)load_us * 1e-6,
         (double)sim_workload_n_ops(w) / (double)MAX(load_us, 1),
         mb * 1e-3 / ((double)MAX(load_us, 1) * 1e-6));
  fflush(stdout);
  for (guint i = 0; i < traces->len; i++) {
    const char *src = g_ptr_array_index(traces, i);
    TraceImportOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.catalogue = s->catalogue;
    gint64 import_us = G_MAXINT64;
    g_autoptr(SimWorkload) t = NULL;
    for (int k = 0; k < 3; k++) {
      gint64 a = g_get_monotonic_time();
      g_autoptr(SimWorkload) x = trace_import(&src, 1, &opt, error);
      if (x == NULL)
        goto out;
      import_us = MIN(import_us, g_get_monotonic_time() - a);
      if (t == NULL)
        t = g_steal_pointer(&x);
    }
    if (!trace_native_save(t, path, error))
      goto out;
    load_us = G_MAXINT64;
    for (int k = 0; k < 3; k++) {
      gint64 a = g_get_monotonic_time();
      g_autoptr(SimWorkload) l = trace_native_load(path, error);
      if (l == NULL)
        goto out;
      load_us = MIN(load_us, g_get_monotonic_time() - a);
    }
    printf("trace import vs native load, %s: %" G_GUINT64_FORMAT " ops, "
           "import %.2f ms, load %.2f ms (%.0fx)\n", src,
           sim_workload_n_ops(t), (double)import_us * 1e-3,
           (double)load_us * 1e-3, (double)import_us / (double)MAX(load_us, 1));
  }
  /* Kineto import throughput on a synthetic trace of realistic events
   * (traces/import.c), uncompressed JSON. */
  {
    g_autofree char *json = g_build_filename(dir, "kineto.json", NULL);
    guint64 n_events = 0, bytes = quick ? 20000000 : 200000000;
    if (!trace_kineto_write_synthetic(json, bytes, &n_events, error)) {
      g_unlink(json);
      goto out;
    }
    GStatBuf js;
    double json_mb = g_stat(json, &js) == 0 ? (double)js.st_size / 1e6 : 0;
    TraceImportOptions opt;
    memset(&opt, 0, sizeof opt);
    opt.catalogue = s->catalogue;
    opt.iteration = TRACE_ITERATION_ALL;
    const char *jp = json;
    gint64 a = g_get_monotonic_time();
    g_autoptr(SimWorkload) x = trace_import(&jp, 1, &opt, error);
    double sec = (double)(g_get_monotonic_time() - a) * 1e-6;
    g_unlink(json);
    if (x == NULL)
      goto out;
    printf("trace import (Kineto JSON)         %7.0f MB/s  (%.0f MB, "
           "%" G_GUINT64_FORMAT " GPU events, peak RSS %.0f MB)\n",
           json_mb / sec, json_mb, n_events, peak_rss_mb());
    fflush(stdout);
  }
  ok = TRUE;
out:
  g_unlink(path);
  g_rmdir(dir);
  return ok;
}

/* Sweep throughput across MPI ranks (issue 9): the same 2n-point sweep of
 * one GPT-3 1.3B iteration on 64 A100s, run by this binary under
 * `mpirun -n K` for K = 1, 2, 4 with one worker per rank.  Only in an MPI
 * build with mpirun on the PATH. */
#ifdef JOULESIM_MPI
static const char bench_sweep_lua[] =
  "local js = require 'joulesim'\n"
  "local seeds = {}\n"
  "for i = 1, tonumber(arg[2]) do seeds[i] = i end\n"
  "js.sweep{ grid = { seed = seeds, tp = { 1, 2 } }, jobs = 1,\n"
  "  out = arg[1], table = 'bench', mode = 'replace',\n"
  "  run = function(p)\n"
  "    local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 64 }\n"
  "    local w = js.gpt{ model = 'gpt3-1.3b', tp = p.tp, dp = 64 // p.tp,\n"
  "                      microbatches = 8 }\n"
  "    local r = js.simulate{ cluster = c, workload = w, seed = p.seed }\n"
  "    return { time_s = r.time_s, energy_j = r.energy_j }\n"
  "  end }\n";
#endif

static gboolean bench_mpi(const char *self, gboolean quick, GError **error)
{
#ifndef JOULESIM_MPI
  (void)self;
  (void)quick;
  (void)error;
  printf("sweep-mpi: skipped (serial build; `make MPI=1` builds "
         "./joulesim-mpi)\n");
  return TRUE;
#else
  g_autofree char *mpirun = g_find_program_in_path("mpirun");
  if (mpirun == NULL) {
    printf("sweep-mpi: skipped (no mpirun on the PATH)\n");
    return TRUE;
  }
  g_autofree char *dir = g_dir_make_tmp("joulesim-bench-XXXXXX", error);
  if (dir == NULL)
    return FALSE;
  g_autofree char *script = g_build_filename(dir, "sweep.lua", NULL);
  g_autofree char *out = g_build_filename(dir, "sweep.h5", NULL);
  gboolean ok = g_file_set_contents(script, bench_sweep_lua, -1, error);
  guint n = quick ? 20 : 100;
  char npts[16];
  g_snprintf(npts, sizeof npts, "%u", n);
  double rate[3] = {0, 0, 0};
  static const guint ranks[3] = {1, 2, 4};
  for (guint k = 0; ok && k < 3; k++) {
    char nr[8];
    g_snprintf(nr, sizeof nr, "%u", ranks[k]);
    const char *argv[16];
    guint a = 0;
    argv[a++] = mpirun;
    argv[a++] = "--oversubscribe";
    if (geteuid() == 0)
      argv[a++] = "--allow-run-as-root";
    argv[a++] = "-n";
    argv[a++] = nr;
    argv[a++] = self;
    argv[a++] = "run";
    argv[a++] = "--quiet";
    argv[a++] = script;
    argv[a++] = out;
    argv[a++] = npts;
    argv[a] = NULL;
    gint status = 0;
    g_autofree char *serr = NULL;
    gint64 t0 = g_get_monotonic_time();
    ok = g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_STDOUT_TO_DEV_NULL,
                      NULL, NULL, NULL, &serr, &status, error) &&
         g_spawn_check_wait_status(status, error);
    rate[k] = 2.0 * n / ((double)(g_get_monotonic_time() - t0) * 1e-6);
    if (!ok)
      g_prefix_error(error, "mpirun -n %u: %s", ranks[k],
                     serr != NULL ? serr : "");
  }
  if (ok)
    printf("sweep-mpi: %u points (GPT-3 1.3B, 64 A100, 8 microbatches), "
           "1 job/rank: 1 / 2 / 4 ranks: %.1f / %.1f / %.1f points/s "
           "(%u cores; mpirun start-up included)\n",
           2 * n, rate[0], rate[1], rate[2], g_get_num_processors());
  g_unlink(script);
  g_unlink(out);
  g_rmdir(dir);
  return ok;
#endif
}

static int cmd_bench(const char *self, int argc, char **argv)
{
  gboolean quick = FALSE;
  g_autoptr(GPtrArray) traces = g_ptr_array_new();
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(usage_bench, stdout);
      return 0;
    } else if (strcmp(argv[i], "--quick") == 0) {
      quick = TRUE;
    } else if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc) {
      g_ptr_array_add(traces, argv[++i]);
    } else {
      fprintf(stderr, "joulesim bench: unknown option '%s'\n%s", argv[i],
              usage_bench);
      return EXIT_USAGE;
    }
  }
  g_autoptr(JsSession) s = js_session_new(1);
  static const BenchCase quick_cases[] = {
    {"gpt3-1.3b single GPU, 64 mb", "gpt3-1.3b", 1, 1, 1, 64,
     "A100-SXM4-80GB", "dgx-a100"},
    {"gpt3-6.7b tp2 pp2 dp2, 16 mb", "gpt3-6.7b", 2, 2, 2, 16,
     "A100-SXM4-80GB", "dgx-a100"},
  };
  static const BenchCase full_cases[] = {
    {"gpt3-1.3b single GPU, 256 mb", "gpt3-1.3b", 1, 1, 1, 256,
     "A100-SXM4-80GB", "dgx-a100"},
    {"gpt3-175b tp8 pp8 dp16, 64 mb", "gpt3-175b", 8, 8, 16, 64,
     "A100-SXM4-80GB", "dgx-a100"},
  };
  const BenchCase *cases = quick ? quick_cases : full_cases;
  guint n = quick ? G_N_ELEMENTS(quick_cases) : G_N_ELEMENTS(full_cases);
  printf("joulesim %s bench (one core; wall clock)\n", JOULESIM_VERSION);
  for (guint i = 0; i < n; i++) {
    GError *err = NULL;
    if (!bench_case(s, &cases[i], &err))
      return fail(err);
  }
  /* Kernel-level DVFS planner (models/dvfs/planner.c) on the last case:
   * wall time of dvfs_planner_run, its baseline and check replays
   * included, at 1% slowdown, by kernel name and by op, switching latency
   * 0 and the GPU's. */
  {
    const BenchCase *bc = &cases[n - 1];
    GError *err = NULL;
    GptConfig cfg;
    gpt_config_init(&cfg);
    if (!gpt_config_set_model(&cfg, bc->model, &err))
      return fail(err);
    cfg.tp = bc->tp;
    cfg.pp = bc->pp;
    cfg.dp = bc->dp;
    cfg.microbatches = bc->microbatches;
    const GpuSpec *gpu = gpu_catalogue_lookup(s->catalogue, bc->gpu, &err);
    g_autoptr(SimWorkload) w = gpu ? gpt_generate(&cfg, gpu, &err) : NULL;
    g_autoptr(NetSpec) net = w ? net_preset(bc->net, &err) : NULL;
    g_autoptr(Cluster) c =
        net ? cluster_new(gpu, net, bc->tp * bc->pp * bc->dp, 8, &err) : NULL;
    if (c == NULL)
      return fail(err);
    for (int v = 0; v < 4; v++) {
      DvfsPolicy p;
      dvfs_policy_init(&p, DVFS_KERNEL);
      p.slowdown = 0.01;
      p.granularity = v % 2 ? DVFS_GRANULARITY_OP : DVFS_GRANULARITY_NAME;
      c->switch_latency_ms = v < 2 ? 0 : -1;
      gint64 t0 = g_get_monotonic_time();
      g_autoptr(DvfsPlanResult) r = dvfs_planner_run(&p, c, w, s->catalogue,
                                                     &err);
      if (r == NULL)
        return fail(err);
      double wall = (double)(g_get_monotonic_time() - t0) * 1e-6;
      printf("%-34s kernel(%s) plan, 1%% slowdown, switching %4.0f ms: "
             "%6.2f s (%u classes, %u evaluations, %u replays; saving "
             "%.2f%%, slowdown %.3f%%)  peak RSS %7.0f MB\n",
             bc->label, dvfs_granularity_name(p.granularity), r->latency_ms,
             wall, r->n_classes, r->evaluations, r->simulations,
             100 * (1 - r->energy_j / r->base_energy_j),
             100 * (r->time_s / r->base_time_s - 1), peak_rss_mb());
      fflush(stdout);
    }
  }
  GError *err = NULL;
  if (!bench_trace_files(s, quick, traces, &err))
    return fail(err);
  if (!bench_mpi(self, quick, &err))
    return fail(err);
  return 0;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fputs(usage_main, stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    printf("joulesim %s (git %s)\n", JOULESIM_VERSION, JOULESIM_GIT_REV);
    return 0;
  }
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 ||
      strcmp(cmd, "help") == 0) {
    fputs(usage_main, stdout);
    return 0;
  }
  if (strcmp(cmd, "run") == 0)
    return cmd_run(argc - 2, argv + 2);
  if (strcmp(cmd, "gpus") == 0)
    return cmd_gpus(argc - 2, argv + 2);
  if (strcmp(cmd, "bench") == 0)
    return cmd_bench(argv[0], argc - 2, argv + 2);
  if (strcmp(cmd, "trace") == 0)
    return js_cmd_trace(argc - 2, argv + 2);
  if (strcmp(cmd, "validate") == 0)
    return js_cmd_validate(argc - 2, argv + 2);
  fprintf(stderr, "joulesim: unknown command '%s'\n%s", cmd, usage_main);
  return EXIT_USAGE;
}
