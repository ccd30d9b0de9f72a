/* lua/sweep.c -- js.sweep: parallel, resumable parameter sweeps.
 *
 *   js.sweep{ grid = { policy = {"max", "fixed"}, tp = {1, 2, 4} }
 *              -- or points = { {policy = "max", tp = 1}, ... },
 *             run = function(point) ... return row end,
 *             out = "sweep.h5", table = "name", jobs = N,
 *             mode = "append" | "replace", retry_failed = true,
 *             progress = true | false }
 *   -> { total, done, skipped, failed, rows, out, table,
 *        failures = { {point_id =, error =}, ... } }
 *
 * Points.  A grid is the Cartesian product of its lists, keys in sorted
 * (byte) order, the last key varying fastest; `points` is an explicit list.
 * A point is a flat table of string keys and numbers, booleans or strings
 * (anything else is an error naming the key); every point has the same
 * keys.  A key whose values mix integers and floats is made float
 * throughout (so its column has one type).  Each point has a canonical
 * identity, its point_id (js_sweep_point_id), stored with its row.
 *
 * Workers.  js.sweep fork()s `jobs` worker processes (default: `--jobs` of
 * `joulesim run`, else the number of cores; never more than the points to
 * run).  A worker is a copy of the parent at the moment of the call: its
 * Lua state already holds `run` and everything the script built before
 * (clusters, workloads), copy-on-write, so no state has to be serialised.
 * Each worker reads a point, calls run(point) under lua_pcall, and sends
 * back the row or the error message; the parent is the only process that
 * writes the results file.  Parent and worker talk over a socketpair in the
 * framed binary format of lua/sweep.h; the parent sends a worker its next
 * point only after writing its previous row, polls all workers, and writes
 * rows in the order they complete.
 *
 * Determinism.  A point's row does not depend on `jobs`, on which worker
 * ran it or on what the worker ran before: math.random is reseeded for
 * every point from --seed and the point_id, and js.simulate's default seed
 * is --seed.  (run must not rely on globals it changes itself: a worker
 * runs many points.)  Only the order of the rows depends on timing;
 * point_id identifies them.
 *
 * Rows.  A row holds the point's keys (sorted), then run's row keys
 * (sorted), then point_id (string) and error (string, "" on success).  A
 * row may repeat a point's key only with the same value.  The first
 * successful row fixes the table's columns and types (io/results.h); a
 * later row that does not fit is recorded as a failure of its point.  A
 * point whose run raises an error (or returns a bad row) gets a row with
 * its message in `error` and defaults in the run's columns (NaN, 0, false,
 * ""); error rows that arrive before the first successful row are held
 * until it fixes the columns (or, when no point succeeds, written with the
 * point's columns only).  The sweep goes on; the failures are counted for
 * the exit status (js_sweep_take_failed).
 *
 * Resume.  In mode "append" (the default) an existing table is read first
 * and the points whose point_id it holds are skipped.  With retry_failed
 * (the default) the error rows of this sweep's points are first removed
 * (res_table_filter, crash-safe) and those points run again, so that every
 * point ends up with exactly one row.  Every row is flushed when written
 * (io/results.c: a kill -9 keeps every written row), so an interrupted
 * sweep loses only the points in flight.
 *
 * Crashes.  A worker that dies (killed, crashed in C) is seen as EOF on its
 * socket; it is reaped with waitpid, its point is run once more on a new
 * worker, and when that dies too the point is recorded as failed with the
 * way the worker died.  Workers die with the parent (PR_SET_PDEATHSIG on
 * Linux; elsewhere at their next write).
 *
 * MPI (builds with -DJOULESIM_MPI, started by mpirun/srun).  Every rank
 * runs the script; rank 0 resumes, holds the queue and is the only writer;
 * the other ranks ask it for points as their workers fall idle and send
 * the rows back (see "MPI: points across ranks" below, and docs/sweeps.md).
 * Rows do not depend on the number of ranks.  A rank that dies takes the
 * job down; the rerun resumes.
 *
 * What a worker must not do: write the sweep's results file (its HDF5
 * state is a copy of the parent's; io/results.c refuses writes through an
 * inherited table), call js.sweep (refused), or os.exit (refused: it would
 * run the parent's exit handlers in the child).  Workers end with _exit()
 * after flushing stdio, so they never run exit handlers either.
 */
#include "lua/sweep.h"
#include "lua/luautil.h"
#include "io/results.h"

#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#ifdef JOULESIM_MPI
#include <fcntl.h>
#include <mpi.h>
#endif
#ifndef MSG_NOSIGNAL /* not Linux: a worker that died may raise SIGPIPE */
#define MSG_NOSIGNAL 0
#endif

G_DEFINE_QUARK(js-sweep-error-quark, js_sweep_error)

#define SWEEP_FN "js.sweep"
#define SWEEP_WORKER_KEY "joulesim.sweep.worker"
/* Largest number of points a grid may expand to. */
#define SWEEP_MAX_POINTS 10000000
/* Most attempts at a point whose worker dies. */
#define SWEEP_MAX_ATTEMPTS 2

/* ---- point identity ------------------------------------------------------- */

static int compare_values(gconstpointer a, gconstpointer b)
{
  return strcmp(((const ResValue *)a)->name, ((const ResValue *)b)->name);
}

static void append_quoted(GString *out, const char *s)
{
  g_string_append_c(out, '"');
  for (const guchar *p = (const guchar *)s; *p != '\0'; p++) {
    switch (*p) {
    case '"': g_string_append(out, "\\\""); break;
    case '\\': g_string_append(out, "\\\\"); break;
    case '\n': g_string_append(out, "\\n"); break;
    case '\t': g_string_append(out, "\\t"); break;
    case '\r': g_string_append(out, "\\r"); break;
    default:
      if (*p < 0x20 || *p == 0x7f)
        g_string_append_printf(out, "\\u%04x", *p);
      else
        g_string_append_c(out, (char)*p);
    }
  }
  g_string_append_c(out, '"');
}

static gboolean plain_name(const char *s)
{
  if (!(g_ascii_isalpha(s[0]) || s[0] == '_'))
    return FALSE;
  for (const char *p = s; *p != '\0'; p++)
    if (!(g_ascii_isalnum(*p) || *p == '_' || *p == '.' || *p == '-'))
      return FALSE;
  return TRUE;
}

/* The shortest "%.Ng" of v that reads back as v, marked as a float. */
static void append_double(GString *out, double v)
{
  if (isnan(v)) {
    g_string_append(out, "nan");
    return;
  }
  if (isinf(v)) {
    g_string_append(out, v > 0 ? "inf" : "-inf");
    return;
  }
  char buf[G_ASCII_DTOSTR_BUF_SIZE];
  for (int prec = 1; prec <= 17; prec++) {
    char fmt[8];
    g_snprintf(fmt, sizeof fmt, "%%.%dg", prec);
    g_ascii_formatd(buf, sizeof buf, fmt, v);
    if (g_ascii_strtod(buf, NULL) == v)
      break;
  }
  g_string_append(out, buf);
  if (strpbrk(buf, ".eE") == NULL)
    g_string_append(out, ".0");
}

static void append_value(GString *out, const ResValue *v)
{
  switch (v->type) {
  case RES_INT:
    g_string_append_printf(out, "%" G_GINT64_FORMAT, v->i);
    break;
  case RES_FLOAT: append_double(out, v->f); break;
  case RES_BOOL: g_string_append(out, v->i ? "true" : "false"); break;
  case RES_STRING: append_quoted(out, v->s != NULL ? v->s : ""); break;
  }
}

char *js_sweep_point_id(const ResValue *values, guint n)
{
  g_return_val_if_fail(values != NULL || n == 0, NULL);
  g_autofree ResValue *sorted = g_memdup2(values, sizeof(ResValue) * n);
  if (n > 0)
    qsort(sorted, n, sizeof(ResValue), compare_values);
  GString *out = g_string_new(NULL);
  for (guint i = 0; i < n; i++) {
    if (i > 0)
      g_string_append_c(out, ',');
    if (plain_name(sorted[i].name))
      g_string_append(out, sorted[i].name);
    else
      append_quoted(out, sorted[i].name);
    g_string_append_c(out, '=');
    append_value(out, &sorted[i]);
  }
  return g_string_free(out, FALSE);
}

/* Two values of the same key are the same value (2 and 2.0 are). */
static gboolean values_equal(const ResValue *a, const ResValue *b)
{
  gboolean an = a->type == RES_INT || a->type == RES_FLOAT;
  gboolean bn = b->type == RES_INT || b->type == RES_FLOAT;
  if (an && bn) {
    if (a->type == RES_INT && b->type == RES_INT)
      return a->i == b->i;
    double x = a->type == RES_INT ? (double)a->i : a->f;
    double y = b->type == RES_INT ? (double)b->i : b->f;
    return x == y || (isnan(x) && isnan(y));
  }
  if (a->type != b->type)
    return FALSE;
  if (a->type == RES_BOOL)
    return (a->i != 0) == (b->i != 0);
  return strcmp(a->s, b->s) == 0;
}

/* ---- wire format ---------------------------------------------------------- */

static void put_u32(GByteArray *b, guint32 v)
{
  g_byte_array_append(b, (const guint8 *)&v, sizeof v);
}

static void put_str(GByteArray *b, const char *s)
{
  gsize n = strlen(s);
  g_assert(n <= G_MAXUINT32);
  put_u32(b, (guint32)n);
  g_byte_array_append(b, (const guint8 *)s, (guint)n + 1);
}

GByteArray *js_sweep_encode(JsSweepMsgKind kind, guint32 index,
                            const char *text, const ResValue *values,
                            guint n)
{
  g_return_val_if_fail(values != NULL || n == 0, NULL);
  GByteArray *b = g_byte_array_new();
  put_u32(b, 0); /* length, patched below */
  guint8 k = (guint8)kind;
  g_byte_array_append(b, &k, 1);
  put_u32(b, index);
  put_str(b, text != NULL ? text : "");
  put_u32(b, n);
  for (guint i = 0; i < n; i++) {
    const ResValue *v = &values[i];
    guint8 tag = v->type == RES_INT     ? 'i'
                 : v->type == RES_FLOAT ? 'f'
                 : v->type == RES_BOOL  ? 'b'
                                        : 's';
    g_byte_array_append(b, &tag, 1);
    put_str(b, v->name);
    switch (v->type) {
    case RES_INT: g_byte_array_append(b, (const guint8 *)&v->i, 8); break;
    case RES_FLOAT: g_byte_array_append(b, (const guint8 *)&v->f, 8); break;
    case RES_BOOL: {
      guint8 x = v->i != 0;
      g_byte_array_append(b, &x, 1);
      break;
    }
    case RES_STRING: put_str(b, v->s != NULL ? v->s : ""); break;
    }
  }
  guint32 len = b->len - 4;
  memcpy(b->data, &len, sizeof len);
  return b;
}

