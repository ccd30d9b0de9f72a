/* traces/nsys.c -- reader of Nsight Systems SQLite exports
 * (`nsys export --type sqlite report.nsys-rep`).
 *
 * Tables read (names from the nsys export schema; columns vary between
 * versions, so each table's columns are read with PRAGMA table_info and the
 * query is built from what exists):
 *
 *   CUPTI_ACTIVITY_KIND_KERNEL   start, end (ns), deviceId, streamId,
 *                                correlationId, and the name: the first of
 *                                demangledName, shortName, mangledName, name
 *                                (an id into StringIds, or the text itself)
 *   CUPTI_ACTIVITY_KIND_MEMCPY   start, end, deviceId, streamId,
 *                                correlationId, copyKind -> "Memcpy HtoD"...
 *   CUPTI_ACTIVITY_KIND_MEMSET   start, end, deviceId, streamId,
 *                                correlationId -> "Memset"
 *   CUPTI_ACTIVITY_KIND_RUNTIME  correlationId, start, end, globalTid,
 *                                nameId: the runtime calls (launch times,
 *                                host streams; a negative duration counts
 *                                as unknown)
 *   NVTX_EVENTS                  start, end, text or textId: iteration
 *                                ranges ("ProfilerStep#N", "iteration N",
 *                                "step N") and phase ranges (see
 *                                traces/classify.c)
 *   StringIds                    id, value
 *   TARGET_INFO_GPU              id, name: device names
 *
 * Only the kernel table is required; a file without it is an error.  Every
 * GPU device with activity becomes one raw rank (ranks ordered by file, then
 * device id).  Limits: the export records no NCCL arguments, so NCCL
 * kernels replay at their recorded durations (one-rank groups; their type
 * comes from the kernel name); cross-stream event waits are not read
 * (stream order only); launch correlation ids are assumed unique within a
 * file (one profiled process per file, as nsys writes one per rank).
 *
 * Hostile files (docs/bad-input.md).  A database is a program as much as
 * data, so the reader bounds what it lets one do:
 *   - The file is opened once (io/input.h) and SQLite is given the URI
 *     "file:/proc/self/fd/N?immutable=1" with SQLITE_OPEN_URI: the open file
 *     and nothing else, whatever the name looks like (a name such as
 *     "file:..%2Fx.sqlite" is the literal local file, not a URI that SQLite
 *     would decode to ../x.sqlite), read-only, with no journal or lock files.
 *   - Every table read must be a table: a VIEW (which can compute rows
 *     without end, e.g. a recursive CTE) is refused by name.
 *   - Rows read, in all tables together, are at most one per NSYS_ROW_BYTES
 *     bytes of the file (a stored row takes more than that), so a join that
 *     multiplies rows is refused before it allocates; SQLite's own work is
 *     bounded by a progress handler at NSYS_STEPS_PER_BYTE virtual-machine
 *     steps per byte (plus NSYS_STEPS_BASE); a value longer than
 *     NSYS_MAX_VALUE bytes is refused by SQLite itself.
 *   - Runtime calls and ranges are copied to every device's rank: their
 *     product with the device count is bounded (NSYS_MAX_COPIES).
 */
#include "traces/import-private.h"
#include "io/fault.h"
#include "io/input.h"
#include "traces/classify.h"

#include <errno.h>
#include <sqlite3.h>
#include <string.h>

/* A stored SQLite row takes at least a cell pointer (2 bytes), a payload
 * length, a rowid and a record header (1 byte each): more than 4 bytes. */
#define NSYS_ROW_BYTES 4
/* SQLite virtual-machine steps allowed per byte of the file, and in all:
 * a real export needs a few hundred steps per row; a crafted one that
 * makes SQLite loop is stopped after about a second per MB. */
#define NSYS_STEPS_PER_BYTE 1000
#define NSYS_STEPS_BASE 100000000
#define NSYS_PROGRESS_PERIOD 10000
/* The longest string or blob SQLite may build (SQLITE_LIMIT_LENGTH). */
#define NSYS_MAX_VALUE (16 << 20)
/* Launch and range records copied to the ranks of a multi-device file, at
 * most: NSYS_MAX_COPIES per readable row. */
