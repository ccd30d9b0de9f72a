/* cli/main.c -- the joulesim command line (DESIGN section 8).
 *
 * The only file that may include every layer.  Exit status: 0 success, 1 a
 * user error (the message names the file, line or field), 2 a usage error.
 * Only this file prints errors.
 */
#include "lua/bind.h"
#include "cli/commands.h"
#include "run/memory.h"
#include "run/session.h"
#include "run/sweep.h"
#include "cli/sweep_progress.h"
#include "models/gpu.h"
#include "io/fault.h"

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
  "  run [--seed N] [--jobs N] [--sandbox] [--quiet] [--max-memory SIZE]\n"
  "      [--max-seconds S] [--max-instructions N] SCENARIO.lua [ARGS...]\n"
  "                      run a Lua scenario script\n"
  "  gpus [NAME]         list the GPU catalogue, or describe one GPU model\n"
  "  bench [--quick] [--json]\n"
  "                      performance figures (DESIGN section 10)\n"
  "  trace gen|import|info|export ...\n"
  "                      generate, import, inspect and export traces\n"
  "  validate PROFILE.csv --gpu NAME [...]\n"
  "                      compare a measured profile with the model\n"  "  fidelity [--data DIR] [--out FILE.h5] [--only NAME] [--short]\n"
  "                      every measured case through the model, with its\n"
  "                      error (docs/fidelity.md)\n"
  "\n"
  "options:\n"
  "  --version           print the version and git revision\n"
  "  --help              this text (also: joulesim COMMAND --help)\n";

static const char usage_run[] =
  "usage: joulesim run [--seed N] [--jobs N] [--quiet] [--max-memory SIZE]\n"
  "                    [--max-seconds S] [--max-instructions N]\n"
  "                    [--sandbox [--allow-write DIR]... [--allow-read DIR]...]\n"
  "                    SCENARIO.lua [ARGS...]\n"
  "\n"
  "Runs a Lua scenario.  Options before the script path are joulesim's;\n"
  "everything after it is passed to the script as the table `arg`.\n"
  "  --seed N     seed for js.simulate and math.random (default 1)\n"
  "  --jobs N     worker processes of js.sweep (default: the number of "
  "cores)\n"
  "  --sandbox    run a script you did not write: only the safe standard\n"
  "               libraries (no os, io, debug, package), and the joulesim\n"
  "               API reads and writes only below the allowed directories\n"
  "               (docs/lua-api.md, \"The sandbox\")\n"
  "  --allow-write DIR\n"
  "               with --sandbox: may also write (and read) below DIR\n"
  "               (repeatable; default: the current directory only)\n"
  "  --allow-read DIR\n"
  "               with --sandbox: may also read below DIR (repeatable;\n"
  "               default: the current directory and the script's)\n"
  "  --quiet      no progress output\n"
  "  --max-memory SIZE\n"
  "               refuse, before allocating, a workload or replay whose\n"
  "               estimated memory exceeds SIZE (e.g. 4G; default: the\n"
  "               memory available when it is checked); also caps the\n"
  "               Lua heap\n"
  "  --max-seconds S\n"
  "               stop the script after S seconds of wall time (exit 1)\n"
  "  --max-instructions N\n"
  "               stop the script after about N Lua instructions (exit 1)\n"
  "Options take their value as --opt VALUE or --opt=VALUE.\n";

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

/* Parses a number of seconds: finite, > 0, at most a year. */
static gboolean parse_seconds(const char *s, double *out)
{
  char *end = NULL;
  if (s == NULL || *s == '\0')
    return FALSE;
  double v = g_ascii_strtod(s, &end);
  if (*end != '\0' || !(v > 0) || v > 365.0 * 86400)
    return FALSE;
  *out = v;
  return TRUE;
}

