/* run/sweep.h -- the sweep engine: parallel, resumable parameter sweeps
 * that write one HDF5 results row per point (docs/sweeps.md).
 *
 * The caller builds the points (SweepPoints: a sorted set of keys, one value
 * per key per point), describes the sweep (SweepSpec) and calls sweep_run
 * with its hooks (SweepHooks): "run a point", called in a fork()ed worker
 * process, and "progress", called in the caller's process.  The engine
 * enumerates and identifies the points, resumes from the results file,
 * runs the worker pool (and, in JOULESIM_MPI builds under mpirun/srun, the
 * ranks), and is the only writer of the results table.  It prints nothing:
 * it reports through the hooks and GError.  lua/sweep.c (js.sweep) is its
 * Lua binding; cli/sweep_progress.c prints the progress line.
 *
 *   run/sweep_points.c  point ids, the points, resume, the rows
 *   run/sweep_wire.c    the worker messages (format described there)
 *   run/sweep_pool.c    sweep_run: the worker processes and the main loop
 *   run/sweep_mpi.c     points across MPI ranks (all MPI code)
 */
#ifndef RUN_SWEEP_H
#define RUN_SWEEP_H

#include <glib.h>
#include "io/results.h"
#include "run/session.h"

G_BEGIN_DECLS

#define JS_SWEEP_ERROR (js_sweep_error_quark())
GQuark js_sweep_error_quark(void);
typedef enum {
  JS_SWEEP_ERROR_PROTOCOL, /* a malformed message */
  JS_SWEEP_ERROR_WORKER,   /* a worker could not be started or talked to */
  JS_SWEEP_ERROR_POINTS,   /* the points are not a valid sweep */
  JS_SWEEP_ERROR_INTERRUPTED /* SIGINT, SIGTERM or SIGHUP stopped it */
} JsSweepError;

/* Largest number of points a sweep may have. */
#define SWEEP_MAX_POINTS 10000000

/* ---- points -------------------------------------------------------------- */

/* The canonical identity of a point (the `point_id` column): its values
 * sorted by name, as `name=value` joined by ','.  Integers in decimal,
 * floats in the shortest form that reads back to the same double (with
 * ".0" when it would look like an integer; nan, inf, -inf), booleans
 * true/false, strings in double quotes with \" \\ \n \t \r and \u00XX
 * escapes; a name that is not [A-Za-z_][A-Za-z0-9_.-]* is quoted like a
 * string.  Equal points give equal ids; different points (including 2 and
 * 2.0) different ones.  values (n, any order) are borrowed. */
char *js_sweep_point_id(const ResValue *values, guint n);

/* Whether k is a column the sweep writes itself ("point_id", "error",
 * "trust", "fits", "memory_gb"): no point key or row column may have that
 * name. */
gboolean sweep_key_reserved(const char *k);

/* The seed of math.random for the point with this id in a sweep run with
 * seed: a splitmix64 mix of seed and the id's 64-bit FNV-1a hash, so a
 * point's random numbers depend on nothing but --seed and the point. */
guint64 sweep_point_seed(guint64 seed, const char *point_id);

/* The points of one sweep.  Every point has a value for each key; the
 * keys are sorted by byte order, and a point's values are in key order
 * (so sorted by name).  The first point fixes each key's type.  Strings
 * are copied. */
typedef struct SweepPoints SweepPoints;

/* keys (n >= 0, any order, distinct, none reserved) are copied. */
SweepPoints *sweep_points_new(const char *const *keys, guint n);
void sweep_points_free(SweepPoints *pts);
guint sweep_points_n_keys(const SweepPoints *pts);
const char *sweep_points_key(const SweepPoints *pts, guint k); /* borrowed */
guint sweep_points_len(const SweepPoints *pts);
/* The point_id of point i (borrowed, lives with pts). */
const char *sweep_points_id(const SweepPoints *pts, guint i);

/* Adds one point: vals holds n_keys values in key order (names are
 * ignored; the key's own name is used).  Borrowed. */
void sweep_points_add(SweepPoints *pts, const ResValue *vals);

/* Adds the Cartesian product of lists[k] (lens[k] >= 1 values for key k,
 * in key order), the last key varying fastest.  The product must not
 * exceed SWEEP_MAX_POINTS (the caller checks).  Borrowed. */
void sweep_points_add_grid(SweepPoints *pts, const ResValue *const *lists,
                           const guint *lens);

/* JS_SWEEP_ERROR_POINTS when two points are the same point (equal ids):
 * "points I and J are the same point (ID); every point must differ". */
gboolean sweep_points_check(const SweepPoints *pts, GError **error);

/* ---- running a sweep ------------------------------------------------------ */

typedef struct {
  JsSession *session;        /* borrowed: seed, limits, scenario metadata;
                                the failures are added to its
                                sweep_failed */
  const SweepPoints *points; /* borrowed */
  const char *out;           /* the results file */
  const char *table;         /* its table */
  ResMode mode;              /* append: resume; replace: start over */
  gboolean retry_failed;     /* append: run the points with error rows
                                again (their rows are removed first) */
  gboolean progress;         /* call hooks->progress */
  guint jobs;                /* worker processes, 1..js_sweep_max_jobs() */
} SweepSpec;

