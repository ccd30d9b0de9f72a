/* lua/results.h -- appendable HDF5 results tables (DESIGN section 9).
 *
 * One compound dataset per table at /results/<table>, chunked and deflate
 * compressed, extendible along its single dimension.  Columns are typed from
 * the first row ever written to the table (int64, float64, bool stored as
 * uint8 with an enum-free convention, variable-length UTF-8 strings); a later
 * row must have the same column names and compatible types.  The file and
 * dataset carry attributes: joulesim_version, scenario, scenario_source,
 * seed, created (ISO 8601), and per column a units attribute derived from
 * its suffix (_s: s, _ns: ns, _j: J, _w: W, _mhz: MHz, _pct: %, _gbps: GB/s,
 * _tflops: TFLOP/s).
 * Every append is flushed before it returns.
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

/* File-level attributes written when a file is created (all optional). */
typedef struct {
  const char *version;
  const char *scenario_path;
  const char *scenario_source;
  guint64 seed;
} ResMeta;

typedef struct ResTable ResTable;

/* Opens (creating when needed) `path` and table `table`.  APPEND keeps
 * existing rows; REPLACE deletes the table's existing rows (other tables in
 * the file are kept).  Errors name the path and the HDF5 reason; a path that
 * cannot be created leaves nothing behind. */
ResTable *res_table_open(const char *path, const char *table, ResMode mode,
                         const ResMeta *meta, GError **error);
/* Appends one row of n values (borrowed); flushes to disk.  The first row of
 * a new table fixes the columns; later rows must match (error names the
 * column and the expected type).  Ints are accepted in float columns. */
gboolean res_table_append(ResTable *t, const ResValue *row, guint n,
                          GError **error);
/* Rows in the table. */
guint64 res_table_rows(const ResTable *t);
/* Closes the file.  Returns FALSE with error when the final flush fails;
 * frees t in every case. */
gboolean res_table_close(ResTable *t, GError **error);
void res_table_free(ResTable *t); /* close ignoring errors */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(ResTable, res_table_free)

/* Reads a whole table back (for tests and resume): returns an array of
 * rows, each a GPtrArray of ResValue* (owned, strings owned), or NULL with
 * error. */
GPtrArray *res_table_read(const char *path, const char *table,
                          GError **error);

#define RES_ERROR (res_error_quark())
GQuark res_error_quark(void);
typedef enum { RES_ERROR_IO, RES_ERROR_SCHEMA } ResError;

G_END_DECLS

#endif
