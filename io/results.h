/* io/results.h -- appendable HDF5 results tables and run timelines
 * (DESIGN section 9).
 *
 * One compound dataset per table at /results/<table>, chunked (not
 * compressed: see Durability in io/results.c), extendible along its single
 * dimension.  Columns are typed from
 * the first row ever written to the table (int64, float64, bool stored as
 * uint8 with an enum-free convention, variable-length UTF-8 strings); a later
 * row must have the same column names and compatible types.  The file and
 * dataset carry attributes: joulesim_version, scenario, scenario_source,
 * seed, created (ISO 8601), and per column a units attribute derived from
 * its suffix (_s: s, _ns: ns, _j: J, _w: W, _mhz: MHz, _pct: %, _gbps: GB/s,
 * _tflops: TFLOP/s).
 * Every append is flushed before it returns: a process killed at any
 * instant leaves a file that HDF5 and h5py open, holding every row whose
 * append had returned (io/results.c, Durability, says how and how it was
 * verified).  Per-run power timelines live under /timelines/<run>.
 *
 * Names of tables and timelines are non-empty UTF-8 without '/' and do not
 * start with '.' (reserved for temporary datasets).
 */
#ifndef LUA_RESULTS_H
#define LUA_RESULTS_H

#include <glib.h>

G_BEGIN_DECLS

typedef enum {
  RES_INT = 0,
  RES_FLOAT,
  RES_BOOL,
  RES_STRING
} ResType;

typedef struct {
  const char *name;   /* borrowed */
  ResType type;
  gint64 i;           /* RES_INT, RES_BOOL (0/1) */
  double f;           /* RES_FLOAT */
  const char *s;      /* RES_STRING, borrowed */
} ResValue;

typedef enum { RES_MODE_APPEND = 0, RES_MODE_REPLACE } ResMode;

/* File-level attributes written when a file is created (all optional),
 * and the run writing (run_id, run_started; NULL: rows are not marked).
 * A table opened with a run_id has a string column "run_id" holding, in
 * every row this run appends, the run's id (the column is added, empty
 * for the rows already there, when an existing table lacks it; a row may
 * not give it), and an attribute "run:<run_id>" with the run's start,
 * joulesim version, scenario and seed, written with the run's first row. */
typedef struct {
  const char *version;
  const char *scenario_path;
  const char *scenario_source;
  guint64 seed;
  const char *run_id;      /* no '/' */
  const char *run_started; /* ISO 8601 UTC */
} ResMeta;

/* The column that holds the run id of every row (see ResMeta). */
#define RES_RUN_COLUMN "run_id"

typedef struct ResTable ResTable;

/* TRUE when `path` is a joulesim results file: HDF5 with the root
 * attribute joulesim_version and a /results group (run/confine.h). */
gboolean res_file_probe(const char *path);

/* Opens (creating when needed) `path` and table `table`.  APPEND keeps
 * existing rows; REPLACE deletes the table's existing rows (other tables in
 * the file are kept).  Errors name the path and the HDF5 reason; a path that
 * cannot be created leaves nothing behind.  A new file appears at `path`
 * with its first row, complete, or at the close when no row came (until
 * then it is a temporary file beside it; see Durability in io/results.c). */
ResTable *res_table_open(const char *path, const char *table, ResMode mode,
                         const ResMeta *meta, GError **error);
/* Appends one row of n values (borrowed); flushes to disk.  The first row of
 * a new table fixes the columns; later rows must match (error names the
 * column and the expected type).  Ints are accepted in float columns, and
 * a float arriving in an int column makes it a float column: the table
 * is rewritten first, every row kept, its ints as floats (crash-safe as
 * res_table_filter; a first row { budget = 0 } must not make
 * { budget = 0.01 } an error). */
gboolean res_table_append(ResTable *t, const ResValue *row, guint n,
                          GError **error);
/* Rows in the table. */
guint64 res_table_rows(const ResTable *t);
/* The table's columns (0 until the first row fixes them): name (borrowed
 * from t) and type of column i < res_table_n_columns(t). */
