/* sim/main.c -- the joulesim command line (DESIGN section 8).
 *
 * The only file that may include every layer.  Exit status: 0 success, 1 a
 * user error (the message names the file, line or field), 2 a usage error.
 * Only this file prints errors.
 */
#include "lua/bind.h"
#include "lua/commands.h"
#include "lua/memory.h"
#include "lua/session.h"
#include "lua/sweep.h"
#include "models/gpu.h"
#include "sim/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USER 1
#define EXIT_USAGE 2

static const char usage_main[] =
  "usage: joulesim COMMAND [ARGS...]\n"
  "\n"
  "commands:\n"
  "  run SCENARIO.lua [--seed N] [--jobs N] [--sandbox] [--quiet]\n"
  "                      [--max-memory SIZE] [ARGS...]\n"
  "                      run a Lua scenario script\n"
  "  gpus [NAME]         list the GPU catalogue, or describe one GPU model\n"
  "  bench [--quick] [--json]\n"
  "                      performance figures (DESIGN section 10)\n"
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
  "[--quiet]\n                    [--max-memory SIZE] [ARGS...]\n"
  "\n"
  "Runs a Lua scenario.  Options before the script path are joulesim's;\n"
  "everything after it is passed to the script as the table `arg`.\n"
  "  --seed N     seed for js.simulate and math.random (default 1)\n"
  "  --jobs N     worker processes of js.sweep (default: the number of "
  "cores)\n"
  "  --sandbox    no os/io access; only the joulesim API writes files\n"
  "  --quiet      no progress output\n"
  "  --max-memory SIZE\n"
  "               refuse, before allocating, a workload or replay whose\n"
  "               estimated memory exceeds SIZE (e.g. 4G; default: the\n"
  "               memory available when it is checked)\n";

static const char usage_gpus[] =
  "usage: joulesim gpus [NAME]\n"
  "\n"
  "Without NAME, lists the catalogue.  With NAME, prints every parameter of\n"
  "that GPU model with its value, unit and source.\n";

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
  guint64 seed = 1, jobs = 0, max_memory = 0;
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
    } else if (strcmp(a, "--max-memory") == 0) {
      GError *merr = NULL;
      if (i + 1 >= argc || !js_memory_parse(argv[i + 1], &max_memory, &merr)) {
        fprintf(stderr, "joulesim run: %s\n",
                merr != NULL ? merr->message : "--max-memory needs a size");
        g_clear_error(&merr);
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
  s->max_memory = max_memory; /* 0: the memory available */
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

int main(int argc, char **argv)
{
  /* JOULESIM_FAULT=N: fail the N-th guarded I/O call (docs/fault-injection.md). */
  GError *ferr = NULL;
  if (!fault_configure_from_env(&ferr)) {
    fprintf(stderr, "joulesim: %s\n", ferr->message);
    g_error_free(ferr);
    return EXIT_USAGE;
  }
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
    return js_cmd_bench(argv[0], argc - 2, argv + 2);
  if (strcmp(cmd, "trace") == 0)
    return js_cmd_trace(argc - 2, argv + 2);
  if (strcmp(cmd, "validate") == 0)
    return js_cmd_validate(argc - 2, argv + 2);
  fprintf(stderr, "joulesim: unknown command '%s'\n%s", cmd, usage_main);
  return EXIT_USAGE;
}