#define NSYS_MAX_COPIES 64

typedef struct {
  const char *path;
  sqlite3 *db;
  gboolean has_strings;
  gint64 size;            /* of the file, bytes */
  guint64 rows_left;      /* rows that may still be read (all tables) */
  guint64 steps_left;     /* SQLite VM steps still allowed */
  gboolean over_work;     /* the progress handler stopped a query */
} Nsys;

/* SQLite's progress handler: interrupts the query (SQLITE_INTERRUPT) once
 * the work allowed for the file is spent. */
static int nsys_progress(void *data)
{
  Nsys *s = data;
  if (s->steps_left < NSYS_PROGRESS_PERIOD) {
    s->over_work = TRUE;
    return 1;
  }
  s->steps_left -= NSYS_PROGRESS_PERIOD;
  return 0;
}

static gboolean db_error(Nsys *s, const char *what, GError **error)
{
  if (s->over_work) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: %s: more work than a %" G_GINT64_FORMAT "-byte "
                "database can need (a crafted file?)", s->path, what,
                s->size);
    return FALSE;
  }
  int code = sqlite3_errcode(s->db);
  g_set_error(error, TRACE_ERROR,
              code == SQLITE_NOTADB || code == SQLITE_CORRUPT
                  ? TRACE_ERROR_FORMAT : TRACE_ERROR_IO,
              "%s: %s: %s", s->path, what, sqlite3_errmsg(s->db));
  return FALSE;
}

/* Counts one row read from `table`: FALSE with an error once the file's
 * rows are spent (NSYS_ROW_BYTES). */
static gboolean count_row(Nsys *s, const char *table, GError **error)
{
  if (s->rows_left == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: %s: more rows than a %" G_GINT64_FORMAT "-byte "
                "database can hold (a crafted file?)", s->path, table,
                s->size);
    return FALSE;
  }
  s->rows_left--;
  return TRUE;
}

/* Does table `t` exist?  -1 on a database error, and for a view of that
 * name (refused: a view computes its rows, without bound). */
static int table_exists(Nsys *s, const char *t, GError **error)
{
  sqlite3_stmt *st = NULL;
  if (fault_inject(FAULT_READ, "nsys: query")) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: looking up table "
                "%s: %s (injected fault)", s->path, t, g_strerror(EIO));
    return -1;
  }
  /* Names are case-insensitive in SQL; anything but a table that answers
   * to the name (a view; a trigger or an index cannot be selected from)
   * is refused. */
  if (sqlite3_prepare_v2(s->db,
                         "SELECT type = 'table' FROM sqlite_master WHERE "
                         "type IN ('table','view') AND name = ? COLLATE "
                         "NOCASE ORDER BY type = 'table' LIMIT 1", -1, &st,
                         NULL) != SQLITE_OK) {
    db_error(s, "not a readable SQLite database", error);
    return -1;
  }
  sqlite3_bind_text(st, 1, t, -1, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  gboolean is_table = rc == SQLITE_ROW && sqlite3_column_int(st, 0) != 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    db_error(s, "not a readable SQLite database", error);
    return -1;
  }
  if (rc == SQLITE_ROW && !is_table) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: %s is a view, not a table (refused: an Nsight Systems "
                "export has no views, and a view can compute rows without "
                "end)", s->path, t);
    return -1;
  }
  return rc == SQLITE_ROW;
}

/* Column names of table t (a set). */
static GHashTable *table_columns(Nsys *s, const char *t, GError **error)
{
  g_autofree char *sql = g_strdup_printf("PRAGMA table_info(\"%s\")", t);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK) {
    db_error(s, t, error);
    return NULL;
  }
  GHashTable *cols = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                           NULL);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const unsigned char *n = sqlite3_column_text(st, 1);
    if (n != NULL)
      g_hash_table_add(cols, g_strdup((const char *)n));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) {
    g_hash_table_unref(cols);
    db_error(s, t, error);
    return NULL;
  }
  return cols;
}