typedef struct {
  const guint8 *buf;
  gsize len, pos;
  GError **error;
} Reader;

static gboolean rd_fail(Reader *r, const char *what)
{
  g_set_error(r->error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
              "malformed sweep message at byte %" G_GSIZE_FORMAT " of %"
              G_GSIZE_FORMAT ": %s",
              r->pos, r->len, what);
  return FALSE;
}

static gboolean rd_bytes(Reader *r, void *out, gsize n, const char *what)
{
  if (r->len - r->pos < n)
    return rd_fail(r, what);
  memcpy(out, r->buf + r->pos, n);
  r->pos += n;
  return TRUE;
}

/* A length-prefixed, NUL-terminated string without inner NULs, borrowed
 * from the buffer. */
static gboolean rd_str(Reader *r, const char **out, const char *what)
{
  guint32 n = 0;
  if (!rd_bytes(r, &n, 4, what))
    return FALSE;
  if (r->len - r->pos < (gsize)n + 1)
    return rd_fail(r, what);
  const char *s = (const char *)r->buf + r->pos;
  if (s[n] != '\0' || memchr(s, '\0', n) != NULL)
    return rd_fail(r, what);
  *out = s;
  r->pos += (gsize)n + 1;
  return TRUE;
}

void js_sweep_msg_clear(JsSweepMsg *msg)
{
  if (msg->values != NULL)
    g_array_unref(msg->values);
  memset(msg, 0, sizeof *msg);
}

gboolean js_sweep_decode(const guint8 *buf, gsize len, JsSweepMsg *msg,
                         GError **error)
{
  g_return_val_if_fail(buf != NULL || len == 0, FALSE);
  g_return_val_if_fail(msg != NULL, FALSE);
  memset(msg, 0, sizeof *msg);
  Reader r = { buf, len, 0, error };
  guint8 kind = 0;
  guint32 n = 0;
  if (!rd_bytes(&r, &kind, 1, "no message kind"))
    return FALSE;
  if (kind != JS_SWEEP_MSG_POINT && kind != JS_SWEEP_MSG_ROW &&
      kind != JS_SWEEP_MSG_ERROR) {
    r.pos--;
    return rd_fail(&r, "unknown message kind");
  }
  msg->kind = (JsSweepMsgKind)kind;
  if (!rd_bytes(&r, &msg->index, 4, "truncated point index") ||
      !rd_str(&r, &msg->text, "bad text") ||
      !rd_bytes(&r, &n, 4, "truncated value count"))
    goto fail;
  /* Each value takes at least 8 bytes (a bool with a one-letter name):
   * bounds the allocation. */
  if (n > (len - r.pos) / 8) {
    rd_fail(&r, "value count larger than the message");
    goto fail;
  }
  msg->values = g_array_sized_new(FALSE, TRUE, sizeof(ResValue), n);
  for (guint32 i = 0; i < n; i++) {
    ResValue v = { 0 };
    guint8 tag = 0;
    if (!rd_bytes(&r, &tag, 1, "truncated value type") ||
        !rd_str(&r, &v.name, "bad value name"))
      goto fail;
    if (v.name[0] == '\0') {
      rd_fail(&r, "empty value name");
      goto fail;
    }
    gboolean ok = TRUE;
    switch (tag) {
    case 'i':
      v.type = RES_INT;
      ok = rd_bytes(&r, &v.i, 8, "truncated integer");
      break;
    case 'f':
      v.type = RES_FLOAT;
      ok = rd_bytes(&r, &v.f, 8, "truncated float");
      break;
    case 'b': {
      guint8 x = 0;
      v.type = RES_BOOL;
      ok = rd_bytes(&r, &x, 1, "truncated boolean");
      if (ok && x > 1)
        ok = rd_fail(&r, "boolean not 0 or 1");
      v.i = x;
      break;
    }
    case 's':
      v.type = RES_STRING;
      ok = rd_str(&r, &v.s, "bad string value");
      break;
    default:
      ok = rd_fail(&r, "unknown value type");
    }
    if (!ok)
      goto fail;
    g_array_append_val(msg->values, v);
  }
  if (r.pos != len) {
    rd_fail(&r, "trailing bytes");
    goto fail;
  }
  return TRUE;

fail:
  js_sweep_msg_clear(msg);
  return FALSE;
}

/* Reads exactly n bytes; 1 done, 0 EOF before the first byte, -1 error
 * (errno set; a partial read is EPIPE). */
static int read_full(int fd, void *buf, gsize n)
{
  gsize got = 0;
  while (got < n) {
    ssize_t k = read(fd, (guint8 *)buf + got, n - got);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return -1;
    if (k == 0) {
      if (got == 0)
        return 0;
      errno = EPIPE;
      return -1;
    }
    got += (gsize)k;
  }
  return 1;
}

/* Writes all of buf to a socket without SIGPIPE; FALSE with errno set. */
static gboolean send_full(int fd, const guint8 *buf, gsize n)
{
  gsize done = 0;
  while (done < n) {
    ssize_t k = send(fd, buf + done, n - done, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      return FALSE;
    done += (gsize)k;
  }
  return TRUE;
}

/* Reads one frame's payload: a new array, or NULL at EOF (*eof set) or on
 * an error (error set). */
static GByteArray *read_frame(int fd, gboolean *eof, GError **error)
{
  *eof = FALSE;
  guint32 len = 0;
  int rc = read_full(fd, &len, sizeof len);
  if (rc == 0) {
    *eof = TRUE;
    return NULL;
  }
  if (rc < 0) {
    int e = errno;
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "reading from a sweep process: %s", g_strerror(e));
    return NULL;
  }
  if (len > JS_SWEEP_MAX_FRAME) {
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                "sweep message of %u bytes is larger than the %u allowed",
                len, JS_SWEEP_MAX_FRAME);
    return NULL;
  }
  GByteArray *b = g_byte_array_sized_new(len);
  g_byte_array_set_size(b, len);
  if (len > 0 && read_full(fd, b->data, len) != 1) {
    int e = errno ? errno : EPIPE;
    g_byte_array_unref(b);
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "reading from a sweep process: %s", g_strerror(e));
    return NULL;
  }
  return b;
}

/* ---- flat Lua tables <-> values -------------------------------------------- */

/* Reads the flat table at idx into vals (ResValue, sorted by name; names
 * and strings borrowed from Lua, valid while the table is).  On a bad key
 * or value returns a message (owned by the caller) naming `what` and the
 * key. */
static char *flat_from_lua(lua_State *L, int idx, const char *what,
                           GArray *vals)
{
  idx = lua_absindex(L, idx);
  g_array_set_size(vals, 0);
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      char *m = g_strdup_printf("%s has a %s key (%s); keys must be names "
                                "(strings)",
                                what, luaL_typename(L, -2),
                                lua_type(L, -2) == LUA_TNUMBER
                                  ? "a list entry?"
                                  : "not a name");
      lua_pop(L, 2);
      return m;
    }
    ResValue v = { 0 };
    size_t klen = 0;
    v.name = lua_tolstring(L, -2, &klen);
    if (klen == 0 || strlen(v.name) != klen || !g_utf8_validate(v.name, -1, NULL)) {
      lua_pop(L, 2);
      return g_strdup_printf("%s has a key that is empty, not UTF-8 or holds "
                             "a NUL byte", what);
    }
    switch (lua_type(L, -1)) {
    case LUA_TNUMBER:
      if (lua_isinteger(L, -1)) {
        v.type = RES_INT;
        v.i = lua_tointeger(L, -1);
      } else {
        v.type = RES_FLOAT;
        v.f = lua_tonumber(L, -1);
      }
      break;
    case LUA_TBOOLEAN:
      v.type = RES_BOOL;
      v.i = lua_toboolean(L, -1);
      break;
    case LUA_TSTRING: {
      size_t slen = 0;
      v.type = RES_STRING;
      v.s = lua_tolstring(L, -1, &slen);
      if (strlen(v.s) != slen || !g_utf8_validate(v.s, -1, NULL)) {
        char *m = g_strdup_printf("%s.%s is a string that is not UTF-8 or "
                                  "holds a NUL byte", what, v.name);
        lua_pop(L, 2);
        return m;
      }
      break;
    }
    default: {
      char *m = g_strdup_printf("%s.%s is a %s; values must be numbers, "
                                "integers, booleans or strings (not nested)",
                                what, v.name, luaL_typename(L, -1));
      lua_pop(L, 2);
      return m;
    }
    }
    g_array_append_val(vals, v);
    lua_pop(L, 1);
  }
  g_array_sort(vals, compare_values);
  return NULL;
}

static void push_values(lua_State *L, const ResValue *vals, guint n)
{
  lua_createtable(L, 0, (int)n);
  for (guint i = 0; i < n; i++) {
    const ResValue *v = &vals[i];
    switch (v->type) {
    case RES_INT: lua_pushinteger(L, v->i); break;
    case RES_FLOAT: lua_pushnumber(L, v->f); break;
    case RES_BOOL: lua_pushboolean(L, v->i != 0); break;
    case RES_STRING: lua_pushstring(L, v->s); break;
    }
    lua_setfield(L, -2, v->name);
  }
}

/* ---- the sweep ------------------------------------------------------------- */

typedef struct {
  ResValue *vals; /* n, sorted by name (owned); names and strings in
                     sw->strings */
  guint n;
  char *id;       /* point_id, in sw->strings */
  guint attempts; /* workers that died running it */
} SweepPoint;

typedef struct {
  pid_t pid;   /* -1: not running */
  int fd;      /* the parent's end of the socketpair */
  gint64 cur;  /* index of the point in flight, -1 when idle */
} SweepWorker;

typedef struct {
  guint index;
  char *message;
} SweepPending;

