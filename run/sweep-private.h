/* run/sweep-private.h -- what the sweep engine's files share
 * (run/sweep_points.c, sweep_wire.c, sweep_pool.c, sweep_mpi.c); not for
 * use outside run/sweep*.c.
 *
 * A SweepPoints is the immutable input: the keys and the points, each with
 * its values (in key order) and its point_id, every string in one chunk.
 * A Sweep is one run of sweep_run: the results table, the worker
 * processes, the queue of points to run (todo, point index + 1 so that no
 * entry is NULL), the error rows held until the first good row fixes the
 * table's columns (pending), and the counts.  Only the process that made
 * the Sweep (parent) owns its table and workers; a worker holds a copy of
 * it after fork() and never frees it.
 */
#ifndef RUN_SWEEP_PRIVATE_H
#define RUN_SWEEP_PRIVATE_H

#include "run/sweep.h"

#include <sys/types.h>

G_BEGIN_DECLS

/* Most attempts at a point whose worker dies. */
#define SWEEP_MAX_ATTEMPTS 2

typedef struct {
  ResValue *vals; /* n, in key order (owned); names and strings in
                     the SweepPoints' strings */
  guint n;
  char *id;       /* point_id, in strings */
} SweepPoint;

struct SweepPoints {
  GStringChunk *strings;
  GArray *points;     /* SweepPoint */
  char **keys;        /* sorted, in strings; NULL-terminated */
  ResType *key_types; /* of the first point */
  guint n_keys;
};

typedef struct {
  pid_t pid;   /* -1: not running */
  int fd;      /* the parent's end of the socketpair */
  gint64 cur;  /* index of the point in flight, -1 when idle */
} SweepWorker;

typedef struct {
  guint index;
  char *message;
  double memory_gb; /* an unfit point's (message ""); else < 0 */
} SweepPending;

typedef struct SweepMpi SweepMpi; /* run/sweep_mpi.c */

typedef struct {
  JsSession *session;
  const SweepPoints *pts;
  const SweepHooks *hooks;
  const char *out, *table;
  ResMode mode;
  gboolean retry_failed, progress;
  guint jobs;
  guint *attempts;    /* per point: workers that died running it */
  ResTable *t;
  GArray *workers;    /* SweepWorker */
  GQueue todo;        /* point index + 1 */
  GArray *pending;    /* SweepPending: errors before the first good row */
  GPtrArray *failures; /* alternating point_id, message (owned) */
  guint done, skipped, failed, ran, unfit;
  guint64 existing_rows; /* rows of the table before this call */
  gint64 started_us, last_progress_us;
  pid_t parent;
  SweepMpi *mpi;      /* NULL: not distributed */
} Sweep;

static inline const SweepPoint *sweep_point(const Sweep *sw, guint i)
{
  return &g_array_index(sw->pts->points, SweepPoint, i);
}

static inline guint sweep_n_points(const Sweep *sw)
{
  return sw->pts->points->len;
}

/* run/sweep_points.c */
guint64 sweep_hash_id(const char *s); /* 64-bit FNV-1a */
/* Checks a worker's row (sorted by name) against its point (np values):
 * no reserved column, a point key only repeated with its value, which is
 * then dropped from row.  NULL, or the problem (owned). */
char *sweep_row_strip(const ResValue *pv, guint np, GArray *row);
gboolean sweep_resume(Sweep *sw, GHashTable *done_ids, GError **error);
gboolean sweep_failed_point(Sweep *sw, guint i, const char *message,
                            GError **error);
gboolean sweep_good_row(Sweep *sw, guint i, GArray *vals, GError **error);
/* The outcome of point i from a worker: a row, an unfit layout or a
 * failure. */
gboolean sweep_take_result(Sweep *sw, guint i, const JsSweepMsg *msg,
                           GError **error);
gboolean sweep_flush_pending(Sweep *sw, GError **error);

/* run/sweep_wire.c: frames over a socket */
gboolean sweep_send_full(int fd, const guint8 *buf, gsize n);
GByteArray *sweep_read_frame(int fd, gboolean *eof, GError **error);

/* run/sweep_pool.c */
guint sweep_in_flight(const Sweep *sw);
gboolean sweep_dispatch(Sweep *sw, GError **error);

/* run/sweep_mpi.c (stubs without JOULESIM_MPI) */
void sweep_mpi_setup(Sweep *sw);
void sweep_mpi_free(Sweep *sw);
gboolean sweep_remote(const Sweep *sw);      /* an MPI rank > 0 */
gboolean sweep_distributed(const Sweep *sw); /* more than one rank */
gboolean sweep_mpi_check_points(Sweep *sw, GError **error);
void sweep_mpi_abort(Sweep *sw, const char *message);
void sweep_mpi_send_result(Sweep *sw, const guint8 *payload, gsize len,
                           gboolean good);
gboolean sweep_mpi_turn(Sweep *sw, gboolean *finished, gboolean *again,
                        GError **error);

G_END_DECLS

#endif