static int cmd_run(int argc, char **argv)
{
  guint64 seed = 1, jobs = 0, max_memory = 0, max_instr = 0;
  double max_seconds = 0;
  gboolean sandbox = FALSE, quiet = FALSE;
  g_autoptr(GPtrArray) allow_write = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) allow_read = g_ptr_array_new_with_free_func(g_free);
  int i = 0;
  for (; i < argc; i++) {
    /* "--opt=value" is "--opt value". */
    g_autofree char *name = NULL;
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    const char *eq = strchr(a, '=');
    gboolean inline_val = a[0] == '-' && a[1] == '-' && eq != NULL;
    if (inline_val) {
      name = g_strndup(a, (gsize)(eq - a));
      a = name;
      val = eq + 1;
    }
    /* Consumes the option's value: FALSE when there is none. */
#define TAKE() (val != NULL && (inline_val || (i++, TRUE)))
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage_run, stdout);
      return 0;
    } else if (strcmp(a, "--seed") == 0) {
      if (!TAKE() || !parse_u64(val, &seed)) {
        fprintf(stderr, "joulesim run: --seed needs a non-negative integer\n");
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--jobs") == 0) {
      if (!TAKE() || !parse_u64(val, &jobs) || jobs < 1 || jobs > 4096) {
        fprintf(stderr, "joulesim run: --jobs needs an integer in 1..4096\n");
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--max-memory") == 0) {
      GError *merr = NULL;
      if (!TAKE() || !js_memory_parse(val, &max_memory, &merr)) {
        fprintf(stderr, "joulesim run: %s\n",
                merr != NULL ? merr->message : "--max-memory needs a size");
        g_clear_error(&merr);
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--max-seconds") == 0) {
      if (!TAKE() || !parse_seconds(val, &max_seconds)) {
        fprintf(stderr, "joulesim run: --max-seconds needs a number of "
                        "seconds > 0 (got '%s')\n", val ? val : "nothing");
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--max-instructions") == 0) {
      if (!TAKE() || !parse_u64(val, &max_instr) || max_instr == 0) {
        fprintf(stderr, "joulesim run: --max-instructions needs an integer "
                        "> 0 (got '%s')\n", val ? val : "nothing");
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--allow-write") == 0 ||
               strcmp(a, "--allow-read") == 0) {
      if (!TAKE() || *val == '\0') {
        fprintf(stderr, "joulesim run: %s needs a directory\n", a);
        return EXIT_USAGE;
      }
      g_ptr_array_add(a[8] == 'w' ? allow_write : allow_read, g_strdup(val));
    } else if (strcmp(a, "--sandbox") == 0 && !inline_val) {
      sandbox = TRUE;
    } else if (strcmp(a, "--quiet") == 0 && !inline_val) {
      quiet = TRUE;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "joulesim run: unknown option '%s'\n%s", argv[i],
              usage_run);
      return EXIT_USAGE;
    } else {
      break;
    }
#undef TAKE
  }
  if (i >= argc) {
    fprintf(stderr, "joulesim run: missing SCENARIO.lua\n%s", usage_run);
    return EXIT_USAGE;
  }
  if (!sandbox && allow_write->len + allow_read->len > 0) {
    fprintf(stderr, "joulesim run: --allow-write and --allow-read apply "
                    "only with --sandbox\n");
    return EXIT_USAGE;
  }
  const char *path = argv[i];
  g_autoptr(JsSession) s = js_session_new(seed);
  s->quiet = quiet;
  s->jobs = (guint)jobs; /* 0: js.sweep uses the number of cores */
  cli_sweep_progress_install(s);
  s->max_memory = max_memory; /* 0: the memory available */
  s->limits.max_seconds = max_seconds;
  s->limits.max_instructions = max_instr;
  GError *err = NULL;
  if (sandbox) {
    gboolean ok = js_session_sandbox(s, path, &err);
    for (guint k = 0; ok && k < allow_write->len; k++)
      ok = js_confine_allow(s->confine, JS_ACCESS_WRITE,
                            g_ptr_array_index(allow_write, k),
                            "--allow-write", &err);
    for (guint k = 0; ok && k < allow_read->len; k++)
      ok = js_confine_allow(s->confine, JS_ACCESS_READ,
                            g_ptr_array_index(allow_read, k), "--allow-read",
                            &err);
    if (!ok)
      return fail(err);
  }
  gboolean ok = js_run_script(s, path, argc - i - 1, argv + i + 1, &err);
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

/* joulesim fidelity: lua/fidelity.lua, embedded, with the arguments. */
static int cmd_fidelity(int argc, char **argv)
{
  g_autoptr(JsSession) s = js_session_new(1);
  s->quiet = TRUE;
  GError *err = NULL;
  if (js_run_resource(s, "fidelity.lua", argc, argv, &err))
    return 0;
  /* The program's own errors (bad data, options) carry no Lua position:
   * their traceback is noise. */
  char *tb = strstr(err->message, "\nstack traceback:");
  if (tb != NULL && !g_str_has_prefix(err->message, "[joulesim "))
    *tb = '\0';
  fprintf(stderr, "joulesim fidelity: %s\n", err->message);
  g_error_free(err);
  return EXIT_USER;
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
  if (strcmp(cmd, "fidelity") == 0)
    return cmd_fidelity(argc - 2, argv + 2);
  fprintf(stderr, "joulesim: unknown command '%s'\n%s", cmd, usage_main);
  return EXIT_USAGE;
}
