/* cli/cmd_validate.c -- `joulesim validate`: a measured profile against
 * the model (run/validate.h), its report on stdout, optionally its HDF5
 * tables (--out) and the fitted catalogue entry (--save-gpu).  Usage
 * errors end "(see joulesim validate --help)" and exit with status 2. */
#include "cli/commands.h"
#include "cli/options.h"
#include "run/confine.h"
#include "run/validate.h"
#include "models/gpufile.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char usage_validate[] =
  "usage: joulesim validate PROFILE.csv --gpu NAME [options]\n"
  "       joulesim validate --nvml SAMPLES.csv WINDOWS.csv --gpu NAME "
  "[options]\n"
  "\n"
  "Compares a measured time/energy profile with the model: out of the box\n"
  "(the catalogue entry, anchored at the top clock's measured time) and\n"
  "fitted on a training subset of the clocks, predicting the others.\n"
  "PROFILE.csv: `stage,instruction,frequency,time,energy` (Perseus/Zeus) or\n"
  "`kernel,sm_mhz,mem_mhz,time_s,energy_j[,count,class]`.  With --nvml,\n"
  "an nvidia-smi power/clock sample series and `kernel,start,end` windows.\n"
  "\n"
  "  --gpu NAME          catalogue GPU to compare with (joulesim gpus)\n"
  "  --fit MODE          none | time | power | all (default all)\n"
  "  --holdout F         fraction of the SM clocks held out (default 0.25)\n"
  "  --folds K           K-fold over the SM clocks instead of --holdout\n"
  "  --seed N            PCG seed choosing the held-out clocks (default 1)\n"
  "  --power-limit W     the card's power limit during the measurement\n"
  "                      (default: the GPU's default limit)\n"
  "  --points            also print every point\n"
  "  --out FILE.h5       write validate_points, validate_summary and\n"
  "                      validate_model tables\n"
  "  --save-gpu NAME     save the power model fitted on every point as\n"
  "                      catalogue entry NAME, in NAME.gpu under --gpu-dir\n"
  "  --gpu-dir DIR       where --save-gpu writes (default: the first\n"
  "                      directory of $JOULESIM_GPU_PATH, else .)\n"
  "  --force             replace an existing --out or NAME.gpu that is not\n"
  "                      a joulesim file of that kind (refused otherwise)\n"
  "\n"
  "Entries in the directories of JOULESIM_GPU_PATH (colon-separated) are\n"
  "part of the catalogue.  See docs/validation.md.\n";

static int usage_error(const char *fmt, const char *arg)
{
  fprintf(stderr, "joulesim validate: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\n(see joulesim validate --help)\n");
  return EXIT_USAGE;
}

static gboolean parse_double_arg(const char *s, double *out)
{
  char *end = NULL;
  if (s == NULL || *s == '\0')
    return FALSE;
  double v = g_ascii_strtod(s, &end);
  if (*end != '\0' || !isfinite(v))
    return FALSE;
  *out = v;
  return TRUE;
}

static gboolean parse_uint_arg(const char *s, guint64 *out)
{
  char *end = NULL;
  if (s == NULL || *s == '\0' || *s == '-')
    return FALSE;
  guint64 v = g_ascii_strtoull(s, &end, 10);
  if (*end != '\0')
    return FALSE;
  *out = v;
  return TRUE;
}

enum {
  OPT_HELP, OPT_POINTS, OPT_FORCE, OPT_GPU, OPT_FIT, OPT_HOLDOUT, OPT_FOLDS,
  OPT_SEED, OPT_POWER_LIMIT, OPT_OUT, OPT_SAVE_GPU, OPT_GPU_DIR, OPT_NVML
};

