/* tests/fuzz/fuzz-chakra.c -- libFuzzer target: MLCommons Chakra execution
 * traces (traces/chakra.c) through trace_import().
 *
 * Input: FILE [\n--chakra-rank--\n FILE ...]   (at most 4 files)
 * Each FILE is the raw bytes of one rank's .et file (a stream of
 * varint-length-prefixed protobuf messages: a GlobalMetadata, then
 * Nodes), written as trace.K.et so the rank comes from the name.  Here
 * the raw bytes are the right thing to fuzz: the parser's input is the
 * protobuf wire format (decoded by protobuf-c), and everything after the
 * decoding -- node types, dependency ids (missing, self, cyclic),
 * attributes, durations, communication types and peers -- is the
 * importer's to judge.
 *
 * Checks: success with a workload that passes sim_workload_validate, or a
 * TRACE_ERROR naming one of the files.
 */
#include "tests/fuzz/fuzz.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"
#include "models/gpu.h"

#define CHAKRA_SEP "\n--chakra-rank--\n"
#define CHAKRA_MAX_FILES 4

static GpuCatalogue *chakra_catalogue(void)
{
  static GpuCatalogue *cat;
  if (cat == NULL)
    cat = gpu_catalogue_new();
  return cat;
}

static int fuzz_chakra_one(const guint8 *data, size_t size)
{
  g_autoptr(GPtrArray) parts = fuzz_split(data, size, CHAKRA_SEP,
                                          CHAKRA_MAX_FILES);
  g_autoptr(GPtrArray) paths = g_ptr_array_new_with_free_func(g_free);
  for (guint i = 0; i < parts->len; i++) {
    gsize n;
    const guint8 *p = g_bytes_get_data(g_ptr_array_index(parts, i), &n);
    g_autofree char *name = g_strdup_printf("trace.%u.et", i);
    char *path = fuzz_path(name);
    fuzz_write(path, p, n);
    g_ptr_array_add(paths, path);
  }
  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.catalogue = chakra_catalogue();
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  opt.warnings = warnings;
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

FUZZ_TARGET(fuzz_chakra_one)
