/* tests/fuzz/fuzz-h5raw.c -- raw bytes of HDF5 files, as a hostile or
 * damaged file reaches joulesim: the one door of io/h5open.h and the
 * readers behind it.
 *
 * The input's first byte picks the reader, the rest is the file, byte for
 * byte (the seeds are real files: a plain h5py trace, a trace and results
 * files joulesim wrote, so mutations land in superblocks, object headers,
 * B-trees and heaps):
 *
 *   mode % 4 == 0   trace_native_load (js.trace.load, trace info)
 *   mode % 4 == 1   res_table_read of table "runs" (reading back, resume)
 *   mode % 4 == 2   res_table_open "runs" for appending, one row, close
 *                   (js.results, js.sweep, validate --out)
 *   mode % 4 == 3   js_output_check as a results file (the sandbox's and
 *                   the CLI's check before writing)
 *
 * Every input must end in success or a clean error of the module's domain
 * naming the file -- never a crash, hang or leak in this process, whatever
 * libhdf5 does with the bytes in the check's child.  Native traces and
 * results files whose content is well formed are fuzzed by fuzz-native.c
 * and the Lua targets; this target is the format itself.
 */
#include "io/results.h"
#include "run/confine.h"
#include "traces/info.h"
#include "traces/native.h"
#include "tests/fuzz/fuzz.h"

static int fuzz_h5raw_one(const guint8 *data, size_t size)
{
  if (size == 0)
    return 0;
  guint8 mode = data[0];
  g_autofree char *path = fuzz_path("f.h5");
  fuzz_write(path, data + 1, size - 1);
  GError *err = NULL;
  switch (mode % 4) {
  case 0: {
    g_autoptr(SimWorkload) w = trace_native_load(path, &err);
    fuzz_check_outcome("trace_native_load", w != NULL, err,
                       TRACE_NATIVE_ERROR, path);
    if (w != NULL)
      fuzz_check_workload(w);
    break;
  }
  case 1: {
    GPtrArray *rows = res_table_read(path, "runs", &err);
    fuzz_check_outcome("res_table_read", rows != NULL, err, RES_ERROR, path);
    if (rows != NULL)
      g_ptr_array_unref(rows);
    break;
  }
  case 2: {
    ResTable *t = res_table_open(path, "runs", RES_MODE_APPEND, NULL, &err);
    fuzz_check_outcome("res_table_open", t != NULL, err, RES_ERROR, path);
    if (t != NULL) {
      ResValue row[2] = {
        {.name = "label", .type = RES_STRING, .s = "fuzz"},
        {.name = "x", .type = RES_FLOAT, .f = 1.5},
      };
      GError *aerr = NULL;
      gboolean ok = res_table_append(t, row, 2, &aerr);
      fuzz_check_outcome("res_table_append", ok, aerr, RES_ERROR, path);
      g_clear_error(&aerr);
      ok = res_table_close(t, &aerr);
      fuzz_check_outcome("res_table_close", ok, aerr, RES_ERROR, path);
      g_clear_error(&aerr);
    }
    break;
  }
  default: {
    gboolean ok = js_output_check(path, JS_FILE_RESULTS, NULL, &err);
    fuzz_check_outcome("js_output_check", ok, err, JS_CONFINE_ERROR, path);
    break;
  }
  }
  g_clear_error(&err);
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_h5raw_one)