static const CliOption validate_options[] = {
  {"--help", OPT_HELP, FALSE},
  {"-h", OPT_HELP, FALSE},
  {"--points", OPT_POINTS, FALSE},
  {"--force", OPT_FORCE, FALSE},
  {"--gpu", OPT_GPU, TRUE},
  {"--fit", OPT_FIT, TRUE},
  {"--holdout", OPT_HOLDOUT, TRUE},
  {"--folds", OPT_FOLDS, TRUE},
  {"--seed", OPT_SEED, TRUE},
  {"--power-limit", OPT_POWER_LIMIT, TRUE},
  {"--out", OPT_OUT, TRUE},
  {"--save-gpu", OPT_SAVE_GPU, TRUE},
  {"--gpu-dir", OPT_GPU_DIR, TRUE},
  {"--nvml", OPT_NVML, TRUE},
  {NULL, 0, FALSE}};

/* What the command line asks for besides the validation itself. */
typedef struct {
  const char *profile_path, *nvml, *gpu_dir;
  gboolean points;
} ValidateArgs;

/* Reads one option's value into cfg or x; the exit status of a usage
 * error, or -1. */
static int validate_option(int id, const char *v, JsValidateCfg *cfg,
                           ValidateArgs *x)
{
  switch (id) {
  case OPT_GPU:
    cfg->gpu = v;
    break;
  case OPT_FIT: {
    int m = fit_mode_from_name(v);
    if (m < 0)
      return usage_error("--fit must be none, time, power or all (got "
                         "'%s')",
                         v);
    cfg->mode = (FitMode)m;
    break;
  }
  case OPT_HOLDOUT:
    if (!parse_double_arg(v, &cfg->holdout) || !(cfg->holdout > 0) ||
        !(cfg->holdout < 1))
      return usage_error("--holdout must be a fraction in (0, 1) (got "
                         "'%s')",
                         v);
    break;
  case OPT_FOLDS: {
    guint64 k;
    if (!parse_uint_arg(v, &k) || k < 2 || k > 1000)
      return usage_error("--folds must be an integer in 2..1000 (got '%s')",
                         v);
    cfg->folds = (guint)k;
    break;
  }
  case OPT_SEED:
    if (!parse_uint_arg(v, &cfg->seed))
      return usage_error("--seed must be a non-negative integer (got '%s')",
                         v);
    break;
  case OPT_POWER_LIMIT:
    if (!parse_double_arg(v, &cfg->power_limit_w) ||
        !(cfg->power_limit_w > 0) || cfg->power_limit_w > 1e5)
      return usage_error("--power-limit must be watts > 0 (got '%s')", v);
    break;
  case OPT_OUT:
    cfg->out = v;
    break;
  case OPT_SAVE_GPU:
    cfg->save_gpu = v;
    break;
  case OPT_GPU_DIR:
    x->gpu_dir = v;
    break;
  case OPT_NVML:
    x->nvml = v;
    break;
  }
  return -1;
}

/* Reads the command line.  Returns -1 to go on, else the exit status
 * (help printed, or a usage error reported). */
static int parse_validate(int argc, char **argv, JsValidateCfg *cfg,
                          ValidateArgs *x)
{
  CliArgs a;
  cli_args_init(&a, argc, argv, validate_options, 0);
  for (int id; (id = cli_next(&a)) != CLI_DONE;) {
    if (id == OPT_HELP) {
      fputs(usage_validate, stdout);
      return 0;
    } else if (id == CLI_ARG) {
      if (x->profile_path != NULL)
        return usage_error("unexpected argument '%s'", a.arg);
      x->profile_path = a.arg;
    } else if (id == OPT_POINTS) {
      x->points = TRUE;
    } else if (id == OPT_FORCE) {
      cfg->force = TRUE;
    } else if (id == CLI_UNKNOWN) {
      /* As an option that takes a value, an unknown one last on the line
       * is reported as missing its value. */
      return usage_error(a.next < argc ? "unknown option '%s'"
                                       : "option %s needs a value",
                         a.arg);
    } else if (a.value == NULL) {
      return usage_error("option %s needs a value", a.name);
    } else {
      int rc = validate_option(id, a.value, cfg, x);
      if (rc >= 0)
        return rc;
    }
  }
  if (x->profile_path == NULL)
    return usage_error("%s", x->nvml != NULL ? "missing WINDOWS.csv after "
                                               "--nvml SAMPLES.csv"
                                             : "missing PROFILE.csv");
  if (cfg->gpu == NULL)
    return usage_error("%s", "missing --gpu NAME (see joulesim gpus)");
  return -1;
}

