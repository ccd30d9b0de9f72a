/* cli/cmd_run.c -- `joulesim run`: a Lua scenario script.
 *
 * Options come before the script path; everything after it is the
 * script's (the global table `arg`).  The session's catalogue has the
 * user's entries and its print hook writes the script's output to stdout
 * (cli/session.c).  Exit status 1 when the script fails or a sweep point
 * failed (its error is in the results), 2 for a usage error.
 */
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/sweep_progress.h"
#include "lua/bind.h"
#include "run/memory.h"
#include "run/session.h"
#include "run/sweep.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_run[] =
  "usage: joulesim run [--seed N] [--jobs N] [--threads N] [--quiet]\n"
  "                    [--max-memory SIZE]\n"
  "                    [--max-seconds S] [--max-instructions N]\n"
  "                    [--sandbox [--allow-write DIR]... [--allow-read DIR]...]\n"
  "                    SCENARIO.lua [ARGS...]\n"
  "\n"
  "Runs a Lua scenario.  Options before the script path are joulesim's;\n"
  "everything after it is passed to the script as the table `arg`.\n"
  "  --seed N     seed for js.simulate and math.random (default 1)\n"
  "  --jobs N     worker processes of js.sweep (default: the number of "
  "cores;\n"
  "               at most 256, or twice the cores)\n"
  "  --threads N  threads each js.simulate replays on (default 1; 1..256;\n"
  "               the results are the same for every N)\n"
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
  "               Lua heap.  One limit for the whole run: js.sweep's\n"
  "               workers share what the script leaves of it\n"
  "  --max-seconds S\n"
  "               stop the script after S seconds of wall time (exit 1)\n"
  "  --max-instructions N\n"
  "               stop the script after about N Lua instructions (exit 1)\n"
  "Options take their value as --opt VALUE or --opt=VALUE.\n";

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

/* What the options ask for. */
typedef struct {
  guint64 seed, jobs, threads, max_memory, max_instr;
  double max_seconds;
  gboolean sandbox, quiet;
  GPtrArray *allow_write, *allow_read; /* owned strings */
  int script;                          /* argv index of SCENARIO.lua */
} RunCfg;

enum {
  OPT_HELP, OPT_SEED, OPT_JOBS, OPT_THREADS, OPT_MAX_MEMORY, OPT_MAX_SECONDS,
  OPT_MAX_INSTR, OPT_ALLOW_WRITE, OPT_ALLOW_READ, OPT_SANDBOX, OPT_QUIET
};

static const CliOption run_options[] = {
  {"--help", OPT_HELP, FALSE},
  {"-h", OPT_HELP, FALSE},
  {"--seed", OPT_SEED, TRUE},
  {"--jobs", OPT_JOBS, TRUE},
  {"--threads", OPT_THREADS, TRUE},
  {"--max-memory", OPT_MAX_MEMORY, TRUE},
  {"--max-seconds", OPT_MAX_SECONDS, TRUE},
  {"--max-instructions", OPT_MAX_INSTR, TRUE},
  {"--allow-write", OPT_ALLOW_WRITE, TRUE},
  {"--allow-read", OPT_ALLOW_READ, TRUE},
  {"--sandbox", OPT_SANDBOX, FALSE},
  {"--quiet", OPT_QUIET, FALSE},
  {NULL, 0, FALSE}};

/* Reads the options into cfg.  Returns -1 to go on, else the exit status
 * (help printed, or a usage error reported). */