/* "x.col" when the column exists, else `dflt` (an SQL literal). */
static const char *col_or(GHashTable *cols, const char *col, const char *dflt,
                          GString *buf)
{
  if (g_hash_table_contains(cols, col)) {
    g_string_append_printf(buf, "x.\"%s\"", col);
    return buf->str;
  }
  g_string_append(buf, dflt);
  return buf->str;
}

/* Per-device raw ranks of one file, created on first activity. */
typedef struct {
  Nsys *s;
  SimWorkload *names;
  GHashTable *by_device;   /* gint64* -> TraceRawRank* (borrowed) */
  GPtrArray *ranks;        /* TraceRawRank*, owned */
} Devices;

static TraceRawRank *device_rank(Devices *d, gint64 dev)
{
  TraceRawRank *r = g_hash_table_lookup(d->by_device, &dev);
  if (r == NULL) {
    r = trace_raw_rank_new(d->s->path);
    g_hash_table_insert(d->by_device, g_memdup2(&dev, sizeof dev), r);
    g_ptr_array_add(d->ranks, r);
  }
  return r;
}

static const char *memcpy_name(gint64 kind)
{
  /* CUPTI_ACTIVITY_MEMCPY_KIND values. */
  switch (kind) {
  case 1: return "Memcpy HtoD";
  case 2: return "Memcpy DtoH";
  case 3: return "Memcpy HtoA";
  case 4: return "Memcpy AtoH";
  case 5: return "Memcpy AtoA";
  case 6: return "Memcpy AtoD";
  case 7: return "Memcpy DtoA";
  case 8: return "Memcpy DtoD";
  case 9: return "Memcpy HtoH";
  case 10: return "Memcpy PtoP";
  default: return "Memcpy";
  }
}

/* The query of an activity table: start, end, device, stream,
 * correlation id, the name column (kernels: the best of the demangled,
 * short and mangled names; copies: the copy kind) and, where names are
 * string ids, the joined string. */
static char *activity_query(const Nsys *s, const char *table,
                            TraceRawKind kind, GHashTable *cols)
{
  GString *sql = g_string_new("SELECT x.start, x.\"end\", ");
  g_autoptr(GString) tmp = g_string_new(NULL);
  g_string_append_printf(sql, "%s, ", col_or(cols, "deviceId", "0", tmp));
  g_string_truncate(tmp, 0);
  g_string_append_printf(sql, "%s, ", col_or(cols, "streamId", "0", tmp));
  g_string_truncate(tmp, 0);
  g_string_append_printf(sql, "%s, ",
                         col_or(cols, "correlationId", "NULL", tmp));
  g_string_truncate(tmp, 0);
  const char *name_col = NULL;
  if (kind == TRACE_RAW_KERNEL) {
    static const char *const cands[] = {"demangledName", "shortName",
                                        "mangledName", "name"};
    for (gsize i = 0; i < G_N_ELEMENTS(cands) && name_col == NULL; i++)
      if (g_hash_table_contains(cols, cands[i]))
        name_col = cands[i];
  } else if (kind == TRACE_RAW_MEMCPY &&
             g_hash_table_contains(cols, "copyKind")) {
    name_col = "copyKind";
  }
  gboolean join = kind == TRACE_RAW_KERNEL && name_col != NULL &&
                  s->has_strings;
  if (name_col != NULL)
    g_string_append_printf(sql, "x.\"%s\", %s", name_col,
                           join ? "s.value" : "NULL");
  else
    g_string_append(sql, "NULL, NULL");
  g_string_append_printf(sql, " FROM \"%s\" x", table);
  if (join)
    g_string_append_printf(sql, " LEFT JOIN StringIds s ON s.id = x.\"%s\"",
                           name_col);
  return g_string_free(sql, FALSE);
}

