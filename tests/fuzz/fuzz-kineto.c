/* tests/fuzz/fuzz-kineto.c -- libFuzzer target: Kineto / Chrome-trace JSON
 * import through trace_import(), the function `joulesim trace import` and
 * js.trace.import use.
 *
 * Input: [#OPTIONS\n] FILE [\n--rank--\n FILE ...]   (at most 8 files)
 *  - OPTIONS (optional first line starting with '#'): space-separated
 *    `all` (iteration = TRACE_ITERATION_ALL), `iter=N` (0..99), `comm`
 *    (comm_recorded), `gpu=NAME` (fallback GPU; an unknown name is an
 *    error the importer must report).
 *  - each FILE is one rank's trace, written to rankK.json; a FILE whose
 *    first byte is NUL is the gzip of the rest (rankK.json.gz), so the
 *    gzread path sees fuzzed JSON inside a valid gzip stream.
 * Several files exercise the cross-rank builder: collective matching by
 * process group, send/recv pairing, the fallback to recorded durations.
 *
 * Checks: success with a workload that passes sim_workload_validate (and
 * whose trace_info summary can be computed), or a TRACE_ERROR naming one of
 * the files; no crash, leak or undefined behaviour (sanitizers).
 */
#include "tests/fuzz/fuzz.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"
#include "models/gpu.h"

#include <zlib.h>

#define KINETO_SEP "\n--rank--\n"
#define KINETO_MAX_FILES 8

/* The catalogue is read-only and costly to build: one per process. */
static GpuCatalogue *kineto_catalogue(void)
{
  static GpuCatalogue *cat;
  if (cat == NULL)
    cat = gpu_catalogue_new();
  return cat;
}

/* Parses the options line into opt (gpu copied into *gpu_out). */
static void kineto_options(const char *line, size_t len,
                           TraceImportOptions *opt, char **gpu_out)
{
  g_autofree char *s = g_strndup(line, len);
  g_auto(GStrv) tok = g_strsplit(s, " ", 16);
  for (guint i = 0; tok[i] != NULL; i++) {
    if (strcmp(tok[i], "all") == 0)
      opt->iteration = TRACE_ITERATION_ALL;
    else if (g_str_has_prefix(tok[i], "iter="))
      opt->iteration = (gint)(g_ascii_strtoull(tok[i] + 5, NULL, 10) % 100);
    else if (strcmp(tok[i], "comm") == 0)
      opt->comm_recorded = TRUE;
    else if (g_str_has_prefix(tok[i], "gpu=")) {
      g_free(*gpu_out);
      *gpu_out = g_strdup(tok[i] + 4);
    }
  }
  opt->gpu = *gpu_out;
}

/* gzip of data (a valid stream). */
static GBytes *kineto_gzip(const guint8 *data, size_t n)
{
  z_stream z;
  memset(&z, 0, sizeof z);
  FUZZ_CHECK(deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8,
                          Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit2");
  uLong bound = deflateBound(&z, (uLong)n);
  guint8 *out = g_malloc(bound);
  z.next_in = (Bytef *)data;
  z.avail_in = (uInt)n;
  z.next_out = out;
  z.avail_out = (uInt)bound;
  FUZZ_CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
  size_t len = z.total_out;
  deflateEnd(&z);
  return g_bytes_new_take(out, len);
}

static int fuzz_kineto_one(const guint8 *data, size_t size)
{
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.catalogue = kineto_catalogue();
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  opt.warnings = warnings;
  g_autofree char *gpu = NULL;
  if (size > 0 && data[0] == '#') {
    const guint8 *nl = memchr(data, '\n', size);
    size_t len = nl != NULL ? (size_t)(nl - data) : size;
    kineto_options((const char *)data + 1, len - 1, &opt, &gpu);
    size_t skip = nl != NULL ? len + 1 : len;
    data += skip;
    size -= skip;
  }
  g_autoptr(GPtrArray) parts = fuzz_split(data, size, KINETO_SEP,
                                          KINETO_MAX_FILES);
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < parts->len; i++) {
    gsize n;
    const guint8 *p = g_bytes_get_data(g_ptr_array_index(parts, i), &n);
    g_autofree char *name = NULL;
    if (n > 0 && p[0] == '\0') {
      g_autoptr(GBytes) gz = kineto_gzip(p + 1, n - 1);
      name = g_strdup_printf("rank%u.json.gz", i);
      char *path = fuzz_path(name);
      gsize gn;
      const void *gp = g_bytes_get_data(gz, &gn);
      fuzz_write(path, gp, gn);
      g_ptr_array_add(paths, path);
    } else {
      name = g_strdup_printf("rank%u.json", i);
      char *path = fuzz_path(name);
      fuzz_write(path, p, n);
      g_ptr_array_add(paths, path);
    }
  }
  GError *err = NULL;
  g_autoptr(SimWorkload) w = trace_import(
      (const char *const *)paths->pdata, paths->len, &opt, &err);
  fuzz_check_outcome("trace_import", w != NULL, err, TRACE_ERROR,
                     fuzz_tmpdir());
  if (w != NULL)
    fuzz_check_workload(w);
  g_clear_error(&err);
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_kineto_one)
