/* io/results-private.h -- what the files of the results writer share:
 * the ResTable and its columns, error and HDF5 helpers, opening a file.
 * Not part of the API (io/results.h).  The files: results.c (the format,
 * errors, columns, attributes, creating and opening files),
 * results_table.c (opening and appending to a table), results_read.c
 * (reading back, removing rows), results_timeline.c (timelines).
 */
#ifndef JOULESIM_IO_RESULTS_PRIVATE_H
#define JOULESIM_IO_RESULTS_PRIVATE_H

#include "io/results.h"

#include <hdf5.h>
#include <sys/types.h>

/* Most columns a results table may have.  A table's row type is one
 * compound datatype message in the dataset's object header, and HDF5
 * limits a header message to 64 KiB.  HDF5 1.10 writes compound types in
 * version 1 of the format, where a member takes 40 bytes besides its type
 * (its name padded to 8, offset, dimensions) and its type at least 12
 * (an int64): no table of more than 65536 / 52 = 1260 columns can be
 * written, and a round 1024 always fits with names of up to 7 bytes
 * (wider members or longer names may still hit HDF5's own limit, which
 * then fails quickly).  Checked before anything is built: HDF5 otherwise
 * spends time quadratic in the columns before its own error (16 s at
 * 40,000 columns). */
#define RES_MAX_COLUMNS 1024
/* Rows per chunk of every results table. */
#define RES_CHUNK_ROWS 256
/* Rows per chunk, and deflate level, of timelines. */
#define RES_TIMELINE_CHUNK_ROWS 4096
#define RES_TIMELINE_DEFLATE_LEVEL 4

/* A new results file not yet linked into place (io/results.c). */
typedef struct ResNewFile ResNewFile;

/* One column of a table. */
typedef struct {
  char *name;
  ResType type;
  size_t offset; /* of the member in a memory row */
} ResCol;

struct ResTable {
  char *path;
  char *table;
  char *dset_path;    /* "/results/<table>" */
  hid_t file;         /* -1 once a failed creation closed it */
  ResNewFile *pending; /* the file is new and not yet linked into place
                         (res_open_file), until the first row, or close */
  hid_t dset;         /* -1 until the table has columns */
  gboolean linked;    /* dset has its name: it is created anonymous and
                         linked once its first row is on disk */
  hid_t mem_type;     /* -1 until the table has columns */
  ResCol *cols;
  guint ncols;
  GHashTable *by_name; /* column name (borrowed from cols) -> index + 1 */
  size_t row_size;
  guchar *row_buf;    /* one memory row */
  guint8 *seen;       /* per column: set by the current append */
  guint64 rows;
  pid_t owner;        /* the process that opened the table */
  guint64 reserved_to; /* file space allocated up to here (0: none), see
                          res_table_reserve */
  char *broken;       /* why a flush failed: HDF5 cannot flush the file
                         again, so the table refuses rows (NULL: fine) */
  char *run_id;       /* the run's id for column RES_RUN_COLUMN (NULL:
                         rows are not marked) */
  char **run_info;    /* the attribute "run:<run_id>": started, joulesim,
                         scenario, seed (NULL-terminated) */
  gboolean run_noted; /* that attribute is written */
};

/* Frees the variable-length strings that H5Dread allocated in buf. */
void res_reclaim(hid_t mem_type, hid_t space, void *buf);
/* Sets *error to code with "PATH: table 'TABLE': WHAT (HDF5: reason)",
 * reading the reason from the current HDF5 error stack (so call it right
 * after the failing HDF5 call, before any other HDF5 call clears the
 * stack).  table may be NULL.  Always returns FALSE. */
G_GNUC_PRINTF(5, 6)
gboolean res_fail(GError **error, gint code, const char *path,
                  const char *table, const char *fmt, ...);
const char *res_type_name(ResType type);
/* Unit of a column from its name's suffix ("" when none applies). */
const char *res_unit_for(const char *name);
/* Lays out a memory row for cols (filling in their offsets) and returns its
 * compound type (owned by the caller), or -1 with error. */