/* Reads one activity table.  kind: TraceRawKind. */
static gboolean read_activity(Devices *d, const char *table, TraceRawKind kind,
                              GError **error)
{
  Nsys *s = d->s;
  g_autoptr(GHashTable) cols = table_columns(s, table, error);
  if (cols == NULL)
    return FALSE;
  if (!g_hash_table_contains(cols, "start") ||
      !g_hash_table_contains(cols, "end")) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: table %s has no start/end columns", s->path, table);
    return FALSE;
  }
  g_autofree char *q = activity_query(s, table, kind, cols);
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, q, -1, &st, NULL) != SQLITE_OK)
    return db_error(s, table, error);
  int rc;
  guint64 row = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    row++;
    if (!count_row(s, table, error)) {
      sqlite3_finalize(st);
      return FALSE;
    }
    for (int c = 0; c < 2; c++) {
      int t = sqlite3_column_type(st, c);
      if (t != SQLITE_INTEGER && t != SQLITE_FLOAT) {
        sqlite3_finalize(st);
        g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                    "%s: %s row %" G_GUINT64_FORMAT ": %s is %s, not a "
                    "time in ns", s->path, table, row, c ? "end" : "start",
                    t == SQLITE_NULL ? "NULL" : "text");
        return FALSE;
      }
    }
    gint64 t0 = sqlite3_column_int64(st, 0);
    gint64 t1 = sqlite3_column_int64(st, 1);
    /* Nsight times count from the session start: a negative start is
     * damage, and refusing it keeps t1 - t0 from overflowing. */
    if (t0 < 0) {
      sqlite3_finalize(st);
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: %s row %" G_GUINT64_FORMAT ": start %" G_GINT64_FORMAT
                  " is negative", s->path, table, row, t0);
      return FALSE;
    }
    if (t1 < t0) {
      sqlite3_finalize(st);
      g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                  "%s: %s row %" G_GUINT64_FORMAT ": end %" G_GINT64_FORMAT
                  " before start %" G_GINT64_FORMAT, s->path, table, row, t1,
                  t0);
      return FALSE;
    }
    TraceRawOp op = {0};
    op.ts_ns = t0;
    op.dur_ns = t1 - t0;
    op.launch_ns = t0;
    op.device = sqlite3_column_int64(st, 2);
    op.stream = sqlite3_column_int64(st, 3);
    op.corr = sqlite3_column_type(st, 4) == SQLITE_NULL
                  ? -1 : sqlite3_column_int64(st, 4);
    op.kind = (guint8)kind;
    op.comm = G_MAXUINT32;
    op.work = G_MAXUINT32;
    const char *name;
    if (kind == TRACE_RAW_KERNEL) {
      const unsigned char *v = sqlite3_column_text(st, 6);
      if (v == NULL)
        v = sqlite3_column_text(st, 5);
      name = v != NULL ? (const char *)v : "(unnamed kernel)";
    } else if (kind == TRACE_RAW_MEMCPY) {
      name = memcpy_name(sqlite3_column_type(st, 5) == SQLITE_NULL
                             ? 0 : sqlite3_column_int64(st, 5));
    } else {
      name = "Memset";
    }
    op.name = sim_workload_intern(d->names, name);
    TraceRawRank *r = device_rank(d, op.device);
    if (kind == TRACE_RAW_KERNEL && trace_is_nccl_kernel(name)) {
      TraceRawComm c = {0};
      TraceCommKind ck;
      SimCollType cc;
      trace_comm_from_kernel_name(name, &ck, &cc);
      c.kind = (guint8)ck;
      c.coll = (guint8)cc;
      c.peer = -1;
      c.group_size = -1;
      g_array_append_val(r->comms, c);
      op.comm = r->comms->len - 1;
    }
    g_array_append_val(r->ops, op);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return db_error(s, table, error);
  return TRUE;
}

/* Runtime calls from the runtime API table (shared by all devices): the
 * correlation id and start always; end, globalTid and the call's name
 * (nameId into StringIds) when the export has them (host streams,
 * traces/import.c). */
