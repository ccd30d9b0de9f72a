/* models/gpufile.c -- GPU catalogue entries as key files (format in
 * models/gpufile.h).
 *
 * The parameter names are the ones gpu_spec_param() resolves; the list of
 * scalar names below must follow models/gpu.c's table (tests/test-fit.c
 * round-trips every catalogue entry through a file and compares
 * gpu_spec_describe() output, so a parameter missing here fails it).
 */
#include "models/gpufile.h"
#include "io/fault.h"
#include "io/input.h"

#include <string.h>

/* Parameter names come from models/gpu.c (gpu_spec_scalar_name,
 * gpu_spec_array_name): one list for every reader and writer. */

/* Calls fn(name) for every parameter of a spec with n_mem memory clocks. */
typedef gboolean (*ParamFn)(const char *name, gpointer data, GError **error);

static gboolean each_param(guint n_mem, ParamFn fn, gpointer data,
                           GError **error)
{
  const char *name;
  for (guint i = 0; (name = gpu_spec_scalar_name(i)) != NULL; i++)
    if (!fn(name, data, error))
      return FALSE;
  for (guint i = 0; i < n_mem; i++) {
    char mem[32];
    g_snprintf(mem, sizeof mem, "mem_mhz.%u", i);
    if (!fn(mem, data, error))
      return FALSE;
  }
  const char *arr;
  for (guint a = 0; (arr = gpu_spec_array_name(a)) != NULL; a++)
    for (int c = 0; c < SIM_CLASS_COUNT; c++) {
      g_autofree char *pname =
          g_strdup_printf("%s.%s", arr, gpu_class_name((SimOpClass)c));
      if (!fn(pname, data, error))
        return FALSE;
    }
  return TRUE;
}

typedef struct {
  GKeyFile *kf;
  GpuSpec *spec;
  const char *path;
  gboolean have_base;
} Ctx;

static gboolean save_one(const char *name, gpointer data, GError **error)
{
  Ctx *x = data;
  GpuParam *p = gpu_spec_param(x->spec, name);
  g_assert(p != NULL); /* the name list follows gpu.c */
  g_key_file_set_double(x->kf, "values", name, p->v);
  if (p->source != NULL)
    g_key_file_set_string(x->kf, "sources", name, p->source);
  return TRUE;
}

/* A GPU description is a few KB: a larger file is not one. */
#define GPU_FILE_MAX_BYTES (1u << 20)

/* Loads the key file at `path` into kf: opened once (io/input.h: a FIFO or
 * a device is refused, never waited on), at most GPU_FILE_MAX_BYTES.
 * GPU_ERROR_INVALID naming the file otherwise. */
static gboolean gpu_file_read(GKeyFile *kf, const char *path, GError **error)
{
  IoInput in;
  if (!io_input_open(&in, path, "gpufile: open", GPU_ERROR,
                     GPU_ERROR_INVALID, error))
    return FALSE;
  g_autofree char *text = NULL;
  gsize len = 0;
  gboolean ok = io_input_read_all(&in, path, GPU_FILE_MAX_BYTES,
                                  "a GPU description", "gpufile: read",
                                  GPU_ERROR, GPU_ERROR_INVALID, &text, &len,
                                  error);
  io_input_close(&in);
  GError *err = NULL;
  if (ok && !g_key_file_load_from_data(kf, text, len, G_KEY_FILE_NONE,
                                       &err)) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID, "%s: %s", path,
                err->message);
    g_error_free(err);
    ok = FALSE;
  }
  return ok;
}

gboolean gpu_file_probe(const char *path)
{
  g_autoptr(GKeyFile) kf = g_key_file_new();
  fault_suspend(); /* a probe, not a fault site */
  gboolean read = gpu_file_read(kf, path, NULL);
  fault_resume();
  return read &&
         g_key_file_has_group(kf, "gpu") && g_key_file_has_group(kf, "values");
}

