/* run/inputs.c -- see run/inputs.h. */
#include "run/inputs.h"
#include "run/memory.h"
#include "traces/native.h"

#include <string.h>

/* TraceImportOptions.memory_check: js_memory_check under the --max-memory
 * that `data` points to (a guint64). */
static gboolean inputs_memory_check(gpointer data, guint64 need_bytes,
                                    const char *what, GError **error)
{
  return js_memory_check(*(const guint64 *)data, need_bytes, what, error);
}

SimWorkload *js_inputs_load(const GpuCatalogue *cat, const char *const *paths,
                            guint n, const char *gpu,
                            const TraceImportOptions *how,
                            guint64 max_memory, GPtrArray *warnings,
                            GError **error)
{
  g_return_val_if_fail(n > 0, NULL);
  /* HDF5 content, or an .h5/.hdf5 name, means a native trace (so that a
   * damaged native file gets the native loader's diagnosis). */
  for (guint i = 0; i < n; i++) {
    gboolean native = trace_native_probe(paths[i]) ||
                      g_str_has_suffix(paths[i], ".h5") ||
                      g_str_has_suffix(paths[i], ".hdf5");
    if (native && n == 1)
      return trace_native_load_within(paths[0], js_memory_limit(max_memory),
                                      error);
    if (native) {
      g_set_error(error, TRACE_NATIVE_ERROR, TRACE_NATIVE_ERROR_FORMAT,
                  "%s: a native trace (HDF5) cannot be combined with other "
                  "files; give it alone", paths[i]);
      return NULL;
    }
  }
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  if (how != NULL) {
    opt.step = how->step;
    opt.step_number = how->step_number;
    opt.gpu_only = how->gpu_only;
    opt.memory_check = how->memory_check;
    opt.memory_check_data = how->memory_check_data;
  }
  /* The importers' growing records (Chakra's nodes) under --max-memory,
   * unless the caller brought its own check: a small file must not make a
   * reader allocate gigabytes. */
  if (opt.memory_check == NULL) {
    opt.memory_check = inputs_memory_check;
    opt.memory_check_data = &max_memory;
  }
  opt.catalogue = cat;
  opt.gpu = gpu;
  opt.warnings = warnings;
  return trace_import(paths, n, &opt, error);
}

char *js_inputs_label(const char *const *paths, guint n)
{
  g_autofree char *base = g_path_get_basename(paths[0]);
  if (n > 1)
    return g_strdup_printf("%s+%u", base, n - 1);
  return g_steal_pointer(&base);
}