guint res_table_n_columns(const ResTable *t);
const char *res_table_column_name(const ResTable *t, guint i);
ResType res_table_column_type(const ResTable *t, guint i);
/* Writes (or rewrites) a string-list attribute `name` on the table's
 * dataset (which exists once the first row is in) and flushes; values
 * borrowed.  Not for the managed attributes columns, units, bool_columns. */
gboolean res_table_set_note(ResTable *t, const char *name,
                            const char *const *values, gsize n,
                            GError **error);
/* Closes the file (flushed and fsync()ed).  Returns FALSE with error when
 * the final flush fails; frees t in every case.  A table inherited by a
 * fork()ed child is only freed there: the parent's file is not touched. */
gboolean res_table_close(ResTable *t, GError **error);
void res_table_free(ResTable *t); /* close ignoring errors */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ResTable, res_table_free)

/* Reads a whole table back (for tests and resume): returns an array of
 * rows, each a GPtrArray of ResValue* (owned, strings owned), or NULL with
 * error. */
GPtrArray *res_table_read(const char *path, const char *table,
                          GError **error);
/* Reads every row of the open table t back through t's own file handle
 * (like res_table_read; an empty array before the first row fixes the
 * columns).  Unlike res_table_read, which opens the file read-only and
 * cannot see a last row whose space a killed writer's flush did not
 * record, this reads what res_table_open recovered: exactly the rows that
 * t's next append follows (js.sweep's resume reads its done set here). */
GPtrArray *res_table_read_rows(ResTable *t, GError **error);

/* To be called in a fork()ed child that will not use the HDF5 files open
 * in its parent (js.sweep's workers): replaces their file descriptors by
 * /dev/null, so that the child holds no reference to them and none of
 * HDF5's locks (a lock held by a leftover child would keep the file locked
 * after the parent is killed).  The child must not use those files
 * afterwards. */
void res_release_files_in_child(void);

/* Decides whether a row (as read by res_table_read, borrowed) stays. */
typedef gboolean (*ResRowKeep)(GPtrArray *row, gpointer data);
/* Removes from `table` of the file at `path` the rows for which keep
 * returns FALSE, keeping the others in order; *removed (optional) gets
 * their count.  A table left without rows is deleted (its next first row
 * fixes new columns).  Crash-safe: a kill leaves the old table or the new
 * one.  The table must not be open in a ResTable. */
gboolean res_table_filter(const char *path, const char *table,
                          ResRowKeep keep, gpointer data, guint64 *removed,
                          GError **error);

/* One GPU's power timeline: n samples; sample i says that from time_s[i]
 * (simulated seconds since the run's start, non-decreasing) the GPU drew
 * power_w[i] watts at SM clock sm_mhz[i] (sm_mhz may be NULL: NaN). */
typedef struct {
  guint gpu;
  gsize n;
  const double *time_s;
  const double *power_w;
  const double *sm_mhz;
} ResTimelineGpu;

/* Writes the timelines of one run as the compound dataset
 * /timelines/<run> (columns gpu, time_s, power_w, sm_mhz; rows in the
 * order of gpus, each GPU's in time order; compressed), creating the file
 * (with meta, borrowed) when needed.  An existing timeline of that name is
 * RES_ERROR_EXISTS unless replace.  Errors name the path, the run, and the
 * GPU and sample for bad input (RES_ERROR_SCHEMA: a GPU twice, time going
 * backwards or not finite).  The timeline appears complete or not at all. */
gboolean res_timeline_write(const char *path, const char *run,
                            const ResTimelineGpu *gpus, guint n_gpus,
                            gboolean replace, const ResMeta *meta,
                            GError **error);
/* Reads /timelines/<run> back as rows (like res_table_read). */
GPtrArray *res_timeline_read(const char *path, const char *run,
                             GError **error);

#define RES_ERROR (res_error_quark())
GQuark res_error_quark(void);
typedef enum {
  RES_ERROR_IO,
  RES_ERROR_SCHEMA,
  RES_ERROR_EXISTS,
  RES_ERROR_UNSAFE, /* an HDF5 file refused by io/h5open.h's check */
} ResError;

G_END_DECLS

#endif