gboolean gpu_spec_save_keyfile(const GpuSpec *spec, const char *path,
                               GError **error)
{
  g_return_val_if_fail(spec != NULL && path != NULL, FALSE);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  g_key_file_set_comment(kf, NULL, NULL,
                         " joulesim GPU catalogue entry (models/gpufile.h); "
                         "load with JOULESIM_GPU_PATH",
                         NULL);
  g_key_file_set_string(kf, "gpu", "name", spec->name);
  if (spec->description != NULL)
    g_key_file_set_string(kf, "gpu", "description", spec->description);
  g_key_file_set_integer(kf, "gpu", "n_mem_clocks", (gint)spec->n_mem_clocks);
  /* gpu_spec_param needs a mutable spec; it only returns pointers. */
  g_autoptr(GpuSpec) copy = gpu_spec_copy(spec);
  Ctx x = {kf, copy, path, FALSE};
  each_param(MIN(spec->n_mem_clocks, GPU_MAX_MEM_CLOCKS), save_one, &x, NULL);
  gsize len = 0;
  g_autofree char *text = g_key_file_to_data(kf, &len, NULL);
  GError *err = NULL;
  if (fault_inject(FAULT_WRITE, "gpufile: write")) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "cannot write GPU file %s: injected fault", path);
    return FALSE;
  }
  if (!g_file_set_contents(path, text, (gssize)len, &err)) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "cannot write GPU file %s: %s", path, err->message);
    g_error_free(err);
    return FALSE;
  }
  return TRUE;
}

static gboolean load_one(const char *name, gpointer data, GError **error)
{
  Ctx *x = data;
  GpuParam *p = gpu_spec_param(x->spec, name);
  g_assert(p != NULL);
  GError *err = NULL;
  if (!g_key_file_has_key(x->kf, "values", name, NULL)) {
    /* Parameters added after files were written, whose 0 means "derive
     * it" (models/gpu.h), may be missing from a file without a base. */
    static const char *const optional[] = {"tf32_flop_per_clk_sm",
                                           "fp8_flop_per_clk_sm",
                                           "fp8_gemm_eff_ratio",
                                           "v_curve_exp", "stall_activity",
                                           "activity_tf32",
                                           "boost_window_ms",
                                           "boost_period_ms",
                                           "boost_step_mhz", "memory_gb",
                                           NULL};
    if (x->have_base || g_strv_contains(optional, name))
      return TRUE;
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "%s: missing key '%s' in [values] (give every parameter, or "
                "base= in [gpu])",
                x->path, name);
    return FALSE;
  }
  double v = g_key_file_get_double(x->kf, "values", name, &err);
  if (err != NULL) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "%s: [values] %s: %s", x->path, name, err->message);
    g_error_free(err);
    return FALSE;
  }
  p->v = v;
  g_autofree char *src = g_key_file_get_string(x->kf, "sources", name, NULL);
  p->source = g_intern_string(src != NULL ? src : x->path);
  return TRUE;
}

/* Checks that every key of [values] and [sources] names a parameter. */
static gboolean check_keys(GKeyFile *kf, GpuSpec *spec, const char *path,
                           GError **error)
{
  static const char *const groups[] = {"values", "sources"};
  for (gsize g = 0; g < G_N_ELEMENTS(groups); g++) {
    if (!g_key_file_has_group(kf, groups[g]))
      continue;
    g_auto(GStrv) keys = g_key_file_get_keys(kf, groups[g], NULL, NULL);
    for (guint i = 0; keys != NULL && keys[i] != NULL; i++)
      if (gpu_spec_param(spec, keys[i]) == NULL) {
        g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                    "%s: [%s] unknown parameter '%s' (names as `joulesim "
                    "gpus NAME` lists them)",
                    path, groups[g], keys[i]);
        return FALSE;
      }
  }
  g_auto(GStrv) gkeys = g_key_file_get_keys(kf, "gpu", NULL, NULL);
  static const char *const known[] = {"name", "description", "base",
                                      "n_mem_clocks", NULL};
  for (guint i = 0; gkeys != NULL && gkeys[i] != NULL; i++)
    if (!g_strv_contains(known, gkeys[i])) {
      g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                  "%s: [gpu] unknown key '%s' (name, description, base, "
                  "n_mem_clocks)",
                  path, gkeys[i]);
      return FALSE;
    }
  return TRUE;
}