typedef struct {
  JsSession *session;
  GStringChunk *strings;
  GArray *points;     /* SweepPoint */
  char **keys;        /* the points' keys, sorted (in strings) */
  ResType *key_types;
  guint n_keys;
  const char *out;    /* in strings */
  const char *table;  /* in strings */
  ResMode mode;
  gboolean retry_failed, progress;
  guint jobs;
  int run_idx;        /* stack index of `run` */
  ResTable *t;
  GArray *workers;    /* SweepWorker */
  GQueue todo;        /* point index + 1 */
  GArray *pending;    /* SweepPending: errors before the first good row */
  GPtrArray *failures; /* alternating point_id, message (owned) */
  guint done, skipped, failed, ran;
  guint64 existing_rows; /* rows of the table before this call */
  gint64 started_us, last_progress_us;
  pid_t parent;
#ifdef JOULESIM_MPI
  int rank, size;       /* MPI rank and ranks; size 1: not distributed */
  gboolean exhausted;   /* rank > 0: rank 0 has no more points for us */
  guint open_ranks;     /* rank 0: ranks not yet told "no more points" */
  guint remote_flight;  /* rank 0: points out on other ranks */
  gint *holder;         /* rank 0: rank running point i, -1 none */
  gboolean *closed;     /* rank 0: rank r told "no more" (or stopped) */
  gboolean peer_stopped; /* rank 0 stopped the sweep (rank > 0) */
#endif
} Sweep;

typedef struct {
  Sweep *sw;
} LSweep;

#define SWEEP_MT "joulesim.Sweep"

static SweepPoint *point_at(Sweep *sw, guint i)
{
  return &g_array_index(sw->points, SweepPoint, i);
}

/* Stops every worker still running (SIGKILL) and reaps it. */
static void sweep_kill_workers(Sweep *sw)
{
  for (guint i = 0; sw->workers != NULL && i < sw->workers->len; i++) {
    SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
    if (w->fd >= 0)
      close(w->fd);
    w->fd = -1;
    if (w->pid > 0) {
      kill(w->pid, SIGKILL);
      while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    }
    w->pid = -1;
  }
}

static void sweep_free(Sweep *sw)
{
  if (sw == NULL)
    return;
  /* Only the process that made the workers and opened the table owns
   * them (a worker holds a copy of this struct). */
  if (sw->parent == getpid()) {
    sweep_kill_workers(sw);
    if (sw->t != NULL)
      res_table_free(sw->t);
  }
  if (sw->workers != NULL)
    g_array_unref(sw->workers);
  for (guint i = 0; sw->points != NULL && i < sw->points->len; i++)
    g_free(g_array_index(sw->points, SweepPoint, i).vals);
  if (sw->points != NULL)
    g_array_unref(sw->points);
  if (sw->pending != NULL) {
    for (guint i = 0; i < sw->pending->len; i++)
      g_free(g_array_index(sw->pending, SweepPending, i).message);
    g_array_unref(sw->pending);
  }
  if (sw->failures != NULL)
    g_ptr_array_unref(sw->failures);
  g_queue_clear(&sw->todo);
  g_free(sw->keys);
  g_free(sw->key_types);
#ifdef JOULESIM_MPI
  g_free(sw->holder);
  g_free(sw->closed);
#endif
  if (sw->strings != NULL)
    g_string_chunk_free(sw->strings);
  g_free(sw);
}

static int sweep_gc(lua_State *L)
{
  LSweep *u = luaL_checkudata(L, 1, SWEEP_MT);
  sweep_free(u->sw);
  u->sw = NULL;
  return 0;
}

/* ---- building the points --------------------------------------------------- */

static const char *const reserved_keys[] = { "point_id", "error", NULL };

static gboolean is_reserved(const char *k)
{
  return g_strv_contains(reserved_keys, k);
}

/* Checks one grid/point value at the top of the stack; raises naming
 * `where` (e.g. "grid.tp[2]"). */
static void check_scalar(lua_State *L, const char *where)
{
  int t = lua_type(L, -1);
  if (t == LUA_TNUMBER || t == LUA_TBOOLEAN)
    return;
  if (t == LUA_TSTRING) {
    size_t n = 0;
    const char *s = lua_tolstring(L, -1, &n);
    if (strlen(s) != n || !g_utf8_validate(s, -1, NULL))
      luaL_error(L, "%s: %s is a string that is not UTF-8 or holds a NUL "
                    "byte", SWEEP_FN, where);
    return;
  }
  luaL_error(L, "%s: %s is a %s; point values must be numbers, integers, "
                "booleans or strings (not nested: use a name and build the "
                "object in run)", SWEEP_FN, where, luaL_typename(L, -1));
}

/* Copies the Lua value at the top of the stack (checked by check_scalar)
 * into v, strings into sw->strings; as_float turns integers into floats. */
static void value_from_top(lua_State *L, Sweep *sw, const char *name,
                           gboolean as_float, ResValue *v)
{
  if (!jsl_value_from_top(L, name, v))
    g_assert_not_reached();
  if (v->type == RES_INT && as_float) {
    v->type = RES_FLOAT;
    v->f = (double)v->i;
    v->i = 0;
  } else if (v->type == RES_STRING) {
    v->s = g_string_chunk_insert_const(sw->strings, v->s);
  }
}

static int compare_strs(gconstpointer a, gconstpointer b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sets sw->keys from the keys of the table at idx (sorted); raises on a
 * key that is not a name or is reserved. */
static void sweep_set_keys(lua_State *L, Sweep *sw, int idx, const char *what)
{
  g_autoptr(GPtrArray) keys = g_ptr_array_new();
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pushfstring(L, "%s: %s keys must be names (strings), got a %s key",
                      SWEEP_FN, what, luaL_typename(L, -1));
      g_ptr_array_unref(g_steal_pointer(&keys));
      lua_error(L);
    }
    size_t n = 0;
    const char *k = lua_tolstring(L, -1, &n);
    if (n == 0 || strlen(k) != n || !g_utf8_validate(k, -1, NULL) ||
        is_reserved(k)) {
      lua_pushfstring(L, "%s: %s key '%s' is not allowed (%s)", SWEEP_FN,
                      what, k,
                      is_reserved(k) ? "js.sweep writes its own 'point_id' "
                                       "and 'error' columns"
                                     : "empty, not UTF-8 or with a NUL byte");
      g_ptr_array_unref(g_steal_pointer(&keys));
      lua_error(L);
    }
    g_ptr_array_add(keys, g_string_chunk_insert_const(sw->strings, k));
  }
  g_ptr_array_sort(keys, compare_strs);
  sw->n_keys = keys->len;
  sw->keys = g_new0(char *, keys->len + 1);
  sw->key_types = g_new0(ResType, keys->len + 1);
  for (guint i = 0; i < keys->len; i++)
    sw->keys[i] = g_ptr_array_index(keys, i);
}

/* Adds a point made of vals (n == sw->n_keys, in key order; copied). */
static void sweep_add_point(Sweep *sw, const ResValue *vals)
{
  SweepPoint p = { 0 };
  p.n = sw->n_keys;
  p.vals = g_memdup2(vals, sizeof(ResValue) * MAX(p.n, 1));
  g_autofree char *id = js_sweep_point_id(vals, p.n);
  p.id = g_string_chunk_insert_const(sw->strings, id);
  g_array_append_val(sw->points, p);
}

/* grid = { key = {v1, v2, ...}, ... }: the Cartesian product. */
static void sweep_points_from_grid(lua_State *L, Sweep *sw, int grid)
{
  sweep_set_keys(L, sw, grid, "grid");
  if (sw->n_keys == 0)
    luaL_error(L, "%s: argument 'grid' is empty (give at least one key with "
                  "a list of values)", SWEEP_FN);
  guint n = sw->n_keys;
  /* Scratch arrays as Lua memory: a Lua error below must not leak. */
  guint *len = lua_newuserdatauv(L, sizeof(guint) * n, 0);
  gboolean *as_float = lua_newuserdatauv(L, sizeof(gboolean) * n, 0);
  guint *at = lua_newuserdatauv(L, sizeof(guint) * n, 0);
  ResValue *vals = lua_newuserdatauv(L, sizeof(ResValue) * n, 0);
  memset(at, 0, sizeof(guint) * n);
  guint64 total = 1;
  for (guint k = 0; k < n; k++) {
    const char *key = sw->keys[k];
    int t = lua_getfield(L, grid, key);
    if (t != LUA_TTABLE)
      luaL_error(L, "%s: grid.%s must be a list of values (got %s; write "
                    "{ value } for a single one)", SWEEP_FN, key,
                 lua_typename(L, t));
    lua_Integer m = (lua_Integer)lua_rawlen(L, -1);
    /* Only 1..m: no holes, no named entries. */
    lua_Integer count = 0;
    lua_pushnil(L);
    while (lua_next(L, -2) != 0) {
      lua_pop(L, 1);
      count++;
      if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
          lua_tointeger(L, -1) > m)
        luaL_error(L, "%s: grid.%s must be a list (an array) of values; it "
                      "has the key %s", SWEEP_FN, key,
                   luaL_tolstring(L, -1, NULL));
    }
    if (m == 0 || count != m)
      luaL_error(L, "%s: grid.%s %s", SWEEP_FN, key,
                 m == 0 ? "is an empty list (give at least one value)"
                        : "is a list with holes");
    int kind0 = LUA_TNONE;
    gboolean has_float = FALSE;
    for (lua_Integer j = 1; j <= m; j++) {
      lua_rawgeti(L, -1, j);
      char where[200];
      g_snprintf(where, sizeof where, "grid.%s[%d]", key, (int)j);
      check_scalar(L, where);
      int kind = lua_type(L, -1); /* ints and floats are one kind */
      if (kind0 == LUA_TNONE)
        kind0 = kind;
      else if (kind != kind0)
        luaL_error(L, "%s: %s is a %s but grid.%s[1] is a %s (one type per "
                      "key)", SWEEP_FN, where, lua_typename(L, kind), key,
                   lua_typename(L, kind0));
      if (kind == LUA_TNUMBER && !lua_isinteger(L, -1))
        has_float = TRUE;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    len[k] = (guint)m;
    as_float[k] = has_float;
    total *= (guint64)m;
    if (total > SWEEP_MAX_POINTS)
      luaL_error(L, "%s: the grid has more than %d points", SWEEP_FN,
                 SWEEP_MAX_POINTS);
  }

  /* The product, the last key fastest.  Values are read again from the
   * (checked) lists. */
  for (guint64 p = 0; p < total; p++) {
    for (guint k = 0; k < n; k++) {
      lua_getfield(L, grid, sw->keys[k]);
      lua_rawgeti(L, -1, (lua_Integer)at[k] + 1);
      value_from_top(L, sw, sw->keys[k], as_float[k], &vals[k]);
      lua_pop(L, 2);
    }
    if (p == 0)
      for (guint k = 0; k < n; k++)
        sw->key_types[k] = vals[k].type;
    sweep_add_point(sw, vals);
    for (gint k = (gint)n - 1; k >= 0; k--) {
      if (++at[k] < len[k])
        break;
      at[k] = 0;
    }
  }
  lua_pop(L, 4);
}