hid_t res_mem_type(ResCol *cols, guint ncols, size_t *row_size,
                   const char *path, const char *table, GError **error);
void res_cols_free(ResCol *cols, guint ncols);
/* Reads the columns of an existing dataset from its compound type.  On
 * success *cols (owned by the caller, res_cols_free) and *ncols are set;
 * a type this module would not have written is RES_ERROR_SCHEMA. */
gboolean res_cols_from_dataset(hid_t dset, ResCol **cols_out,
                               guint *ncols_out, const char *path,
                               const char *table, GError **error);
/* Writes a scalar vlen UTF-8 string attribute `name` = value on obj. */
gboolean res_attr_string(hid_t obj, const char *name, const char *value,
                         const char *path, const char *table,
                         GError **error);
/* Writes a 1-D vlen UTF-8 string array attribute (a null dataspace when
 * n == 0, which h5py reads as h5py.Empty). */
gboolean res_attr_strings(hid_t obj, const char *name,
                          const char *const *values, gsize n,
                          const char *path, const char *table,
                          GError **error);
/* fsync()s the file behind an open HDF5 file (sec2 driver); TRUE when it
 * worked or the driver has no file descriptor. */
gboolean res_fsync(hid_t file);
/* H5Fclose without fault injection (io/fault.h): HDF5 1.10 cannot recover
 * from a failed close (io/h5util.c), so callers flush first. */
herr_t res_close_file(hid_t file);
gboolean res_ensure_group(hid_t file, const char *name,
                          const char *path, GError **error);
/* Opens `path` read-write.  When nothing is there, a new file is built
 * under a temporary name instead (or this process's one for `path` is
 * joined) and *pending is set: the caller links it into place with
 * res_commit_file once its first object is written, or lets go of it with
 * res_release_file (see Durability in io/results.c). */
hid_t res_open_file(const char *path, const ResMeta *meta,
                    ResNewFile **pending, GError **error);
/* Flushes, fsyncs and links the new file into place, once for all its
 * users; releases the caller's reference (see io/results.c). */
gboolean res_commit_file(ResNewFile **pending, const char *path,
                         GError **error);
/* Lets go of a reference to a new file; safe on NULL. */
void res_release_file(ResNewFile **pending);
/* The temporary name of table's rewrite ("/results/.<table>.rewrite"). */
char *res_rewrite_path(const char *table);
/* Finishes or undoes a rewrite of `table` that a kill interrupted (see
 * res_table_filter): when the table is missing, the rewrite had been
 * complete and flushed before the old table was unlinked, so it becomes
 * the table; when the table is still there, the partial rewrite is
 * dropped.  The /results group must exist. */
gboolean res_recover_rewrite(hid_t file, const char *path,
                             const char *table, GError **error);
/* TRUE when row r of dset cannot be read because it references file space
 * past the recorded end of the file (a kill inside its append's flush). */
gboolean res_row_torn(hid_t dset, hid_t mem_type, hsize_t r);
/* A table name must be a single HDF5 link name. */
gboolean res_check_table_name(const char *path, const char *table,
                              GError **error);
/* Every row of the open dataset dset as an array of rows (see
 * res_table_read), or NULL with error. */
GPtrArray *res_dset_rows(hid_t dset, const char *path, const char *label,
                         GError **error);
/* Reads the dataset at dset_path of an open file as rows (see
 * res_table_read). */
GPtrArray *res_read_rows(hid_t file, const char *dset_path,
                         const char *path, const char *label,
                         GError **error);
/* After a failed H5Fopen (saved_errno: errno right after it): "PATH:
 * WHAT" and the reason, or that another process has the file open for
 * writing when HDF5's lock was refused. */
void res_fail_open(GError **error, int saved_errno, const char *path,
                   const char *what);
/* Opens `path` read-only for reading back, with errors naming it. */
hid_t res_open_read(const char *path, GError **error);
/* 1 when `link` (an absolute path, its group may be missing) exists, 0
 * when not, -1 on an HDF5 error. */
htri_t res_link_exists(hid_t file, const char *group,
                       const char *link);

#endif