GpuSpec *gpu_spec_load_keyfile(const char *path, const GpuCatalogue *base,
                               GError **error)
{
  g_return_val_if_fail(path != NULL, NULL);
  g_return_val_if_fail(error == NULL || *error == NULL, NULL);
  g_autoptr(GKeyFile) kf = g_key_file_new();
  GError *err = NULL;
  if (!gpu_file_read(kf, path, error))
    return NULL;
  g_autofree char *name = g_key_file_get_string(kf, "gpu", "name", NULL);
  if (name == NULL || name[0] == '\0') {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "%s: missing [gpu] name", path);
    return NULL;
  }
  g_autofree char *base_name = g_key_file_get_string(kf, "gpu", "base", NULL);
  g_autoptr(GpuSpec) spec = NULL;
  if (base_name != NULL) {
    const GpuSpec *b =
        base != NULL ? gpu_catalogue_lookup(base, base_name, &err) : NULL;
    if (b == NULL) {
      g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID, "%s: [gpu] base: %s",
                  path, err != NULL ? err->message : "no catalogue to look in");
      g_clear_error(&err);
      return NULL;
    }
    spec = gpu_spec_copy(b);
  } else {
    spec = g_new0(GpuSpec, 1);
  }
  g_free(spec->name);
  spec->name = g_strdup(name);
  g_autofree char *desc = g_key_file_get_string(kf, "gpu", "description", NULL);
  if (desc != NULL) {
    g_free(spec->description);
    spec->description = g_steal_pointer(&desc);
  }
  if (g_key_file_has_key(kf, "gpu", "n_mem_clocks", NULL)) {
    gint n = g_key_file_get_integer(kf, "gpu", "n_mem_clocks", &err);
    if (err != NULL || n < 1 || n > GPU_MAX_MEM_CLOCKS) {
      g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                  "%s: [gpu] n_mem_clocks must be an integer in 1..%d", path,
                  GPU_MAX_MEM_CLOCKS);
      g_clear_error(&err);
      return NULL;
    }
    spec->n_mem_clocks = (guint)n;
  } else if (base_name == NULL) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "%s: missing [gpu] n_mem_clocks", path);
    return NULL;
  }
  if (!check_keys(kf, spec, path, error))
    return NULL;
  Ctx x = {kf, spec, path, base_name != NULL};
  if (!each_param(spec->n_mem_clocks, load_one, &x, error))
    return NULL;
  if (!gpu_spec_validate(spec, &err)) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID, "%s: %s", path,
                err->message);
    g_error_free(err);
    return NULL;
  }
  return g_steal_pointer(&spec);
}

static gint cmp_str(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

gboolean gpu_catalogue_load_dir(GpuCatalogue *c, const char *dir,
                                GError **error)
{
  g_return_val_if_fail(c != NULL && dir != NULL, FALSE);
  GError *err = NULL;
  g_autoptr(GDir) d = g_dir_open(dir, 0, &err);
  if (d == NULL) {
    g_set_error(error, GPU_ERROR, GPU_ERROR_INVALID,
                "GPU catalogue directory %s: %s", dir, err->message);
    g_error_free(err);
    return FALSE;
  }
  g_autoptr(GPtrArray) names = g_ptr_array_new_with_free_func(g_free);
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL)
    if (g_str_has_suffix(n, GPU_FILE_EXT))
      g_ptr_array_add(names, g_strdup(n));
  g_ptr_array_sort(names, cmp_str);
  GError *first = NULL;
  for (guint i = 0; i < names->len; i++) {
    g_autofree char *path =
        g_build_filename(dir, (char *)g_ptr_array_index(names, i), NULL);
    g_autoptr(GpuSpec) s = gpu_spec_load_keyfile(path, c, &err);
    if (s == NULL || !gpu_catalogue_define(c, s, &err)) {
      if (first == NULL)
        first = err;
      else
        g_error_free(err);
      err = NULL;
    }
  }
  if (first != NULL) {
    g_propagate_error(error, first);
    return FALSE;
  }
  return TRUE;
}

gboolean gpu_catalogue_load_path(GpuCatalogue *c, const char *path,
                                 GError **error)
{
  g_return_val_if_fail(c != NULL && path != NULL, FALSE);
  g_auto(GStrv) dirs = g_strsplit(path, G_SEARCHPATH_SEPARATOR_S, -1);
  GError *first = NULL;
  for (guint i = 0; dirs[i] != NULL; i++) {
    if (dirs[i][0] == '\0')
      continue;
    GError *err = NULL;
    if (!gpu_catalogue_load_dir(c, dirs[i], &err)) {
      if (first == NULL)
        first = err;
      else
        g_error_free(err);
    }
  }
  if (first != NULL) {
    g_propagate_error(error, first);
    return FALSE;
  }
  return TRUE;
}