/* points = { {k = v, ...}, ... }: every point with the same keys. */
static void sweep_points_from_list(lua_State *L, Sweep *sw, int list)
{
  lua_Integer m = (lua_Integer)lua_rawlen(L, list);
  if (m > SWEEP_MAX_POINTS)
    luaL_error(L, "%s: more than %d points", SWEEP_FN, SWEEP_MAX_POINTS);
  lua_Integer count = 0;
  lua_pushnil(L);
  while (lua_next(L, list) != 0) {
    lua_pop(L, 1);
    count++;
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
        lua_tointeger(L, -1) > m)
      luaL_error(L, "%s: argument 'points' must be a list of points; it has "
                    "the key %s", SWEEP_FN, luaL_tolstring(L, -1, NULL));
  }
  if (count != m)
    luaL_error(L, "%s: argument 'points' is a list with holes", SWEEP_FN);
  if (m == 0)
    return;

  /* Keys from the first point; kinds and float-ness over all points. */
  lua_rawgeti(L, list, 1);
  if (!lua_istable(L, -1))
    luaL_error(L, "%s: points[1] must be a table of values (got %s)",
               SWEEP_FN, luaL_typename(L, -1));
  sweep_set_keys(L, sw, lua_gettop(L), "points[1]");
  lua_pop(L, 1);
  guint n = sw->n_keys;
  /* Scratch arrays as Lua memory: a Lua error below must not leak. */
  int *kind = lua_newuserdatauv(L, sizeof(int) * MAX(n, 1), 0);
  gboolean *as_float = lua_newuserdatauv(L, sizeof(gboolean) * MAX(n, 1), 0);
  ResValue *vals = lua_newuserdatauv(L, sizeof(ResValue) * MAX(n, 1), 0);
  memset(as_float, 0, sizeof(gboolean) * MAX(n, 1));
  for (guint k = 0; k < n; k++)
    kind[k] = LUA_TNONE;
  for (lua_Integer j = 1; j <= m; j++) {
    lua_rawgeti(L, list, j);
    if (!lua_istable(L, -1))
      luaL_error(L, "%s: points[%d] must be a table of values (got %s)",
                 SWEEP_FN, (int)j, luaL_typename(L, -1));
    int pt = lua_gettop(L);
    guint seen = 0;
    lua_pushnil(L);
    while (lua_next(L, pt) != 0) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: points[%d] has a %s key; keys must be names",
                   SWEEP_FN, (int)j, luaL_typename(L, -1));
      const char *k = lua_tostring(L, -1);
      gboolean known = FALSE;
      for (guint i = 0; i < n && !known; i++)
        known = strcmp(sw->keys[i], k) == 0;
      if (!known)
        luaL_error(L, "%s: points[%d] has the key '%s', which points[1] has "
                      "not (every point needs the same keys)", SWEEP_FN,
                   (int)j, k);
      seen++;
    }
    if (seen != n) {
      for (guint k = 0; k < n; k++) {
        if (lua_getfield(L, pt, sw->keys[k]) == LUA_TNIL)
          luaL_error(L, "%s: points[%d] lacks the key '%s' of points[1] "
                        "(every point needs the same keys)", SWEEP_FN,
                     (int)j, sw->keys[k]);
        lua_pop(L, 1);
      }
    }
    for (guint k = 0; k < n; k++) {
      lua_getfield(L, pt, sw->keys[k]);
      char where[200];
      g_snprintf(where, sizeof where, "points[%d].%s", (int)j, sw->keys[k]);
      check_scalar(L, where);
      int vk = lua_type(L, -1);
      if (kind[k] == LUA_TNONE)
        kind[k] = vk;
      else if (vk != kind[k])
        luaL_error(L, "%s: %s is a %s but points[1].%s is a %s (one type per "
                      "key)", SWEEP_FN, where, lua_typename(L, vk),
                   sw->keys[k], lua_typename(L, kind[k]));
      if (vk == LUA_TNUMBER && !lua_isinteger(L, -1))
        as_float[k] = TRUE;
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  for (lua_Integer j = 1; j <= m; j++) {
    lua_rawgeti(L, list, j);
    for (guint k = 0; k < n; k++) {
      lua_getfield(L, -1, sw->keys[k]);
      value_from_top(L, sw, sw->keys[k], as_float[k], &vals[k]);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (j == 1)
      for (guint k = 0; k < n; k++)
        sw->key_types[k] = vals[k].type;
    sweep_add_point(sw, vals);
  }
  lua_pop(L, 3);
}

/* Two points with the same id would make the table ambiguous. */
static void sweep_check_duplicates(lua_State *L, Sweep *sw)
{
  g_autoptr(GHashTable) ids = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < sw->points->len; i++) {
    SweepPoint *p = point_at(sw, i);
    gpointer prev = NULL;
    if (g_hash_table_lookup_extended(ids, p->id, NULL, &prev)) {
      lua_pushfstring(L, "%s: points %d and %d are the same point (%s); "
                         "every point must differ", SWEEP_FN,
                      GPOINTER_TO_INT(prev) + 1, (int)i + 1, p->id);
      g_hash_table_unref(g_steal_pointer(&ids));
      lua_error(L);
    }
    g_hash_table_insert(ids, p->id, GINT_TO_POINTER((int)i));
  }
}

/* ---- resume ------------------------------------------------------------------ */

static const ResValue *row_cell(GPtrArray *row, const char *name)
{
  for (guint i = 0; i < row->len; i++) {
    const ResValue *v = g_ptr_array_index(row, i);
    if (strcmp(v->name, name) == 0)
      return v;
  }
  return NULL;
}

typedef struct {
  GHashTable *ids; /* point ids of this sweep whose error rows go */
} RetryFilter;

static gboolean keep_unless_retried(GPtrArray *row, gpointer data)
{
  RetryFilter *f = data;
  const ResValue *id = row_cell(row, "point_id");
  const ResValue *err = row_cell(row, "error");
  if (id == NULL || err == NULL || err->type != RES_STRING ||
      id->type != RES_STRING)
    return TRUE;
  return err->s[0] == '\0' || !g_hash_table_contains(f->ids, id->s);
}

/* Reads the existing table (append mode) and marks the points it holds as
 * done; with retry_failed first removes this sweep's error rows.  Checks
 * that the table is a sweep table whose columns hold the points' keys. */
static gboolean sweep_resume(Sweep *sw, GHashTable *done_ids, GError **error)
{
  if (sw->mode != RES_MODE_APPEND || !g_file_test(sw->out, G_FILE_TEST_EXISTS))
    return TRUE;
  GError *err = NULL;
  g_autoptr(GPtrArray) rows = res_table_read(sw->out, sw->table, &err);
  if (rows == NULL) {
    if (g_error_matches(err, RES_ERROR, RES_ERROR_IO) &&
        strstr(err->message, "no such table") != NULL) {
      g_error_free(err);
      return TRUE;
    }
    g_propagate_error(error, err);
    return FALSE;
  }
  if (rows->len > 0) {
    GPtrArray *row0 = g_ptr_array_index(rows, 0);
    const ResValue *id = row_cell(row0, "point_id");
    const ResValue *e = row_cell(row0, "error");
    if (id == NULL || e == NULL || id->type != RES_STRING ||
        e->type != RES_STRING) {
      g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                  "%s: table '%s' exists but was not written by js.sweep (no "
                  "string columns 'point_id' and 'error'); use another table "
                  "or mode = \"replace\"",
                  sw->out, sw->table);
      return FALSE;
    }
    for (guint k = 0; k < sw->n_keys; k++) {
      const ResValue *c = row_cell(row0, sw->keys[k]);
      gboolean fits = c != NULL &&
                      (c->type == sw->key_types[k] ||
                       (c->type == RES_FLOAT && sw->key_types[k] == RES_INT));
      if (!fits) {
        g_set_error(error, RES_ERROR, RES_ERROR_SCHEMA,
                    "%s: table '%s' holds another sweep: %s (use another "
                    "table or mode = \"replace\")",
                    sw->out, sw->table,
                    c == NULL ? "it has no column for the key" : "its column "
                    "has another type than the key");
        g_prefix_error(error, "key '%s': ", sw->keys[k]);
        return FALSE;
      }
    }
  }

  g_autoptr(GHashTable) mine = g_hash_table_new(g_str_hash, g_str_equal);
  for (guint i = 0; i < sw->points->len; i++)
    g_hash_table_add(mine, point_at(sw, i)->id);
  guint retried = 0;
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    const ResValue *id = row_cell(row, "point_id");
    const ResValue *e = row_cell(row, "error");
    /* `mine` maps an id to the point's own copy, the key of done_ids. */
    gpointer own = g_hash_table_lookup(mine, id->s);
    if (own == NULL)
      continue;
    if (sw->retry_failed && e->s[0] != '\0')
      retried++;
    else
      g_hash_table_add(done_ids, own);
  }
  sw->existing_rows = rows->len;
  if (retried > 0) {
    RetryFilter f = { mine };
    guint64 removed = 0;
    if (!res_table_filter(sw->out, sw->table, keep_unless_retried, &f,
                          &removed, error))
      return FALSE;
    sw->existing_rows -= removed;
  }
  return TRUE;
}

/* ---- rows --------------------------------------------------------------------- */

/* Records a failure of point i for the summary and the exit status. */
static void sweep_note_failure(Sweep *sw, guint i, const char *message)
{
  sw->failed++;
  g_ptr_array_add(sw->failures, g_strdup(point_at(sw, i)->id));
  g_ptr_array_add(sw->failures, g_strdup(message));
}

/* Writes the error row of point i with the table's columns (which must be
 * fixed): the point's values, point_id, error, defaults elsewhere. */
static gboolean sweep_write_error_row(Sweep *sw, guint i, const char *message,
                                      GError **error)
{
  SweepPoint *p = point_at(sw, i);
  g_autofree char *msg = g_utf8_make_valid(message, -1);
  guint nc = res_table_n_columns(sw->t);
  g_autofree ResValue *row = g_new0(ResValue, MAX(nc, 1));
  for (guint c = 0; c < nc; c++) {
    ResValue *v = &row[c];
    v->name = res_table_column_name(sw->t, c);
    v->type = res_table_column_type(sw->t, c);
    const ResValue *pv = NULL;
    for (guint k = 0; k < p->n && pv == NULL; k++)
      if (strcmp(p->vals[k].name, v->name) == 0)
        pv = &p->vals[k];
    if (pv != NULL) {
      *v = *pv;
    } else if (strcmp(v->name, "point_id") == 0) {
      v->s = p->id;
    } else if (strcmp(v->name, "error") == 0) {
      v->s = msg;
    } else {
      v->f = NAN; /* RES_FLOAT default; 0, false, "" for the others */
      v->s = "";
    }
  }
  return res_table_append(sw->t, row, nc, error);
}