/* "joulesim validate: MESSAGE" (prefixed) on stderr; EXIT_USER. */
static int fail(const char *prefix, GError *err)
{
  fprintf(stderr, "joulesim validate: %s%s\n", prefix, err->message);
  g_error_free(err);
  return EXIT_USER;
}

/* --save-gpu: the entry fitted on every point, saved as NAME.gpu in
 * --gpu-dir, else the first directory of $JOULESIM_GPU_PATH, else ".". */
static int save_gpu(const FitReport *r, const Profile *p,
                    const JsValidateCfg *cfg, const char *gpu_dir)
{
  GError *err = NULL;
  g_autoptr(GpuSpec) s = js_validate_fitted_spec(r, p, cfg->save_gpu, &err);
  g_autofree char *dir = NULL;
  if (gpu_dir != NULL) {
    dir = g_strdup(gpu_dir);
  } else {
    const char *env = g_getenv(GPU_PATH_ENV);
    g_auto(GStrv) dirs = env != NULL ? g_strsplit(env, ":", -1) : NULL;
    for (guint i = 0; dirs != NULL && dirs[i] != NULL && dir == NULL; i++)
      if (dirs[i][0] != '\0')
        dir = g_strdup(dirs[i]);
    if (dir == NULL)
      dir = g_strdup(".");
  }
  g_autofree char *file = g_strconcat(cfg->save_gpu, GPU_FILE_EXT, NULL);
  g_autofree char *path = g_build_filename(dir, file, NULL);
  if (s != NULL && !cfg->force &&
      !js_output_check(path, JS_FILE_GPU, "--force replaces it", &err))
    g_clear_pointer(&s, gpu_spec_free);
  if (s == NULL || !gpu_spec_save_keyfile(s, path, &err))
    return fail("", err);
  printf("\nsaved GPU '%s' to %s (use it with JOULESIM_GPU_PATH=%s)\n",
         cfg->save_gpu, path, dir);
  return 0;
}

int cmd_validate(int argc, char **argv)
{
  JsValidateCfg cfg = {NULL, FIT_ALL, 0.25, 0, 1, 0, NULL, NULL, FALSE};
  ValidateArgs x = {NULL, NULL, NULL, FALSE};
  int rc = parse_validate(argc, argv, &cfg, &x);
  if (rc >= 0)
    return rc;
  GError *err = NULL;
  /* An output that would replace someone else's file is refused before
   * any work (run/confine.h). */
  if (cfg.out != NULL && !cfg.force &&
      !js_output_check(cfg.out, JS_FILE_RESULTS, "--force replaces it",
                       &err))
    return fail("--out: ", err);
  g_autoptr(GpuCatalogue) cat = cli_catalogue_new();
  /* The GPU first: a misspelt name is refused before a long load, and the
   * message names the option. */
  if (gpu_catalogue_lookup(cat, cfg.gpu, &err) == NULL)
    return fail("--gpu: ", err);
  g_autoptr(Profile) p = x.nvml != NULL
                             ? profile_load_nvml(x.nvml, x.profile_path, &err)
                             : profile_load(x.profile_path, &err);
  if (p == NULL)
    return fail("", err);
  const GpuSpec *g = NULL;
  g_autoptr(FitReport) r = js_validate_run(cat, p, &cfg, &g, &err);
  if (r == NULL)
    return fail("", err);
  g_autoptr(GString) text = g_string_new(NULL);
  js_validate_report(p, g, &cfg, r, x.points, text);
  fputs(text->str, stdout);
  if (cfg.out != NULL && !js_validate_write(p, g, &cfg, r, &err))
    return fail("", err);
  if (cfg.save_gpu != NULL)
    return save_gpu(r, p, &cfg, x.gpu_dir);
  return 0;
}
