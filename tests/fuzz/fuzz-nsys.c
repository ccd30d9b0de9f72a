/* tests/fuzz/fuzz-nsys.c -- libFuzzer target: Nsight Systems SQLite import
 * through trace_import().
 *
 * The input does not become the database file's bytes (fuzzing SQLite's
 * page format is SQLite's business); it becomes the ROWS of a database with
 * the schema `nsys export --type sqlite` writes, which is what
 * traces/nsys.c interprets:
 *
 *   byte 0   which optional tables exist: bit 0 StringIds, 1 MEMCPY,
 *            2 MEMSET, 3 RUNTIME, 4 NVTX_EVENTS, 5 TARGET_INFO_GPU; bit 6
 *            the old kernel schema (the name as text in `name`, no
 *            correlationId); bit 7 NVTX_EVENTS without `textId`
 *   byte 1   import options: bits 0-1 iteration (0 first, 1 second, 2
 *            all, 3 third), bit 2 comm_recorded; bit 3 turns the table
 *            numbered by bits 4-6 (NT_*, when it exists) into a VIEW of its
 *            rows (renamed TABLE_data), bit 7 makes that view a recursive
 *            CTE without end (cross-joined with the rows: rows without
 *            bound, or an endless loop when there are none)
 *   then     records until the input ends (at most 256): a tag byte picks
 *            the table, then one value per column.  A value is a type byte
 *            (integer from the interesting values, NULL, float, text from a
 *            dictionary of real kernel / NVTX / device names, or raw text)
 *            and its payload.  SQLite stores what it is given whatever the
 *            column's declared type, as a foreign tool's export might.
 *
 * Checks: success with a valid workload, or a TRACE_ERROR naming the file;
 * with a view, never success (views are refused: issue 27 finding 8).
 */
#include "tests/fuzz/fuzz.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"
#include "models/gpu.h"

#include <sqlite3.h>

#define NSYS_MAX_ROWS 256

enum {
  NT_STRINGS = 0, NT_KERNEL, NT_MEMCPY, NT_MEMSET, NT_RUNTIME, NT_NVTX,
  NT_GPU, NT_COUNT
};

/* Strings a real export holds: kernel names (NCCL ones decide collective
 * types), NVTX ranges that mark iterations and phases, device names. */
static const char *const nsys_words[] = {
  "ampere_sgemm_128x64_nn",
  "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
  "void at::native::vectorized_elementwise_kernel<4, at::native::"
  "FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::"
  "FillFunctor<float>, at::detail::Array<char*, 1>)",
  "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
  "<c10::BFloat16, float>(int, float, c10::BFloat16 const*)",
  "softmax_warp_forward",
  "flash_fwd_kernel",
  "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
  "ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, "
  "ncclWork*)",
  "ncclKernel_ReduceScatter_RING_LL_Sum_half",
  "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
  "ncclKernel_Broadcast_RING_LL_Sum_int8_t",
  "ncclDevKernel_AllToAll",
  "ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#-1",
  "ProfilerStep#99999999999999999999", "iteration 2", "step 3",
  "## forward ##", "## backward ##", "Optimizer.step#SGD.step",
  "autograd::engine::evaluate_function: MmBackward0",
  "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA A40",
  "Tesla V100-SXM2-16GB", "", "cudaLaunchKernel", "x",
};

/* One value bound to parameter i of st.  hint: 0 time, 1 small id, 2 text
 * (a name), 3 string id (an integer that is often a StringIds id). */
static void nsys_bind(FuzzIn *in, sqlite3_stmt *st, int i, int hint)
{
  guint8 t = fuzz_u8(in);
  switch (t >> 5) {
  case 0:
  case 1:
  case 2:
    /* The column's natural type. */
    if (hint == 2) {
      sqlite3_bind_text(st, i, nsys_words[t % G_N_ELEMENTS(nsys_words)], -1,
                        SQLITE_STATIC);
    } else if (hint == 3) {
      sqlite3_bind_int64(st, i, t % 32);
    } else if (hint == 1) {
      sqlite3_bind_int64(st, i, (t & 1) ? fuzz_int(in) : (t >> 1) % 8);
    } else {
      /* Times: mostly increasing small values, sometimes extremes. */
      sqlite3_bind_int64(st, i, (t & 3) == 3 ? fuzz_int(in)
                                             : 1000 + (gint64)fuzz_u16(in));
    }
    return;
  case 3:
    sqlite3_bind_null(st, i);
    return;
  case 4:
    sqlite3_bind_int64(st, i, fuzz_int(in));
    return;
  case 5:
    sqlite3_bind_double(st, i, fuzz_double(in));
    return;
  case 6:
    sqlite3_bind_text(st, i, nsys_words[t % G_N_ELEMENTS(nsys_words)], -1,
                      SQLITE_STATIC);
    return;
  default: {
    char *s = fuzz_str(in, 200);
    sqlite3_bind_text(st, i, s, -1, g_free);
    return;
  }
  }
}