static gboolean read_launches(Nsys *s, SimWorkload *names, GArray *out,
                              GError **error)
{
  int ex = table_exists(s, "CUPTI_ACTIVITY_KIND_RUNTIME", error);
  if (ex <= 0)
    return ex == 0;
  g_autoptr(GHashTable) cols = table_columns(s, "CUPTI_ACTIVITY_KIND_RUNTIME",
                                             error);
  if (cols == NULL)
    return FALSE;
  if (!g_hash_table_contains(cols, "correlationId") ||
      !g_hash_table_contains(cols, "start"))
    return TRUE;
  gboolean has_end = g_hash_table_contains(cols, "end");
  gboolean has_tid = g_hash_table_contains(cols, "globalTid");
  gboolean has_name = g_hash_table_contains(cols, "nameId") && s->has_strings;
  g_autofree char *sql = g_strdup_printf(
      "SELECT r.correlationId, r.start, %s, %s, %s FROM "
      "CUPTI_ACTIVITY_KIND_RUNTIME r%s WHERE r.correlationId IS NOT NULL "
      "AND r.start IS NOT NULL",
      has_end ? "r.\"end\"" : "NULL", has_tid ? "r.globalTid" : "NULL",
      has_name ? "n.value" : "NULL",
      has_name ? " LEFT JOIN StringIds n ON n.id = r.nameId" : "");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(s, "CUPTI_ACTIVITY_KIND_RUNTIME", error);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!count_row(s, "CUPTI_ACTIVITY_KIND_RUNTIME", error)) {
      sqlite3_finalize(st);
      return FALSE;
    }
    TraceRawLaunch l = {sqlite3_column_int64(st, 0),
                        sqlite3_column_int64(st, 1), -1, -1, -1, 0,
                        TRACE_CALL_OTHER};
    if (sqlite3_column_type(st, 2) != SQLITE_NULL) {
      gint64 end = sqlite3_column_int64(st, 2);
      /* A negative or absurd duration is unknown (the builder counts it). */
      /* (unsigned: end - start of two gint64 can overflow gint64) */
      guint64 d = (guint64)end - (guint64)l.ts_ns;
      l.dur_ns = end >= l.ts_ns && d < ((guint64)1 << 62) ? (gint64)d : -1;
    }
    if (sqlite3_column_type(st, 3) != SQLITE_NULL)
      l.tid = sqlite3_column_int64(st, 3);
    const unsigned char *nm = sqlite3_column_text(st, 4);
    if (nm != NULL) {
      l.name = sim_workload_intern(names, (const char *)nm);
      l.call = (guint8)trace_runtime_call((const char *)nm);
    } else {
      l.name = sim_workload_intern(names, "(runtime call)");
    }
    g_array_append_val(out, l);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return db_error(s, "CUPTI_ACTIVITY_KIND_RUNTIME", error);
  return TRUE;
}

/* Iteration and phase ranges from NVTX push/pop and start/end ranges. */
static gboolean read_nvtx(Nsys *s, GArray *out, GError **error)
{
  int ex = table_exists(s, "NVTX_EVENTS", error);
  if (ex <= 0)
    return ex == 0;
  g_autoptr(GHashTable) cols = table_columns(s, "NVTX_EVENTS", error);
  if (cols == NULL)
    return FALSE;
  if (!g_hash_table_contains(cols, "start") ||
      !g_hash_table_contains(cols, "end"))
    return TRUE;
  gboolean text = g_hash_table_contains(cols, "text");
  gboolean tid = g_hash_table_contains(cols, "textId") && s->has_strings;
  if (!text && !tid)
    return TRUE;
  g_autofree char *sql = g_strdup_printf(
      "SELECT x.start, x.\"end\", %s, %s FROM NVTX_EVENTS x%s "
      "WHERE x.\"end\" IS NOT NULL AND x.\"end\" > x.start",
      text ? "x.text" : "NULL", tid ? "s.value" : "NULL",
      tid ? " LEFT JOIN StringIds s ON s.id = x.textId" : "");
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
    return db_error(s, "NVTX_EVENTS", error);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!count_row(s, "NVTX_EVENTS", error)) {
      sqlite3_finalize(st);
      return FALSE;
    }
    const unsigned char *v = sqlite3_column_text(st, 2);
    if (v == NULL)
      v = sqlite3_column_text(st, 3);
    if (v == NULL)
      continue;
    TraceRawRange r = {sqlite3_column_int64(st, 0),
                       sqlite3_column_int64(st, 1), -1, -1, -1};
    if (!trace_parse_step((const char *)v, &r.step)) {
      r.step = -1;
      r.phase = trace_phase_of_annotation((const char *)v);
      if (r.phase < 0)
        continue;
    }
    g_array_append_val(out, r);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return db_error(s, "NVTX_EVENTS", error);
  return TRUE;
}