/* The most worker processes a sweep may have: JS_SWEEP_MAX_JOBS, or twice
 * the cores when that is more.  Each worker is a process with its own
 * copy of the script's state, and shares --max-memory with the others. */
#define JS_SWEEP_MAX_JOBS 256
guint js_sweep_max_jobs(void);

/* What the progress hook is told: a snapshot of the counts. */
typedef struct SweepProgress {
  const char *table;
  guint total;     /* points of the sweep */
  guint finished;  /* done + failed + skipped */
  guint failed, skipped;
  guint ran;       /* points run by this call */
  double elapsed_s; /* since the sweep started */
  gboolean final;  /* the last report, after every point */
} SweepProgress;

typedef void (*SweepProgressFunc)(const SweepProgress *p, gpointer data);

/* Runs point_id (values: n, in key order) in a worker process; seed is
 * sweep_point_seed's for the point.  Returns TRUE with the row's columns
 * appended to row (ResValue, sorted by name; names and strings must stay
 * valid until the next call in this process), or FALSE with *message
 * (owned, handed over) when the point failed. */
typedef gboolean (*SweepRunPointFunc)(gpointer data, const ResValue *values,
                                      guint n, const char *point_id,
                                      guint64 seed, GArray *row,
                                      char **message);

typedef struct {
  /* Called in the caller's process just before the first worker is
   * forked (optional): its last chance to tidy what every worker would
   * otherwise inherit (js.sweep collects Lua garbage there). */
  void (*before_fork)(gpointer data);
  /* Called once in every new worker process before its first point
   * (optional). */
  void (*worker_init)(gpointer data);
  SweepRunPointFunc run_point;   /* required */
  gpointer data;                 /* for the three above */
  SweepProgressFunc progress;    /* optional: at most every 0.2 s, and
                                    once more with final set */
  gpointer progress_data;
} SweepHooks;

/* The outcome of a sweep (js.sweep's return value). */
typedef struct {
  guint total, done, skipped, failed;
  guint unfit;           /* of done: rows of layouts js.simulate refused
                            for GPU memory (fits = false) */
  guint64 rows;          /* rows of the table afterwards */
  GPtrArray *failures;   /* owned: alternating point_id, message */
} SweepResult;

void sweep_result_clear(SweepResult *r);

/* Runs the sweep: resumes (mode append), runs the points left on
 * spec->jobs forked workers through hooks->run_point, and writes each
 * outcome as a row of spec->table in spec->out (the row's columns: the
 * point's keys, the run's columns, trust, fits, memory_gb, point_id,
 * error).  A point whose layout js.simulate refused for GPU memory gets a
 * row with fits = false, its memory_gb and defaults in the run's columns,
 * and counts as done (and unfit), not failed.  A point that fails
 * (the hook says so, its row does not fit the table, its worker dies
 * twice) gets an error row and is counted, and the sweep goes on.  FALSE
 * with error when the sweep itself cannot go on (the results file, the
 * workers, MPI); the rows written so far stay.  *result is filled either
 * way (free it with sweep_result_clear).  The workers never return. */
gboolean sweep_run(const SweepSpec *spec, const SweepHooks *hooks,
                   SweepResult *result, GError **error);

/* The number of points that failed in the sweeps run with session s since
 * the last call, and forgets it (so call it once, after the script has
 * run).  cli/cmd_run.c exits with status 1 when it is not 0. */
guint js_sweep_take_failed(JsSession *s);

/* ---- the worker wire format (run/sweep_wire.c) ---------------------------- */

/* Frames longer than this are refused. */
#define JS_SWEEP_MAX_FRAME (64u << 20)

typedef enum {
  JS_SWEEP_MSG_POINT = 'P',
  JS_SWEEP_MSG_ROW = 'R',
  JS_SWEEP_MSG_ERROR = 'E',
  JS_SWEEP_MSG_UNFIT = 'U' /* js.simulate refused the point's layout: its
                              GPU memory (fits, memory_gb) as values */
} JsSweepMsgKind;

typedef struct {
  JsSweepMsgKind kind;
  guint32 index;
  const char *text; /* borrowed from the decoded buffer */
  GArray *values;   /* ResValue; names and strings borrowed from the buffer */
} JsSweepMsg;

/* Encodes a message as one frame (length prefix included); values (n) and
 * text (may be NULL: empty) borrowed.  Returns a new array. */
GByteArray *js_sweep_encode(JsSweepMsgKind kind, guint32 index,
                            const char *text, const ResValue *values,
                            guint n);
/* Decodes one payload (without the length prefix) of len bytes into msg,
 * whose text and value strings then point into buf (keep buf alive).
 * Any malformed input is JS_SWEEP_ERROR_PROTOCOL naming the byte offset
 * and what was wrong; msg is then cleared.  Free msg with
 * js_sweep_msg_clear. */
gboolean js_sweep_decode(const guint8 *buf, gsize len, JsSweepMsg *msg,
                         GError **error);
void js_sweep_msg_clear(JsSweepMsg *msg);

G_END_DECLS

#endif