/* Writes the first rows of a table that only ever saw errors: the point's
 * keys, point_id and error. */
static gboolean sweep_define_error_table(Sweep *sw, guint i,
                                         const char *message, GError **error)
{
  SweepPoint *p = point_at(sw, i);
  g_autofree char *msg = g_utf8_make_valid(message, -1);
  g_autofree ResValue *row = g_new0(ResValue, p->n + 2);
  memcpy(row, p->vals, sizeof(ResValue) * p->n);
  row[p->n] = (ResValue){ .name = "point_id", .type = RES_STRING, .s = p->id };
  row[p->n + 1] = (ResValue){ .name = "error", .type = RES_STRING, .s = msg };
  return res_table_append(sw->t, row, p->n + 2, error);
}

static gboolean sweep_write_note(Sweep *sw, GError **error)
{
  return res_table_set_note(sw->t, "sweep_keys",
                            (const char *const *)sw->keys, sw->n_keys, error);
}

/* Point i failed with message: written now when the table has columns,
 * else held until the first good row.  FALSE only on an I/O error. */
static gboolean sweep_failed_point(Sweep *sw, guint i, const char *message,
                                   GError **error)
{
  sweep_note_failure(sw, i, message);
  if (res_table_n_columns(sw->t) == 0) {
    SweepPending pe = { i, g_strdup(message) };
    g_array_append_val(sw->pending, pe);
    return TRUE;
  }
  return sweep_write_error_row(sw, i, message, error);
}

/* Writes the held error rows once the table has columns. */
static gboolean sweep_flush_pending(Sweep *sw, GError **error)
{
  for (guint k = 0; k < sw->pending->len; k++) {
    SweepPending *pe = &g_array_index(sw->pending, SweepPending, k);
    gboolean ok = res_table_n_columns(sw->t) == 0
                    ? sweep_define_error_table(sw, pe->index, pe->message,
                                               error) &&
                        sweep_write_note(sw, error)
                    : sweep_write_error_row(sw, pe->index, pe->message, error);
    if (!ok)
      return FALSE;
    g_clear_pointer(&pe->message, g_free);
  }
  g_array_set_size(sw->pending, 0);
  return TRUE;
}

/* The row of point i from its worker (values sorted by name, without the
 * point's keys).  A row that does not fit the table fails the point. */
static gboolean sweep_good_row(Sweep *sw, guint i, GArray *vals,
                               GError **error)
{
  SweepPoint *p = point_at(sw, i);
  guint n = p->n + vals->len + 2;
  g_autofree ResValue *row = g_new0(ResValue, n);
  memcpy(row, p->vals, sizeof(ResValue) * p->n);
  if (vals->len > 0)
    memcpy(row + p->n, vals->data, sizeof(ResValue) * vals->len);
  row[n - 2] = (ResValue){ .name = "point_id", .type = RES_STRING, .s = p->id };
  row[n - 1] = (ResValue){ .name = "error", .type = RES_STRING, .s = "" };
  gboolean first = res_table_n_columns(sw->t) == 0;
  GError *err = NULL;
  if (!res_table_append(sw->t, row, n, &err)) {
    if (!g_error_matches(err, RES_ERROR, RES_ERROR_SCHEMA)) {
      g_propagate_error(error, err);
      return FALSE;
    }
    g_autofree char *m =
      g_strdup_printf("the row does not fit the table (its columns come from "
                      "the first row): %s", err->message);
    g_error_free(err);
    return sweep_failed_point(sw, i, m, error);
  }
  sw->done++;
  if (first && !sweep_write_note(sw, error))
    return FALSE;
  return sweep_flush_pending(sw, error);
}

/* ---- the worker process ------------------------------------------------------- */

/* Message handler: the error as a string (no traceback: it goes into the
 * `error` column). */
static int worker_msgh(lua_State *L)
{
  if (lua_type(L, 1) == LUA_TSTRING)
    return 1;
  if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
    return 1;
  lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  return 1;
}

static int worker_no_exit(lua_State *L)
{
  return luaL_error(L, "os.exit is not allowed inside a sweep's run function "
                       "(return a row, or raise an error to fail the point)");
}

#define mix64 sim_splitmix64_fin /* sim/pcg.h */

static guint64 fnv1a64(const char *s)
{
  guint64 h = G_GUINT64_CONSTANT(0xcbf29ce484222325);
  for (const guchar *p = (const guchar *)s; *p != '\0'; p++) {
    h ^= *p;
    h *= G_GUINT64_CONSTANT(0x100000001b3);
  }
  return h;
}

/* math.randomseed(seed of this point), when the script has math. */
static void worker_reseed(lua_State *L, guint64 seed, const char *point_id)
{
  int top = lua_gettop(L);
  if (lua_getglobal(L, "math") == LUA_TTABLE &&
      lua_getfield(L, -1, "randomseed") == LUA_TFUNCTION) {
    guint64 s = mix64(seed ^ mix64(fnv1a64(point_id)));
    lua_pushinteger(L, (lua_Integer)(s >> 1));
    lua_pcall(L, 1, 0, 0); /* an error just leaves its message */
  }
  lua_settop(L, top);
}

/* Runs one point; returns the reply frame. */
static GByteArray *worker_run_point(lua_State *L, int run_idx, guint64 seed,
                                    const JsSweepMsg *msg)
{
  int top = lua_gettop(L);
  guint np = msg->values->len;
  const ResValue *pv = (const ResValue *)(void *)msg->values->data;
  worker_reseed(L, seed, msg->text);
  lua_pushcfunction(L, worker_msgh);
  lua_pushvalue(L, run_idx);
  push_values(L, pv, np);
  if (lua_pcall(L, 1, 1, top + 1) != LUA_OK) {
    GByteArray *b = js_sweep_encode(JS_SWEEP_MSG_ERROR, msg->index,
                                    lua_tostring(L, -1), NULL, 0);
    lua_settop(L, top);
    return b;
  }
  g_autofree char *problem = NULL;
  g_autoptr(GArray) row = g_array_new(FALSE, TRUE, sizeof(ResValue));
  if (!lua_istable(L, -1)) {
    problem = g_strdup_printf("run must return a table (the row), got %s",
                              luaL_typename(L, -1));
  } else {
    problem = flat_from_lua(L, -1, "row", row);
  }
  /* Keep only the row's own columns: a point key may repeat, unchanged. */
  for (guint i = 0; problem == NULL && i < row->len;) {
    ResValue *v = &g_array_index(row, ResValue, i);
    if (is_reserved(v->name)) {
      problem = g_strdup_printf("the row has a column '%s', which js.sweep "
                                "writes itself", v->name);
      break;
    }
    const ResValue *same = NULL;
    for (guint k = 0; k < np && same == NULL; k++)
      if (strcmp(pv[k].name, v->name) == 0)
        same = &pv[k];
    if (same == NULL) {
      i++;
      continue;
    }
    if (!values_equal(v, same)) {
      g_autoptr(GString) a = g_string_new(NULL), b = g_string_new(NULL);
      append_value(a, v);
      append_value(b, same);
      problem = g_strdup_printf("the row sets '%s' = %s but the point has %s "
                                "(a row may repeat a point's value, not "
                                "change it)", v->name, a->str, b->str);
      break;
    }
    g_array_remove_index(row, i);
  }
  GByteArray *b =
    problem != NULL
      ? js_sweep_encode(JS_SWEEP_MSG_ERROR, msg->index, problem, NULL, 0)
      : js_sweep_encode(JS_SWEEP_MSG_ROW, msg->index, NULL,
                        (const ResValue *)(void *)row->data, row->len);
  lua_settop(L, top);
  return b;
}

/* The worker's life: points in, rows out, until the parent closes the
 * socket.  Never returns. */
static G_GNUC_NORETURN void worker_main(lua_State *L, int run_idx, int fd,
                                        guint64 seed, pid_t parent)
{
#ifdef __linux__
  prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
  if (getppid() != parent)
    _exit(0);
  res_release_files_in_child(); /* the parent's HDF5 files, and locks */
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, SWEEP_WORKER_KEY);
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_pushcfunction(L, worker_no_exit);
    lua_setfield(L, -2, "exit");
  }
  lua_pop(L, 1);

  for (;;) {
    gboolean eof = FALSE;
    GError *err = NULL;
    g_autoptr(GByteArray) frame = read_frame(fd, &eof, &err);
    if (frame == NULL) {
      g_clear_error(&err);
      break;
    }
    JsSweepMsg msg;
    if (!js_sweep_decode(frame->data, frame->len, &msg, &err) ||
        msg.kind != JS_SWEEP_MSG_POINT) {
      g_clear_error(&err);
      js_sweep_msg_clear(&msg);
      fflush(NULL);
      _exit(3);
    }
    g_autoptr(GByteArray) reply = worker_run_point(L, run_idx, seed, &msg);
    js_sweep_msg_clear(&msg);
    fflush(NULL); /* what run printed, before the parent moves on */
    if (write(fd, reply->data, reply->len) != (ssize_t)reply->len)
      break;
  }
  fflush(NULL);
  _exit(0);
}

/* ---- the parent: workers --------------------------------------------------------- */

/* Starts one worker; FALSE with error when fork or socketpair fails. */
static gboolean sweep_spawn(lua_State *L, Sweep *sw, GError **error)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    int e = errno;
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "cannot start a sweep worker: socketpair: %s", g_strerror(e));
    return FALSE;
  }
  fflush(NULL); /* no buffered output may be written twice */
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(sv[0]);
    close(sv[1]);
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "cannot start a sweep worker: fork: %s", g_strerror(e));
    return FALSE;
  }
  if (pid == 0) {
    /* The other workers' sockets must close in this process too, or a
     * worker would never see its parent hang up. */
    for (guint i = 0; i < sw->workers->len; i++) {
      SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
      if (w->fd >= 0)
        close(w->fd);
    }
    close(sv[0]);
    js_limits_after_fork(sw->session);
    worker_main(L, sw->run_idx, sv[1], sw->session->seed, sw->parent);
  }
  close(sv[1]);
  SweepWorker w = { pid, sv[0], -1 };
  /* Reuse a dead slot. */
  for (guint i = 0; i < sw->workers->len; i++) {
    SweepWorker *slot = &g_array_index(sw->workers, SweepWorker, i);
    if (slot->pid < 0) {
      *slot = w;
      return TRUE;
    }
  }
  g_array_append_val(sw->workers, w);
  return TRUE;
}