/* Device names (TARGET_INFO_GPU id -> name) into every rank's table. */
static gboolean read_devices(Nsys *s, GHashTable *out, GError **error)
{
  int ex = table_exists(s, "TARGET_INFO_GPU", error);
  if (ex <= 0)
    return ex == 0;
  g_autoptr(GHashTable) cols = table_columns(s, "TARGET_INFO_GPU", error);
  if (cols == NULL)
    return FALSE;
  if (!g_hash_table_contains(cols, "id") ||
      !g_hash_table_contains(cols, "name"))
    return TRUE;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(s->db, "SELECT id, name FROM TARGET_INFO_GPU", -1,
                         &st, NULL) != SQLITE_OK)
    return db_error(s, "TARGET_INFO_GPU", error);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (!count_row(s, "TARGET_INFO_GPU", error)) {
      sqlite3_finalize(st);
      return FALSE;
    }
    const unsigned char *n = sqlite3_column_text(st, 1);
    if (n == NULL || sqlite3_column_type(st, 0) == SQLITE_NULL)
      continue;
    gint64 id = sqlite3_column_int64(st, 0);
    g_hash_table_insert(out, g_memdup2(&id, sizeof id),
                        g_strdup((const char *)n));
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE)
    return db_error(s, "TARGET_INFO_GPU", error);
  return TRUE;
}

static int cmp_rank_device(gconstpointer a, gconstpointer b)
{
  const TraceRawRank *x = *(TraceRawRank *const *)a;
  const TraceRawRank *y = *(TraceRawRank *const *)b;
  gint64 dx = x->ops->len > 0 ? g_array_index(x->ops, TraceRawOp, 0).device
                              : 0;
  gint64 dy = y->ops->len > 0 ? g_array_index(y->ops, TraceRawOp, 0).device
                              : 0;
  return dx < dy ? -1 : dx > dy;
}