static void nsys_exec(sqlite3 *db, const char *sql)
{
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  FUZZ_CHECK(rc == SQLITE_OK, "sqlite: %s: %s", sql, msg);
}

static const char *const nsys_tables[NT_COUNT] = {
  "StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
  "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS",
  "TARGET_INFO_GPU"};

/* Writes the database described by the input to path; `o` is the options
 * byte (its view bits).  Returns TRUE when it made a table a view. */
static gboolean nsys_make_db(FuzzIn *in, guint8 tables, guint8 o,
                             const char *path)
{
  sqlite3 *db = NULL;
  FUZZ_CHECK(sqlite3_open_v2(path, &db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                             NULL) == SQLITE_OK, "cannot create %s", path);
  nsys_exec(db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; BEGIN");
  gboolean old = (tables & 0x40) != 0;
  static const char *const create[NT_COUNT] = {
    "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT)",
    NULL,
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER, end INTEGER, "
    "deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId "
    "INTEGER, globalPid INTEGER, bytes INTEGER, copyKind INTEGER, srcKind "
    "INTEGER, dstKind INTEGER)",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER, "
    "deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId "
    "INTEGER, globalPid INTEGER, value INTEGER, bytes INTEGER)",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER, end INTEGER, "
    "eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId "
    "INTEGER, returnValue INTEGER, callchainId INTEGER)",
    NULL,
    "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER, id INTEGER, name TEXT, "
    "busLocation TEXT, totalMemory INTEGER)",
  };
  static const int bit[NT_COUNT] = {0, -1, 1, 2, 3, 4, 5};
  static const char *const insert[NT_COUNT] = {
    "INSERT OR IGNORE INTO StringIds (id, value) VALUES (?, ?)",
    NULL,
    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start, end, deviceId, "
    "streamId, correlationId, copyKind) VALUES (?, ?, ?, ?, ?, ?)",
    "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId, "
    "streamId, correlationId) VALUES (?, ?, ?, ?, ?)",
    "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, end, correlationId) "
    "VALUES (?, ?, ?)",
    NULL,
    "INSERT INTO TARGET_INFO_GPU (id, name) VALUES (?, ?)",
  };
  /* Column hints per table (see nsys_bind). */
  static const int hints_new_kernel[] = {0, 0, 1, 1, 1, 3, 3};
  static const int hints_old_kernel[] = {0, 0, 1, 1, 2};
  static const int hints[NT_COUNT][6] = {
    {1, 2}, {0}, {0, 0, 1, 1, 1, 1}, {0, 0, 1, 1, 1}, {0, 0, 1},
    {0, 0, 2, 3}, {1, 2}};
  static const int n_cols[NT_COUNT] = {2, 0, 6, 5, 3, 0, 2};

  sqlite3_stmt *ins[NT_COUNT] = {NULL};
  for (int t = 0; t < NT_COUNT; t++) {
    const char *c = create[t], *i = insert[t];
    if (t == NT_KERNEL) {
      c = old ? "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end "
                "INTEGER, deviceId INTEGER, streamId INTEGER, name TEXT)"
              : "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end "
                "INTEGER, deviceId INTEGER, contextId INTEGER, streamId "
                "INTEGER, correlationId INTEGER, globalPid INTEGER, "
                "demangledName INTEGER, shortName INTEGER, mangledName "
                "INTEGER, gridX INTEGER, registersPerThread INTEGER)";
      i = old ? "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, "
                "deviceId, streamId, name) VALUES (?, ?, ?, ?, ?)"
              : "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, "
                "deviceId, streamId, correlationId, demangledName, "
                "shortName) VALUES (?, ?, ?, ?, ?, ?, ?)";
    } else if (t == NT_NVTX) {
      gboolean no_textid = (tables & 0x80) != 0;
      c = no_textid
              ? "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, "
                "eventType INTEGER, rangeId INTEGER, text TEXT, globalTid "
                "INTEGER)"
              : "CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, "
                "eventType INTEGER, rangeId INTEGER, category INTEGER, color "
                "INTEGER, text TEXT, globalTid INTEGER, endGlobalTid "
                "INTEGER, textId INTEGER, domainId INTEGER)";
      i = no_textid ? "INSERT INTO NVTX_EVENTS (start, end, text) VALUES "
                      "(?, ?, ?)"
                    : "INSERT INTO NVTX_EVENTS (start, end, text, textId) "
                      "VALUES (?, ?, ?, ?)";
    } else if (!(tables & (1u << bit[t]))) {
      continue;
    }
    nsys_exec(db, c);
    FUZZ_CHECK(sqlite3_prepare_v2(db, i, -1, &ins[t], NULL) == SQLITE_OK,
               "sqlite: %s: %s", i, sqlite3_errmsg(db));
  }
  for (guint row = 0; row < NSYS_MAX_ROWS && in->n > 0; row++) {
    int t = fuzz_u8(in) % NT_COUNT;
    if (ins[t] == NULL)
      continue;
    int n = n_cols[t];
    const int *h = hints[t];
    if (t == NT_KERNEL) {
      n = old ? 5 : 7;
      h = old ? hints_old_kernel : hints_new_kernel;
    } else if (t == NT_NVTX && (tables & 0x80)) {
      n = 3;
    } else if (t == NT_NVTX) {
      n = 4;
    }
    for (int c = 0; c < n; c++)
      nsys_bind(in, ins[t], c + 1, h[c]);
    sqlite3_step(ins[t]); /* a constraint failure just drops the row */
    sqlite3_reset(ins[t]);
    sqlite3_clear_bindings(ins[t]);
  }
  int vt = (o >> 4) & 7;
  gboolean view = (o & 8) != 0 && vt < NT_COUNT && ins[vt] != NULL;
  for (int t = 0; t < NT_COUNT; t++)
    sqlite3_finalize(ins[t]);
  if (view) {
    const char *name = nsys_tables[vt];
    g_autofree char *sql = g_strdup_printf(
        (o & 0x80) ? "ALTER TABLE %s RENAME TO %s_data; CREATE VIEW %s AS "
                     "WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n+1 "
                     "FROM c) SELECT d.* FROM c, %s_data d"
                   : "ALTER TABLE %s RENAME TO %s_data; CREATE VIEW %s AS "
                     "SELECT * FROM %s_data",
        name, name, name, name);
    nsys_exec(db, sql);
  }
  nsys_exec(db, "COMMIT");
  FUZZ_CHECK(sqlite3_close(db) == SQLITE_OK, "sqlite close");
  return view;
}

static GpuCatalogue *nsys_catalogue(void)
{
  static GpuCatalogue *cat;
  if (cat == NULL)
    cat = gpu_catalogue_new();
  return cat;
}

static int fuzz_nsys_one(const guint8 *data, size_t size)
{
  FuzzIn in = {data, size};
  guint8 tables = fuzz_u8(&in);
  guint8 o = fuzz_u8(&in);
  g_autofree char *path = fuzz_path("report.sqlite");
  gboolean view = nsys_make_db(&in, tables, o, path);

  TraceImportOptions opt;
  memset(&opt, 0, sizeof opt);
  opt.catalogue = nsys_catalogue();
  static const gint iters[] = {0, 1, TRACE_ITERATION_ALL, 2};
  opt.iteration = iters[o & 3];
  opt.comm_recorded = (o & 4) != 0;
  g_autoptr(GPtrArray) warnings = g_ptr_array_new_with_free_func(g_free);
  opt.warnings = warnings;
  GError *err = NULL;
  const char *paths[] = {path};
  g_autoptr(SimWorkload) w = trace_import(paths, 1, &opt, &err);
  fuzz_check_outcome("trace_import", w != NULL, err, TRACE_ERROR, path);
  FUZZ_CHECK(!view || w == NULL, "a database with a view was imported");
  if (w != NULL)
    fuzz_check_workload(w);
  g_clear_error(&err);
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_nsys_one)