static guint sweep_live_workers(Sweep *sw)
{
  guint n = 0;
  for (guint i = 0; i < sw->workers->len; i++)
    n += g_array_index(sw->workers, SweepWorker, i).pid > 0;
  return n;
}

static guint sweep_in_flight(Sweep *sw)
{
  guint n = 0;
  for (guint i = 0; i < sw->workers->len; i++)
    n += g_array_index(sw->workers, SweepWorker, i).cur >= 0;
  return n;
}

/* ---- MPI: points across ranks ---------------------------------------------------- */

#ifdef JOULESIM_MPI
/* Under mpirun/srun (JOULESIM_MPI builds), rank 0 holds the queue of points
 * and is the only process that opens the results file; every other rank
 * asks it for as many points as it has idle workers (TAG_REQ, a u32),
 * gets them as a TAG_POINTS message (concatenated frames of lua/sweep.h,
 * length prefix included) or TAG_DONE when none are left, runs them on its
 * own forked workers, and sends each outcome to rank 0 as one ROW or ERROR
 * frame (TAG_RESULT, without the length prefix).  Every rank builds the
 * same points from the same script; a point sent to a rank must carry the
 * point_id that rank has at that index.  TAG_ABORT (a message) stops the
 * sweep on the other side: rank 0 sends it to every rank still asking when
 * it fails, another rank sends it to rank 0.  A rank that dies takes the
 * job down (MPI's default); rows already written stay, and the rerun
 * resumes as on one machine. */
#define TAG_REQ 7101
#define TAG_POINTS 7102
#define TAG_DONE 7103
#define TAG_RESULT 7104
#define TAG_ABORT 7105

static gboolean sweep_remote(const Sweep *sw)
{
  return sw->size > 1 && sw->rank > 0;
}

static gboolean sweep_distributed(const Sweep *sw)
{
  return sw->size > 1;
}

static void mpi_finalize_at_exit(void)
{
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin)
    MPI_Finalize();
}

/* Joins MPI when started by a launcher (mpirun, srun), once per process;
 * ranks other than 0 send their stdout to /dev/null (only rank 0 prints). */
static void sweep_mpi_setup(Sweep *sw)
{
  sw->rank = 0;
  sw->size = 1;
  if (g_getenv("OMPI_COMM_WORLD_SIZE") == NULL &&
      g_getenv("PMIX_RANK") == NULL && g_getenv("PMI_SIZE") == NULL)
    return;
  int init = 0;
  MPI_Initialized(&init);
  if (!init) {
    int provided = 0;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_SINGLE, &provided);
    atexit(mpi_finalize_at_exit);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank > 0) {
      fflush(stdout);
      int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        close(fd);
      }
    }
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &sw->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &sw->size);
  if (sw->size > 1 && sw->rank == 0) {
    sw->holder = g_new(gint, MAX(sw->points->len, 1));
    for (guint i = 0; i < sw->points->len; i++)
      sw->holder[i] = -1;
    sw->closed = g_new0(gboolean, sw->size);
    sw->closed[0] = TRUE;
    sw->open_ranks = (guint)sw->size - 1;
  }
}

/* Waits for a message from src (or MPI_ANY_SOURCE) without spinning:
 * MPI_Probe busy-polls, which takes a core from the workers when ranks
 * share a machine. */
static void mpi_wait_probe(int src, MPI_Status *st)
{
  for (;;) {
    int flag = 0;
    MPI_Iprobe(src, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, st);
    if (flag)
      return;
    g_usleep(100);
  }
}

/* Receives the message st announced (from src); a new buffer, *len. */
static guint8 *mpi_recv_bytes(const MPI_Status *st, int *len)
{
  int n = 0;
  MPI_Get_count(st, MPI_BYTE, &n);
  guint8 *buf = g_malloc(MAX(n, 1));
  MPI_Recv(buf, n, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, MPI_COMM_WORLD,
           MPI_STATUS_IGNORE);
  *len = n;
  return buf;
}

/* The sweep failed on this rank with message: tell the other side(s). */
static void sweep_mpi_abort(Sweep *sw, const char *message)
{
  if (!sweep_distributed(sw))
    return;
  int n = (int)strlen(message);
  if (sw->rank > 0) {
    if (!sw->peer_stopped && !sw->exhausted)
      MPI_Send(message, n, MPI_BYTE, 0, TAG_ABORT, MPI_COMM_WORLD);
    return;
  }
  for (int r = 1; r < sw->size; r++) {
    if (sw->closed[r])
      continue;
    MPI_Send(message, n, MPI_BYTE, r, TAG_ABORT, MPI_COMM_WORLD);
    sw->closed[r] = TRUE;
    sw->open_ranks--;
  }
}

/* Rank > 0: the outcome of point idx (a frame payload) to rank 0. */
static void sweep_mpi_send_result(Sweep *sw, const guint8 *payload, gsize len,
                                  gboolean good)
{
  sw->ran++;
  if (good)
    sw->done++;
  else
    sw->failed++;
  MPI_Send(payload, (int)len, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD);
}

/* Rank > 0 with idle workers: asks rank 0 for as many points (blocking
 * until it answers). */
static gboolean sweep_mpi_request(Sweep *sw, GError **error)
{
  guint busy = sweep_in_flight(sw) + g_queue_get_length(&sw->todo);
  if (sw->exhausted || busy >= sw->jobs)
    return TRUE;
  guint32 want = sw->jobs - busy;
  MPI_Send(&want, (int)sizeof want, MPI_BYTE, 0, TAG_REQ, MPI_COMM_WORLD);
  MPI_Status st;
  mpi_wait_probe(0, &st);
  int len = 0;
  g_autofree guint8 *buf = mpi_recv_bytes(&st, &len);
  if (st.MPI_TAG == TAG_DONE) {
    sw->exhausted = TRUE;
    return TRUE;
  }
  if (st.MPI_TAG == TAG_ABORT) {
    sw->peer_stopped = TRUE;
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                "MPI rank %d: rank 0 stopped the sweep: %.*s", sw->rank, len,
                (const char *)buf);
    return FALSE;
  }
  gsize pos = 0;
  while (st.MPI_TAG == TAG_POINTS && pos + 4 <= (gsize)len) {
    guint32 n = 0;
    memcpy(&n, buf + pos, 4);
    pos += 4;
    JsSweepMsg msg = { 0 };
    if (n > (gsize)len - pos ||
        !js_sweep_decode(buf + pos, n, &msg, error))
      break;
    pos += n;
    SweepPoint *p = msg.index < sw->points->len ? point_at(sw, msg.index)
                                                : NULL;
    if (msg.kind != JS_SWEEP_MSG_POINT || p == NULL ||
        strcmp(p->id, msg.text) != 0) {
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                  "MPI rank %d: rank 0 sent point %u = %s, which is %s here: "
                  "every rank must run the same script with the same "
                  "arguments", sw->rank, msg.index, msg.text,
                  p != NULL ? p->id : "no point");
      js_sweep_msg_clear(&msg);
      return FALSE;
    }
    g_queue_push_tail(&sw->todo, GUINT_TO_POINTER(msg.index + 1));
    js_sweep_msg_clear(&msg);
  }
  if (st.MPI_TAG != TAG_POINTS || pos != (gsize)len) {
    if (error != NULL && *error == NULL)
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                  "MPI rank %d: a malformed reply from rank 0 (tag %d, %d "
                  "bytes)", sw->rank, st.MPI_TAG, len);
    return FALSE;
  }
  return TRUE;
}

static guint64 fnv1a64(const char *s);

/* Every rank must have built the same points: rank 0's count and a hash of
 * its point_ids go to all (collective: every rank is in js.sweep).  FALSE
 * with error on a rank whose points differ. */
static gboolean sweep_mpi_check_points(Sweep *sw, GError **error)
{
  guint64 mine[2] = { sw->points->len, 0 };
  for (guint i = 0; i < sw->points->len; i++)
    mine[1] = mine[1] * G_GUINT64_CONSTANT(0x100000001b3) ^
              fnv1a64(point_at(sw, i)->id);
  guint64 root[2] = { mine[0], mine[1] };
  MPI_Bcast(root, 2, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (root[0] == mine[0] && root[1] == mine[1])
    return TRUE;
  g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
              "MPI rank %d: its %u points differ from rank 0's (%" G_GUINT64_FORMAT
              " points): every rank must run the same script with the same "
              "arguments", sw->rank, sw->points->len, root[0]);
  return FALSE;
}

/* Rank 0: answers every message waiting (with block, waits for one
 * first).  Rows from other ranks are written as they come. */
static gboolean sweep_mpi_serve(Sweep *sw, gboolean block, GError **error)
{
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (block) {
      mpi_wait_probe(MPI_ANY_SOURCE, &st);
      flag = 1;
      block = FALSE;
    } else {
      MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    }
    if (!flag)
      return TRUE;
    int len = 0, src = st.MPI_SOURCE;
    g_autofree guint8 *buf = mpi_recv_bytes(&st, &len);
    if (st.MPI_TAG == TAG_REQ && len == 4 && !sw->closed[src]) {
      guint32 want = 0;
      memcpy(&want, buf, 4);
      g_autoptr(GByteArray) out = g_byte_array_new();
      for (guint32 k = 0; k < want && !g_queue_is_empty(&sw->todo); k++) {
        guint idx = GPOINTER_TO_UINT(g_queue_pop_head(&sw->todo)) - 1;
        SweepPoint *p = point_at(sw, idx);
        g_autoptr(GByteArray) b =
          js_sweep_encode(JS_SWEEP_MSG_POINT, idx, p->id, p->vals, p->n);
        g_byte_array_append(out, b->data, b->len);
        sw->holder[idx] = src;
        sw->remote_flight++;
      }
      if (out->len == 0) {
        MPI_Send(NULL, 0, MPI_BYTE, src, TAG_DONE, MPI_COMM_WORLD);
        sw->closed[src] = TRUE;
        sw->open_ranks--;
      } else {
        MPI_Send(out->data, (int)out->len, MPI_BYTE, src, TAG_POINTS,
                 MPI_COMM_WORLD);
      }
      continue;
    }
    if (st.MPI_TAG == TAG_RESULT) {
      JsSweepMsg msg = { 0 };
      if (!js_sweep_decode(buf, (gsize)len, &msg, error)) {
        g_prefix_error(error, "MPI rank %d: ", src);
        return FALSE;
      }
      guint idx = msg.index;
      if (msg.kind == JS_SWEEP_MSG_POINT || idx >= sw->points->len ||
          sw->holder[idx] != src) {
        g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                    "MPI rank %d sent a result for point %u, which it was "
                    "not running", src, idx);
        js_sweep_msg_clear(&msg);
        return FALSE;
      }
      sw->holder[idx] = -1;
      sw->remote_flight--;
      sw->ran++;
      gboolean ok = msg.kind == JS_SWEEP_MSG_ROW
                      ? sweep_good_row(sw, idx, msg.values, error)
                      : sweep_failed_point(sw, idx, msg.text, error);
      js_sweep_msg_clear(&msg);
      if (!ok)
        return FALSE;
      continue;
    }
    if (st.MPI_TAG == TAG_ABORT) {
      if (!sw->closed[src]) {
        sw->closed[src] = TRUE;
        sw->open_ranks--;
      }
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                  "%.*s", len, (const char *)buf); /* names its rank */
      return FALSE;
    }
    g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL,
                "MPI rank %d sent an unexpected message (tag %d, %d bytes)",
                src, st.MPI_TAG, len);
    return FALSE;
  }
}
#else
static gboolean sweep_remote(const Sweep *sw)
{
  return FALSE;
}