gboolean trace_nsys_read(const char *path, SimWorkload *names, GPtrArray *out,
                         GError **error)
{
  g_return_val_if_fail(path != NULL && names != NULL && out != NULL, FALSE);
  Nsys s = {path, NULL, FALSE, 0, 0, 0, FALSE};
  IoInput in;
  if (!io_input_open(&in, path, "nsys: open", TRACE_ERROR, TRACE_ERROR_IO,
                     error))
    return FALSE;
  s.size = in.size;
  s.rows_left = (guint64)in.size / NSYS_ROW_BYTES + 16;
  s.steps_left = (guint64)in.size * NSYS_STEPS_PER_BYTE + NSYS_STEPS_BASE;
  /* The open file by its proc path, as a URI (SQLITE_OPEN_URI: no other
   * reading of the name), immutable: no journal, WAL or lock files.  The
   * proc path has no character that a URI must escape. */
  g_autofree char *uri = g_strdup_printf("file:%s?immutable=1",
                                         in.proc_path);
  if (sqlite3_open_v2(uri, &s.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                      NULL) != SQLITE_OK) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_IO, "%s: cannot open: %s",
                path, s.db != NULL ? sqlite3_errmsg(s.db) : "out of memory");
    sqlite3_close(s.db);
    io_input_close(&in);
    return FALSE;
  }
  sqlite3_limit(s.db, SQLITE_LIMIT_LENGTH, NSYS_MAX_VALUE);
  sqlite3_progress_handler(s.db, NSYS_PROGRESS_PERIOD, nsys_progress, &s);
  Devices d = {&s, names,
               g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free,
                                     NULL),
               g_ptr_array_new_with_free_func(
                   (GDestroyNotify)trace_raw_rank_free)};
  g_autoptr(GArray) launches = g_array_new(FALSE, FALSE,
                                           sizeof(TraceRawLaunch));
  g_autoptr(GArray) ranges = g_array_new(FALSE, FALSE,
                                         sizeof(TraceRawRange));
  g_autoptr(GHashTable) devnames = g_hash_table_new_full(
      g_int64_hash, g_int64_equal, g_free, g_free);
  gboolean ok = FALSE;
  int kt = table_exists(&s, "CUPTI_ACTIVITY_KIND_KERNEL", error);
  if (kt < 0)
    goto out;
  if (kt == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: no CUPTI_ACTIVITY_KIND_KERNEL table (not an Nsight "
                "Systems export of a CUDA trace: export the report with "
                "`nsys export --type sqlite` from a run with CUDA tracing)",
                path);
    goto out;
  }
  int st = table_exists(&s, "StringIds", error);
  if (st < 0)
    goto out;
  s.has_strings = st == 1;
  if (!read_activity(&d, "CUPTI_ACTIVITY_KIND_KERNEL", TRACE_RAW_KERNEL,
                     error))
    goto out;
  static const struct {
    const char *table;
    TraceRawKind kind;
  } mem[] = {{"CUPTI_ACTIVITY_KIND_MEMCPY", TRACE_RAW_MEMCPY},
             {"CUPTI_ACTIVITY_KIND_MEMSET", TRACE_RAW_MEMSET}};
  for (gsize i = 0; i < G_N_ELEMENTS(mem); i++) {
    int ex = table_exists(&s, mem[i].table, error);
    if (ex < 0)
      goto out;
    if (ex == 1 && !read_activity(&d, mem[i].table, mem[i].kind, error))
      goto out;
  }
  if (!read_launches(&s, names, launches, error) || !read_nvtx(&s, ranges, error) ||
      !read_devices(&s, devnames, error))
    goto out;
  if (d.ranks->len == 0) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: no GPU activity (the kernel table is empty)", path);
    goto out;
  }
  /* Each rank gets its own copy of the runtime calls and ranges. */
  guint64 copies = (guint64)(d.ranks->len - 1) *
                   ((guint64)launches->len + ranges->len);
  if (copies > ((guint64)s.size / NSYS_ROW_BYTES + 16) * NSYS_MAX_COPIES) {
    g_set_error(error, TRACE_ERROR, TRACE_ERROR_FORMAT,
                "%s: %u devices and %u runtime calls and ranges: too many "
                "to give every device its copy (a crafted file?)", path,
                d.ranks->len, launches->len + ranges->len);
    goto out;
  }
  g_ptr_array_sort(d.ranks, cmp_rank_device);
  for (guint i = 0; i < d.ranks->len; i++) {
    TraceRawRank *r = g_ptr_array_index(d.ranks, i);
    gint64 dev = g_array_index(r->ops, TraceRawOp, 0).device;
    if (d.ranks->len > 1) {
      g_free(r->path);
      r->path = g_strdup_printf("%s[device %" G_GINT64_FORMAT "]", path, dev);
    }
    g_array_append_vals(r->launches, launches->data, launches->len);
    g_array_append_vals(r->ranges, ranges->data, ranges->len);
    const char *dn = g_hash_table_lookup(devnames, &dev);
    if (dn != NULL)
      g_hash_table_insert(r->devices, g_memdup2(&dev, sizeof dev),
                          g_strdup(dn));
  }
  /* Hand the ranks over in device order. */
  while (d.ranks->len > 0)
    g_ptr_array_add(out, g_ptr_array_steal_index(d.ranks, 0));
  ok = TRUE;
out:
  g_hash_table_unref(d.by_device);
  g_ptr_array_unref(d.ranks);
  sqlite3_close(s.db);
  io_input_close(&in);
  return ok;
}