static int parse_run(int argc, char **argv, RunCfg *cfg)
{
  CliArgs a;
  cli_args_init(&a, argc, argv, run_options, CLI_LONG_ONLY);
  for (;;) {
    int id = cli_next(&a);
    const char *val = a.value;
    switch (id) {
    case OPT_HELP:
      fputs(usage_run, stdout);
      return 0;
    case OPT_SEED:
      if (!parse_u64(val, &cfg->seed)) {
        fprintf(stderr, "joulesim run: --seed needs a non-negative integer\n");
        return EXIT_USAGE;
      }
      break;
    case OPT_JOBS:
      if (!parse_u64(val, &cfg->jobs) || cfg->jobs < 1 ||
          cfg->jobs > js_sweep_max_jobs()) {
        fprintf(stderr, "joulesim run: --jobs needs an integer in 1..%u "
                        "(at most twice the cores, or %d)\n",
                js_sweep_max_jobs(), JS_SWEEP_MAX_JOBS);
        return EXIT_USAGE;
      }
      break;
    case OPT_THREADS:
      if (!parse_u64(val, &cfg->threads) || cfg->threads < 1 ||
          cfg->threads > SIM_MAX_THREADS) {
        fprintf(stderr,
                "joulesim run: --threads needs an integer in 1..%u\n",
                SIM_MAX_THREADS);
        return EXIT_USAGE;
      }
      break;
    case OPT_MAX_MEMORY: {
      GError *merr = NULL;
      if (val == NULL || !js_memory_parse(val, &cfg->max_memory, &merr)) {
        fprintf(stderr, "joulesim run: %s\n",
                merr != NULL ? merr->message : "--max-memory needs a size");
        g_clear_error(&merr);
        return EXIT_USAGE;
      }
      break;
    }
    case OPT_MAX_SECONDS:
      if (!parse_seconds(val, &cfg->max_seconds)) {
        fprintf(stderr, "joulesim run: --max-seconds needs a number of "
                        "seconds > 0 (got '%s')\n", val ? val : "nothing");
        return EXIT_USAGE;
      }
      break;
    case OPT_MAX_INSTR:
      if (!parse_u64(val, &cfg->max_instr) || cfg->max_instr == 0) {
        fprintf(stderr, "joulesim run: --max-instructions needs an integer "
                        "> 0 (got '%s')\n", val ? val : "nothing");
        return EXIT_USAGE;
      }
      break;
    case OPT_ALLOW_WRITE:
    case OPT_ALLOW_READ:
      if (val == NULL || *val == '\0') {
        fprintf(stderr, "joulesim run: %s needs a directory\n", a.name);
        return EXIT_USAGE;
      }
      g_ptr_array_add(id == OPT_ALLOW_WRITE ? cfg->allow_write
                                            : cfg->allow_read,
                      g_strdup(val));
      break;
    case OPT_SANDBOX:
      cfg->sandbox = TRUE;
      break;
    case OPT_QUIET:
      cfg->quiet = TRUE;
      break;
    case CLI_UNKNOWN:
      fprintf(stderr, "joulesim run: unknown option '%s'\n%s", a.arg,
              usage_run);
      return EXIT_USAGE;
    case CLI_ARG:
      cfg->script = a.index;
      return -1;
    case CLI_DONE:
    default:
      fprintf(stderr, "joulesim run: missing SCENARIO.lua\n%s", usage_run);
      return EXIT_USAGE;
    }
  }
}

int cmd_run(int argc, char **argv)
{
  g_autoptr(GPtrArray) allow_write = g_ptr_array_new_with_free_func(g_free);
  g_autoptr(GPtrArray) allow_read = g_ptr_array_new_with_free_func(g_free);
  RunCfg cfg = {.seed = 1, .allow_write = allow_write,
                .allow_read = allow_read};
  int rc = parse_run(argc, argv, &cfg);
  if (rc >= 0)
    return rc;
  if (!cfg.sandbox && allow_write->len + allow_read->len > 0) {
    fprintf(stderr, "joulesim run: --allow-write and --allow-read apply "
                    "only with --sandbox\n");
    return EXIT_USAGE;
  }
  int i = cfg.script;
  const char *path = argv[i];
  g_autoptr(JsSession) s = cli_session_new(cfg.seed);
  s->quiet = cfg.quiet;
  s->jobs = (guint)cfg.jobs; /* 0: js.sweep uses the number of cores */
  if (cfg.threads > 0)
    s->threads = (guint)cfg.threads;
  cli_sweep_progress_install(s);
  s->max_memory = cfg.max_memory; /* 0: the memory available */
  s->limits.max_seconds = cfg.max_seconds;
  s->limits.max_instructions = cfg.max_instr;
  GError *err = NULL;
  if (cfg.sandbox) {
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
      return cli_fail(err);
  }
  gboolean ok = js_run_script(s, path, argc - i - 1, argv + i + 1, &err);
  guint failed = js_sweep_take_failed(s);
  if (!ok)
    return cli_fail(err);
  if (failed > 0) {
    fprintf(stderr, "joulesim: %u sweep point%s failed (%s error recorded "
            "in the 'error' column of the results)\n", failed,
            failed == 1 ? "" : "s", failed == 1 ? "its" : "their");
    return EXIT_USER;
  }
  return 0;
}