static gboolean sweep_distributed(const Sweep *sw)
{
  return FALSE;
}
#endif

/* A point that ran out of attempts: recorded here, or on rank 0. */
static gboolean sweep_point_lost(Sweep *sw, guint i, const char *message,
                                 GError **error)
{
#ifdef JOULESIM_MPI
  if (sweep_remote(sw)) {
    g_autoptr(GByteArray) b =
      js_sweep_encode(JS_SWEEP_MSG_ERROR, i, message, NULL, 0);
    sweep_mpi_send_result(sw, b->data + 4, b->len - 4, FALSE);
    return TRUE;
  }
#endif
  return sweep_failed_point(sw, i, message, error);
}

/* How a reaped worker ended, for the error column. */
static char *describe_status(int status)
{
  if (WIFSIGNALED(status))
    return g_strdup_printf("killed by signal %d (%s)", WTERMSIG(status),
                           g_strsignal(WTERMSIG(status)));
  if (WIFEXITED(status))
    return g_strdup_printf("exited with status %d", WEXITSTATUS(status));
  return g_strdup("ended");
}

/* Worker slot wi is gone (EOF, a failed write, a bad message): reap it and
 * run its point again or fail it. */
static gboolean sweep_worker_lost(Sweep *sw, guint wi, GError **error)
{
  SweepWorker *w = &g_array_index(sw->workers, SweepWorker, wi);
  if (w->fd >= 0)
    close(w->fd);
  w->fd = -1;
  int status = 0;
  kill(w->pid, SIGKILL); /* a worker that sent garbage may still run */
  while (waitpid(w->pid, &status, 0) < 0 && errno == EINTR)
    ;
  w->pid = -1;
  gint64 cur = w->cur;
  w->cur = -1;
  if (cur < 0)
    return TRUE;
  SweepPoint *p = point_at(sw, (guint)cur);
  p->attempts++;
  if (p->attempts < SWEEP_MAX_ATTEMPTS) {
    g_queue_push_head(&sw->todo, GUINT_TO_POINTER((guint)cur + 1));
    return TRUE;
  }
  g_autofree char *how = describe_status(status);
  g_autofree char *m =
    g_strdup_printf("the worker process died while running this point (%s), "
                    "%u times", how, p->attempts);
  return sweep_point_lost(sw, (guint)cur, m, error);
}

/* Gives idle workers the next points; starts workers up to
 * min(jobs, points left).  FALSE only when no worker can run at all. */
static gboolean sweep_dispatch(lua_State *L, Sweep *sw, GError **error)
{
  for (;;) {
    guint want = MIN(sw->jobs, g_queue_get_length(&sw->todo) +
                                 sweep_in_flight(sw));
    while (sweep_live_workers(sw) < want) {
      GError *err = NULL;
      if (!sweep_spawn(L, sw, &err)) {
        if (sweep_live_workers(sw) > 0) { /* go on with fewer */
          g_error_free(err);
          break;
        }
        g_propagate_error(error, err);
        return FALSE;
      }
    }
    gboolean lost = FALSE;
    for (guint i = 0; i < sw->workers->len && !g_queue_is_empty(&sw->todo);
         i++) {
      SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
      if (w->pid < 0 || w->cur >= 0)
        continue;
      guint idx = GPOINTER_TO_UINT(g_queue_pop_head(&sw->todo)) - 1;
      SweepPoint *p = point_at(sw, idx);
      g_autoptr(GByteArray) b =
        js_sweep_encode(JS_SWEEP_MSG_POINT, idx, p->id, p->vals, p->n);
      w->cur = idx;
      if (!send_full(w->fd, b->data, b->len)) {
        /* Died before it got the point: that is no attempt at it. */
        w->cur = -1;
        g_queue_push_head(&sw->todo, GUINT_TO_POINTER(idx + 1));
        if (!sweep_worker_lost(sw, i, error))
          return FALSE;
        lost = TRUE;
      }
    }
    if (!lost)
      return TRUE;
  }
}

/* Handles one frame (or EOF) from worker wi. */
static gboolean sweep_receive(Sweep *sw, guint wi, GError **error)
{
  SweepWorker *w = &g_array_index(sw->workers, SweepWorker, wi);
  gboolean eof = FALSE;
  GError *err = NULL;
  g_autoptr(GByteArray) frame = read_frame(w->fd, &eof, &err);
  JsSweepMsg msg = { 0 };
  if (frame == NULL ||
      !js_sweep_decode(frame->data, frame->len, &msg, &err) ||
      msg.kind == JS_SWEEP_MSG_POINT || (gint64)msg.index != w->cur) {
    g_clear_error(&err);
    js_sweep_msg_clear(&msg);
    return sweep_worker_lost(sw, wi, error);
  }
  guint idx = (guint)w->cur;
  w->cur = -1;
#ifdef JOULESIM_MPI
  if (sweep_remote(sw)) {
    sweep_mpi_send_result(sw, frame->data, frame->len,
                          msg.kind == JS_SWEEP_MSG_ROW);
    js_sweep_msg_clear(&msg);
    return TRUE;
  }
#endif
  sw->ran++;
  gboolean ok = msg.kind == JS_SWEEP_MSG_ROW
                  ? sweep_good_row(sw, idx, msg.values, error)
                  : sweep_failed_point(sw, idx, msg.text, error);
  js_sweep_msg_clear(&msg);
  return ok;
}

/* ---- progress ---------------------------------------------------------------------- */

static void sweep_progress(Sweep *sw, gboolean final)
{
  if (!sw->progress)
    return;
  gint64 now = g_get_monotonic_time();
  if (!final && now - sw->last_progress_us < 200000)
    return;
  sw->last_progress_us = now;
  guint total = sw->points->len;
  guint finished = sw->done + sw->failed + sw->skipped;
  double secs = (double)(now - sw->started_us) * 1e-6;
  double rate = secs > 0 ? sw->ran / secs : 0;
  guint left = total - finished;
  char eta[32] = "";
  if (rate > 0 && left > 0) {
    guint s = (guint)(left / rate + 0.5);
    g_snprintf(eta, sizeof eta, ", %um%02us left", s / 60, s % 60);
  }
  fprintf(stderr, "\r%s %s: %u/%u points (%u failed, %u skipped), %.1f/s%s\033[K%s",
          SWEEP_FN, sw->table, finished, total, sw->failed, sw->skipped, rate,
          eta, final ? "\n" : "");
  fflush(stderr);
}

/* ---- the main loop --------------------------------------------------------------------- */

static gboolean sweep_loop(lua_State *L, Sweep *sw, GError **error)
{
  g_autofree struct pollfd *pfd = NULL;
  g_autofree guint *slot = NULL;
  for (;;) {
    if (!sweep_dispatch(L, sw, error))
      return FALSE;
#ifdef JOULESIM_MPI
    if (sweep_remote(sw)) {
      if (!sweep_mpi_request(sw, error) || !sweep_dispatch(L, sw, error))
        return FALSE;
      if (sweep_in_flight(sw) == 0 && sw->exhausted)
        return TRUE;
    } else if (sweep_distributed(sw)) {
      gboolean idle = sweep_in_flight(sw) == 0;
      if (idle && sw->remote_flight == 0 && sw->open_ranks == 0)
        return TRUE;
      if (!sweep_mpi_serve(sw, idle, error))
        return FALSE;
      if (idle)
        continue;
    }
#endif
    if (sweep_in_flight(sw) == 0)
      return TRUE; /* nothing left: dispatch ran everything it could */
    guint n = sw->workers->len;
    pfd = g_renew(struct pollfd, pfd, n);
    slot = g_renew(guint, slot, n);
    nfds_t np = 0;
    for (guint i = 0; i < n; i++) {
      SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
      if (w->pid < 0 || w->cur < 0)
        continue;
      pfd[np].fd = w->fd;
      pfd[np].events = POLLIN;
      pfd[np].revents = 0;
      slot[np++] = i;
    }
    /* Rank 0 of an MPI sweep also answers the other ranks: every ms. */
    int rc = poll(pfd, np, sweep_distributed(sw) && !sweep_remote(sw) ? 1
                           : sw->progress                             ? 250
                                                                      : -1);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc < 0) {
      int e = errno;
      g_set_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_WORKER,
                  "waiting for sweep workers: %s", g_strerror(e));
      return FALSE;
    }
    for (nfds_t k = 0; k < np; k++) {
      if (pfd[k].revents == 0)
        continue;
      if (!sweep_receive(sw, slot[k], error))
        return FALSE;
      /* The row is written: only now may this worker get a new point. */
      if (!sweep_dispatch(L, sw, error))
        return FALSE;
    }
    sweep_progress(sw, FALSE);
  }
}

/* Closes the workers' sockets (they exit) and reaps them. */
static void sweep_stop_workers(Sweep *sw)
{
  for (guint i = 0; i < sw->workers->len; i++) {
    SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
    if (w->fd >= 0)
      close(w->fd);
    w->fd = -1;
  }
  for (guint i = 0; i < sw->workers->len; i++) {
    SweepWorker *w = &g_array_index(sw->workers, SweepWorker, i);
    if (w->pid > 0)
      while (waitpid(w->pid, NULL, 0) < 0 && errno == EINTR)
        ;
    w->pid = -1;
  }
}

/* ---- js.sweep -------------------------------------------------------------------------- */

static GQuark failed_quark(void)
{
  return g_quark_from_static_string("joulesim-sweep-failed");
}

/* The failure count lives with the session (keyed by its address) until
 * the CLI takes it. */
static void add_failed(JsSession *s, guint n)
{
  guint prev = GPOINTER_TO_UINT(g_dataset_id_get_data(s, failed_quark()));
  g_dataset_id_set_data(s, failed_quark(), GUINT_TO_POINTER(prev + n));
}

guint js_sweep_take_failed(JsSession *s)
{
  g_return_val_if_fail(s != NULL, 0);
  guint n = GPOINTER_TO_UINT(g_dataset_id_get_data(s, failed_quark()));
  g_dataset_id_remove_data(s, failed_quark());
  return n;
}

static void push_summary(lua_State *L, Sweep *sw)
{
  lua_createtable(L, 0, 9);
  lua_pushinteger(L, sw->points->len);
  lua_setfield(L, -2, "total");
  lua_pushinteger(L, sw->done);
  lua_setfield(L, -2, "done");
  lua_pushinteger(L, sw->skipped);
  lua_setfield(L, -2, "skipped");
  lua_pushinteger(L, sw->failed);
  lua_setfield(L, -2, "failed");
  lua_pushinteger(L, (lua_Integer)sw->existing_rows);
  lua_setfield(L, -2, "rows");
  lua_pushstring(L, sw->out);
  lua_setfield(L, -2, "out");
  lua_pushstring(L, sw->table);
  lua_setfield(L, -2, "table");
  lua_createtable(L, (int)(sw->failures->len / 2), 0);
  for (guint i = 0; i + 1 < sw->failures->len; i += 2) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, g_ptr_array_index(sw->failures, i));
    lua_setfield(L, -2, "point_id");
    lua_pushstring(L, g_ptr_array_index(sw->failures, i + 1));
    lua_setfield(L, -2, "error");
    lua_rawseti(L, -2, (lua_Integer)(i / 2 + 1));
  }
  lua_setfield(L, -2, "failures");
}

static const char *const sweep_keys[] = {
  "grid", "points", "run", "out", "table", "jobs", "mode", "retry_failed",
  "progress", NULL};
static const char *const sweep_modes[] = { "append", "replace", NULL };

static int l_sweep(lua_State *L)
{
  if (lua_getfield(L, LUA_REGISTRYINDEX, SWEEP_WORKER_KEY) != LUA_TNIL)
    return luaL_error(L, "%s: cannot be called from inside a sweep's run "
                         "function", SWEEP_FN);
  lua_pop(L, 1);
  if (lua_type(L, 1) != LUA_TTABLE)
    return luaL_error(L, "%s: expects a table of named arguments (grid or "
                         "points, run, out, ...), got %s", SWEEP_FN,
                      luaL_typename(L, 1));
  lua_settop(L, 1);
  jsl_check_keys(L, 1, SWEEP_FN, sweep_keys);
  JsSession *s = jsl_session(L);

  /* Everything C-allocated hangs off this userdata: a Lua error anywhere
   * below frees it (and stops its workers) through __gc. */
  LSweep *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->sw = NULL;
  luaL_setmetatable(L, SWEEP_MT);
  Sweep *sw = g_new0(Sweep, 1);
  u->sw = sw;
  sw->session = s;
  sw->parent = getpid();
  sw->strings = g_string_chunk_new(4096);
  sw->points = g_array_new(FALSE, TRUE, sizeof(SweepPoint));
  sw->workers = g_array_new(FALSE, TRUE, sizeof(SweepWorker));
  sw->pending = g_array_new(FALSE, TRUE, sizeof(SweepPending));
  sw->failures = g_ptr_array_new_with_free_func(g_free);
  g_queue_init(&sw->todo);

  if (lua_getfield(L, 1, "run") != LUA_TFUNCTION)
    return luaL_error(L, "%s: argument 'run' must be a function(point) that "
                         "returns a row (got %s)", SWEEP_FN,
                      luaL_typename(L, -1));
  sw->run_idx = lua_gettop(L);
  const char *out = jsl_opt_str(L, 1, SWEEP_FN, "out", NULL);
  if (out == NULL || out[0] == '\0')
    return luaL_error(L, "%s: argument 'out' (the results file, a string) is "
                         "required", SWEEP_FN);
  jsl_check_write(L, SWEEP_FN, out, JS_FILE_RESULTS);
  sw->out = g_string_chunk_insert_const(sw->strings, out);
  sw->table = g_string_chunk_insert_const(
    sw->strings, jsl_opt_str(L, 1, SWEEP_FN, "table", "sweep"));
  if (sw->table[0] == '\0' || sw->table[0] == '.' ||
      strchr(sw->table, '/') != NULL)
    return luaL_error(L, "%s: argument 'table' = '%s' must be a name without "
                         "'/' that does not start with '.'", SWEEP_FN,
                      sw->table);
  sw->mode = (ResMode)jsl_opt_choice(L, 1, SWEEP_FN, "mode", RES_MODE_APPEND,
                                     sweep_modes);
  sw->retry_failed = jsl_opt_bool(L, 1, SWEEP_FN, "retry_failed", TRUE);
  sw->progress = jsl_opt_bool(L, 1, SWEEP_FN, "progress",
                              !s->quiet && isatty(STDERR_FILENO));
  guint def_jobs = s->jobs > 0 ? s->jobs : MAX(g_get_num_processors(), 1);
  sw->jobs = (guint)jsl_opt_int(L, 1, SWEEP_FN, "jobs", def_jobs, 1, 4096);

  int tg = lua_getfield(L, 1, "grid");
  int tp = lua_getfield(L, 1, "points");
  if ((tg == LUA_TNIL) == (tp == LUA_TNIL))
    return luaL_error(L, "%s: give exactly one of 'grid' (lists of values "
                         "per key) and 'points' (a list of points)",
                      SWEEP_FN);
  if (tg != LUA_TNIL) {
    if (tg != LUA_TTABLE)
      return luaL_error(L, "%s: argument 'grid' must be a table of lists, "
                           "e.g. { tp = {1, 2}, policy = {\"max\"} } (got "
                           "%s)", SWEEP_FN, lua_typename(L, tg));
    sweep_points_from_grid(L, sw, lua_gettop(L) - 1);
  } else {
    if (tp != LUA_TTABLE)
      return luaL_error(L, "%s: argument 'points' must be a list of points "
                           "(got %s)", SWEEP_FN, lua_typename(L, tp));
    sweep_points_from_list(L, sw, lua_gettop(L));
  }
  lua_pop(L, 2);
  sweep_check_duplicates(L, sw);

  GError *err = NULL;
  sw->started_us = sw->last_progress_us = g_get_monotonic_time();
#ifdef JOULESIM_MPI
  sweep_mpi_setup(sw);
  if (sweep_distributed(sw) && !sweep_remote(sw))
    sweep_mpi_check_points(sw, NULL);
  if (sweep_remote(sw)) {
    /* Points come from rank 0, rows go to it; this rank opens no file. */
    sw->progress = FALSE;
    lua_gc(L, LUA_GCCOLLECT);
    if (!sweep_mpi_check_points(sw, &err) || !sweep_loop(L, sw, &err)) {
      sweep_kill_workers(sw);
      sweep_mpi_abort(sw, err->message);
      return jsl_raise_gerror(L, SWEEP_FN, err);
    }
    sweep_stop_workers(sw);
    push_summary(L, sw);
    return 1;
  }
#endif
  if (sw->points->len > 0) {
    /* Freed by hand: the raise below longjmps past any g_autoptr. */
    GHashTable *done_ids = g_hash_table_new(NULL, NULL);
    if (!sweep_resume(sw, done_ids, &err)) {
      g_hash_table_unref(done_ids);
#ifdef JOULESIM_MPI
      sweep_mpi_abort(sw, err->message);
#endif
      return jsl_raise_gerror(L, SWEEP_FN, err);
    }
    for (guint i = 0; i < sw->points->len; i++) {
      if (g_hash_table_contains(done_ids, point_at(sw, i)->id))
        sw->skipped++;
      else
        g_queue_push_tail(&sw->todo, GUINT_TO_POINTER(i + 1));
    }
    g_hash_table_unref(done_ids);
  }

  if (!g_queue_is_empty(&sw->todo)) {
    ResMeta meta = { JOULESIM_VERSION, s->scenario_path, s->scenario_source,
                     s->seed };
    sw->t = res_table_open(sw->out, sw->table, sw->mode, &meta, &err);
    if (sw->t == NULL) {
#ifdef JOULESIM_MPI
      sweep_mpi_abort(sw, err->message);
#endif
      return jsl_raise_gerror(L, SWEEP_FN, err);
    }
    /* Finalise garbage here, not in the workers. */
    lua_gc(L, LUA_GCCOLLECT);
    sweep_progress(sw, FALSE);
    gboolean ok = sweep_loop(L, sw, &err) && sweep_flush_pending(sw, &err);
    if (!ok) {
      sweep_kill_workers(sw);
#ifdef JOULESIM_MPI
      sweep_mpi_abort(sw, err->message);
#endif
      return jsl_raise_gerror(L, SWEEP_FN, err);
    }
    sweep_stop_workers(sw);
    sweep_progress(sw, TRUE);
    ResTable *t = sw->t;
    guint64 rows = res_table_rows(t);
    sw->t = NULL;
    if (!res_table_close(t, &err))
      return jsl_raise_gerror(L, SWEEP_FN, err);
    add_failed(s, sw->failed);
    push_summary(L, sw);
    lua_pushinteger(L, (lua_Integer)rows);
    lua_setfield(L, -2, "rows");
    return 1;
  }
  if (sweep_distributed(sw) && !sweep_loop(L, sw, &err)) {
    /* Nothing to run: the other ranks only hear "no more points". */
#ifdef JOULESIM_MPI
    sweep_mpi_abort(sw, err->message);
#endif
    return jsl_raise_gerror(L, SWEEP_FN, err);
  }
  push_summary(L, sw);
  return 1;
}

void jsl_register_sweep(lua_State *L)
{
  luaL_newmetatable(L, SWEEP_MT);
  lua_pushcfunction(L, sweep_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
  lua_pushcfunction(L, l_sweep);
  lua_setfield(L, -2, "sweep");
}
