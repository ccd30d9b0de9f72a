/* tests/test-sweep.c -- js.sweep: point identity, the worker wire format
 * (round trips, and every malformed frame refused), results independent of
 * jobs, failing and crashing points, resume after SIGKILL with every point
 * exactly once, retry of failed points, bad arguments, and the engine's
 * C API (run/sweep.h) with C hooks. */
#include "lua/bind.h"
#include "io/results.h"
#include "run/sweep.h"

#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testutil.h"

#define PYTHON "/usr/bin/python3"

/* ---- helpers ------------------------------------------------------------ */

#define I(n, v) { .name = (n), .type = RES_INT, .i = (v) }
#define F(n, v) { .name = (n), .type = RES_FLOAT, .f = (v) }
#define B(n, v) { .name = (n), .type = RES_BOOL, .i = (v) }
#define S(n, v) { .name = (n), .type = RES_STRING, .s = (v) }

typedef struct {
  char *dir;
  char *out; /* dir/sweep.h5 */
} Fixture;

static void fx_setup(Fixture *fx, gconstpointer data)
{
  fx->dir = test_tmpdir();
  fx->out = g_build_filename(fx->dir, "sweep.h5", NULL);
}

/* Removes the scratch directory and its subdirectories (one level). */
static void fx_teardown(Fixture *fx, gconstpointer data)
{
  g_autoptr(GDir) d = g_dir_open(fx->dir, 0, NULL);
  const char *n;
  while (d != NULL && (n = g_dir_read_name(d)) != NULL) {
    g_autofree char *p = g_build_filename(fx->dir, n, NULL);
    if (g_file_test(p, G_FILE_TEST_IS_DIR))
      test_rmdir(p);
  }
  test_rmdir(fx->dir);
  g_free(fx->out);
  g_free(fx->dir);
}

/* Runs a script with a fresh quiet session of `jobs` workers; *failed gets
 * the failure count the CLI would see. */
static gboolean run_script(const char *src, guint jobs, guint *failed,
                           GError **error)
{
  g_autoptr(JsSession) s = js_session_new(11);
  s->quiet = TRUE;
  s->jobs = jobs;
  gboolean ok = js_run_string(s, "=test", src, error);
  guint f = js_sweep_take_failed(s);
  if (failed != NULL)
    *failed = f;
  return ok;
}

static void run_ok(const char *src, guint jobs, guint *failed)
{
  GError *error = NULL;
  gboolean ok = run_script(src, jobs, failed, &error);
  if (!ok)
    g_printerr("script failed: %s\n", error->message);
  g_assert_no_error(error);
  g_assert_true(ok);
}

static GPtrArray *read_rows(const char *path, const char *table)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *rows = res_table_read(path, table, &error);
  g_assert_no_error(error);
  g_assert_nonnull(rows);
  return rows;
}

static const ResValue *cell(GPtrArray *row, const char *name)
{
  for (guint i = 0; i < row->len; i++) {
    const ResValue *v = g_ptr_array_index(row, i);
    if (strcmp(v->name, name) == 0)
      return v;
  }
  return NULL;
}

/* A row as exact text (doubles in hex), to compare rows bit for bit. */
static char *row_text(GPtrArray *row)
{
  GString *s = g_string_new(NULL);
  for (guint i = 0; i < row->len; i++) {
    const ResValue *v = g_ptr_array_index(row, i);
    /* Each run has its own id, by design (io/results.h, ResMeta). */
    if (strcmp(v->name, RES_RUN_COLUMN) == 0)
      continue;
    g_string_append_printf(s, "%s:%d=", v->name, v->type);
    switch (v->type) {
    case RES_INT:
    case RES_BOOL: g_string_append_printf(s, "%" G_GINT64_FORMAT, v->i); break;
    case RES_FLOAT: g_string_append_printf(s, "%a", v->f); break;
    case RES_STRING: g_string_append(s, v->s); break;
    }
    g_string_append_c(s, ';');
  }
  return g_string_free(s, FALSE);
}

/* point_id -> row text; fails the test when a point_id appears twice. */
static GHashTable *rows_by_id(GPtrArray *rows)
{
  GHashTable *h = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
                                        g_free);
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    const ResValue *id = cell(row, "point_id");
    g_assert_nonnull(id);
    if (g_hash_table_contains(h, id->s))
      g_error("point %s appears twice", id->s);
    g_hash_table_insert(h, g_strdup(id->s), row_text(row));
  }
  return h;
}

static gboolean python_has_h5py(void)
{
  const char *argv[] = { PYTHON, "-c", "import h5py", NULL };
  int status = 0;
  if (!g_file_test(PYTHON, G_FILE_TEST_IS_EXECUTABLE))
    return FALSE;
  if (!g_spawn_sync(NULL, (char **)argv, NULL,
                    G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                    NULL, NULL, NULL, NULL, &status, NULL))
    return FALSE;
  return g_spawn_check_wait_status(status, NULL);
}

/* ---- point identity ------------------------------------------------------ */

typedef struct {
  const char *name;
  ResValue v[3];
  guint n;
  const char *id;
} IdCase;

static const IdCase id_cases[] = {
  { "sorted", { I("tp", 2), S("policy", "max"), B("ok", 1) }, 3,
    "ok=true,policy=\"max\",tp=2" },
  { "int-vs-float", { F("tp", 2.0) }, 1, "tp=2.0" },
  { "shortest-float", { F("x", 0.1), F("y", 1e300), F("z", -0.0) }, 3,
    "x=0.1,y=1e+300,z=-0.0" },
  { "long-float", { F("x", 1.0 / 3.0) }, 1, "x=0.3333333333333333" },
  { "non-finite", { F("a", NAN), F("b", INFINITY), F("c", -INFINITY) }, 3,
    "a=nan,b=inf,c=-inf" },
  { "int-extremes", { I("a", G_MININT64), I("b", G_MAXINT64), B("c", 0) }, 3,
    "a=-9223372036854775808,b=9223372036854775807,c=false" },
  { "string-escapes", { S("s", "a\"b\\c\nd\te\x01") }, 1,
    "s=\"a\\\"b\\\\c\\nd\\te\\u0001\"" },
  { "utf8-string", { S("gpu", "H100 \xe2\x98\x83") }, 1,
    "gpu=\"H100 \xe2\x98\x83\"" },
  { "odd-names", { I("a b", 1), I("x=y", 2), I("_ok.1-2", 3) }, 3,
    "_ok.1-2=3,\"a b\"=1,\"x=y\"=2" }, /* byte order: '_' < 'a' */
  { "empty", { I("unused", 0) }, 0, "" },
};

static void test_point_id(gconstpointer data)
{
  const IdCase *c = data;
  g_autofree char *id = js_sweep_point_id(c->v, c->n);
  g_assert_cmpstr(id, ==, c->id);
  /* Every float form reads back to the same double. */
  for (guint i = 0; i < c->n; i++)
    if (c->v[i].type == RES_FLOAT && isfinite(c->v[i].f)) {
      g_autofree char *one = js_sweep_point_id(&c->v[i], 1);
      const char *eq = strrchr(one, '=');
      g_assert_true(g_ascii_strtod(eq + 1, NULL) == c->v[i].f);
    }
}

/* ---- wire format ---------------------------------------------------------- */

static const ResValue wire_values[] = {
  I("tp", -3), F("energy_j", 1.5e-7), B("ok", 1), S("policy", "kernel"),
  S("empty", ""), F("nan", NAN),
};

static void test_wire_roundtrip(void)
{
  static const JsSweepMsgKind kinds[] = { JS_SWEEP_MSG_POINT, JS_SWEEP_MSG_ROW,
                                          JS_SWEEP_MSG_ERROR };
  for (guint k = 0; k < G_N_ELEMENTS(kinds); k++) {
    guint n = kinds[k] == JS_SWEEP_MSG_ERROR ? 0 : G_N_ELEMENTS(wire_values);
    g_autoptr(GByteArray) b =
      js_sweep_encode(kinds[k], 4000000000u, "id \xe2\x98\x83", wire_values, n);
    guint32 len = 0;
    memcpy(&len, b->data, 4);
    g_assert_cmpuint(len, ==, b->len - 4);
    JsSweepMsg m;
    g_autoptr(GError) error = NULL;
    g_assert_true(js_sweep_decode(b->data + 4, len, &m, &error));
    g_assert_no_error(error);
    g_assert_cmpint(m.kind, ==, kinds[k]);
    g_assert_cmpuint(m.index, ==, 4000000000u);
    g_assert_cmpstr(m.text, ==, "id \xe2\x98\x83");
    g_assert_cmpuint(m.values->len, ==, n);
    for (guint i = 0; i < n; i++) {
      const ResValue *a = &wire_values[i];
      const ResValue *v = &g_array_index(m.values, ResValue, i);
      g_assert_cmpstr(v->name, ==, a->name);
      g_assert_cmpint(v->type, ==, a->type);
      if (a->type == RES_FLOAT)
        g_assert_cmpmem(&v->f, 8, &a->f, 8);
      else if (a->type == RES_STRING)
        g_assert_cmpstr(v->s, ==, a->s);
      else
        g_assert_cmpint(v->i, ==, a->i);
    }
    js_sweep_msg_clear(&m);
  }
}

/* Every proper prefix of a valid payload, and every payload with one byte
 * changed, is either refused with a protocol error or decodes to
 * well-formed values; nothing reads out of bounds (run under ASan). */
static void test_wire_malformed(void)
{
  g_autoptr(GByteArray) b =
    js_sweep_encode(JS_SWEEP_MSG_ROW, 7, "x", wire_values,
                    G_N_ELEMENTS(wire_values));
  const guint8 *payload = b->data + 4;
  gsize len = b->len - 4;
  for (gsize cut = 0; cut < len; cut++) {
    g_autofree guint8 *copy = g_memdup2(payload, MAX(cut, 1));
    JsSweepMsg m;
    g_autoptr(GError) error = NULL;
    g_assert_false(js_sweep_decode(copy, cut, &m, &error));
    g_assert_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL);
    g_assert_null(m.values);
  }
  /* Trailing garbage. */
  {
    g_autofree guint8 *longer = g_malloc(len + 1);
    memcpy(longer, payload, len);
    longer[len] = 0;
    JsSweepMsg m;
    g_autoptr(GError) error = NULL;
    g_assert_false(js_sweep_decode(longer, len + 1, &m, &error));
    g_assert_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL);
    g_assert_nonnull(strstr(error->message, "trailing"));
  }
  /* Single-byte corruptions (deterministic sequence). */
  guint32 state = 12345;
  guint refused = 0;
  for (gsize pos = 0; pos < len; pos++) {
    for (guint t = 0; t < 4; t++) {
      state = state * 1664525u + 1013904223u;
      g_autofree guint8 *copy = g_memdup2(payload, len);
      copy[pos] ^= (guint8)(1u << (state >> 29));
      JsSweepMsg m;
      GError *error = NULL;
      if (js_sweep_decode(copy, len, &m, &error)) {
        for (guint i = 0; i < m.values->len; i++) {
          const ResValue *v = &g_array_index(m.values, ResValue, i);
          g_assert_cmpuint(strlen(v->name), >, 0);
          if (v->type == RES_STRING)
            g_assert_nonnull(v->s);
        }
        js_sweep_msg_clear(&m);
      } else {
        g_assert_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_PROTOCOL);
        g_error_free(error);
        refused++;
      }
    }
  }
  g_assert_cmpuint(refused, >, 0);
}

/* ---- sweeps ----------------------------------------------------------------- */

/* A sweep of 24 small simulations whose rows also carry math.random()
 * draws (reseeded per point) and a label that depends on the point. */
static char *sim_sweep_src(const char *out, const char *table, int jobs)
{
  return g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 4 }\n"
    "local s = js.sweep{\n"
    "  grid = { tp = {1, 2}, pp = {1, 2}, sm = {0, 1200, 1005},\n"
    "           gpu = {'A100-SXM4-80GB', 'H100-SXM5-80GB'} },\n"
    "  out = '%s', table = '%s', jobs = %d,\n"
    "  run = function(p)\n"
    "    local cl = js.cluster{ gpu = p.gpu, gpus = 4 }\n"
    "    local w = js.gpt{ model = 'gpt3-125m', tp = p.tp, pp = p.pp,\n"
    "                      dp = 4 // (p.tp * p.pp), microbatches = 4,\n"
    "                      seq_len = 512 }\n"
    "    local pol = p.sm == 0 and js.policy.max()\n"
    "                or js.policy.fixed{ sm = p.sm }\n"
    "    local r = js.simulate{ cluster = cl, workload = w, policy = pol }\n"
    "    return { time_s = r.time_s, energy_j = r.energy_j,\n"
    "             label = r.policy, draw = math.random(),\n"
    "             big = math.random(1, 1 << 40), ok = r.time_s > 0 }\n"
    "  end }\n"
    "assert(s.total == 24 and s.done == 24 and s.failed == 0\n"
    "       and s.skipped == 0 and s.rows == 24, 'summary')\n",
    out, table, jobs);
}

/* Rows are identical for jobs = 1 and jobs = 4 (as sets keyed by
 * point_id), and every point is there once. */
static void test_jobs_identical(Fixture *fx, gconstpointer data)
{
  g_autofree char *out4 = g_build_filename(fx->dir, "four.h5", NULL);
  g_autofree char *src1 = sim_sweep_src(fx->out, "t", 1);
  g_autofree char *src4 = sim_sweep_src(out4, "t", 4);
  guint failed = 99;
  run_ok(src1, 1, &failed);
  g_assert_cmpuint(failed, ==, 0);
  run_ok(src4, 1, &failed);
  g_assert_cmpuint(failed, ==, 0);
  g_autoptr(GPtrArray) r1 = read_rows(fx->out, "t");
  g_autoptr(GPtrArray) r4 = read_rows(out4, "t");
  g_assert_cmpuint(r1->len, ==, 24);
  g_assert_cmpuint(r4->len, ==, 24);
  g_autoptr(GHashTable) h1 = rows_by_id(r1);
  g_autoptr(GHashTable) h4 = rows_by_id(r4);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, h1);
  while (g_hash_table_iter_next(&it, &k, &v))
    g_assert_cmpstr(v, ==, g_hash_table_lookup(h4, k));
  /* Column order: point keys, run's keys, trust, fits, memory_gb,
   * point_id, error, run_id. */
  GPtrArray *row = g_ptr_array_index(r1, 0);
  static const char *const order[] = { "gpu", "pp", "sm", "tp", "big",
                                       "draw", "energy_j", "label", "ok",
                                       "time_s", "trust", "fits",
                                       "memory_gb", "point_id", "error",
                                       RES_RUN_COLUMN };
  g_assert_cmpuint(row->len, ==, G_N_ELEMENTS(order));
  for (guint i = 0; i < row->len; i++)
    g_assert_cmpstr(((ResValue *)g_ptr_array_index(row, i))->name, ==,
                    order[i]);
  /* The draws differ between points (reseeded per point, not constant). */
  g_autoptr(GHashTable) draws =
    g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
  for (guint r = 0; r < r1->len; r++) {
    char buf[64];
    g_snprintf(buf, sizeof buf, "%a",
               cell(g_ptr_array_index(r1, r), "draw")->f);
    g_hash_table_add(draws, g_strdup(buf));
  }
  g_assert_cmpuint(g_hash_table_size(draws), ==, 24);
  /* Each row's trust is its run's: the A100 SXM4 80GB power model is held
   * out in docs/fidelity.md, the H100's terms are estimates. */
  for (guint r = 0; r < r1->len; r++) {
    GPtrArray *rw = g_ptr_array_index(r1, r);
    gboolean h100 = strcmp(cell(rw, "gpu")->s, "H100-SXM5-80GB") == 0;
    g_assert_cmpstr(cell(rw, "trust")->s, ==,
                    h100 ? "estimated" : "validated");
  }

  /* The default jobs come from the session. */
  g_autofree char *out3 = g_build_filename(fx->dir, "three.h5", NULL);
  g_autofree char *src3 = sim_sweep_src(out3, "t", 3);
  char *j = strstr(src3, "jobs = 3,");
  g_assert_nonnull(j);
  memset(j, ' ', strlen("jobs = 3,"));
  run_ok(src3, 3, NULL);
  g_autoptr(GPtrArray) r3 = read_rows(out3, "t");
  g_autoptr(GHashTable) h3 = rows_by_id(r3);
  g_hash_table_iter_init(&it, h1);
  while (g_hash_table_iter_next(&it, &k, &v))
    g_assert_cmpstr(v, ==, g_hash_table_lookup(h3, k));
}

/* A failing point does not stop the others; its row holds the message and
 * defaults; errors that come before the first good row wait for it; the
 * failures are counted for the exit status; a rerun retries them only. */
static void test_failing_points(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local s = js.sweep{\n"
    "  points = { {i = 1}, {i = 2}, {i = 3}, {i = 4}, {i = 5} },\n"
    "  out = '%s', table = 'f', jobs = 1,\n"
    "  run = function(p)\n"
    "    if p.i == 1 or p.i == 4 then error('bad point ' .. p.i) end\n"
    "    if p.i == 5 then error(setmetatable({}, {__tostring =\n"
    "      function() return 'object error' end})) end\n"
    "    return { x = p.i * 1.5, n = p.i, name = 'p' .. p.i, ok = true }\n"
    "  end }\n"
    "assert(s.total == 5 and s.done == 2 and s.failed == 3, 'counts')\n"
    "assert(#s.failures == 3)\n"
    "assert(s.failures[1].point_id == 'i=1', s.failures[1].point_id)\n"
    "assert(s.failures[1].error == 'test:6: bad point 1',\n"
    "       s.failures[1].error)\n",
    fx->out);
  guint failed = 0;
  run_ok(src, 1, &failed);
  g_assert_cmpuint(failed, ==, 3);

  g_autoptr(GPtrArray) rows = read_rows(fx->out, "f");
  g_assert_cmpuint(rows->len, ==, 5);
  g_autoptr(GHashTable) seen = g_hash_table_new(NULL, NULL);
  for (guint r = 0; r < rows->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows, r);
    gint64 i = cell(row, "i")->i;
    g_hash_table_add(seen, GINT_TO_POINTER((int)i));
    const ResValue *err = cell(row, "error");
    g_assert_nonnull(cell(row, "name"));
    if (i == 2 || i == 3) {
      g_assert_cmpstr(err->s, ==, "");
      g_assert_cmpfloat(cell(row, "x")->f, ==, i * 1.5);
      g_assert_true(cell(row, "ok")->i);
    } else {
      g_assert_nonnull(strstr(err->s, i == 5 ? "object error" : "bad point"));
      g_assert_true(isnan(cell(row, "x")->f));
      g_assert_cmpint(cell(row, "n")->i, ==, 0);
      g_assert_cmpstr(cell(row, "name")->s, ==, "");
      g_assert_false(cell(row, "ok")->i);
    }
  }
  g_assert_cmpuint(g_hash_table_size(seen), ==, 5);

  /* Rerun with retry_failed = false: nothing runs. */
  g_autofree char *keep = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local s = js.sweep{ points = { {i = 1}, {i = 2}, {i = 3}, {i = 4},\n"
    "  {i = 5} }, out = '%s', table = 'f', retry_failed = false,\n"
    "  run = function(p) error('must not run') end }\n"
    "assert(s.skipped == 5 and s.done == 0 and s.failed == 0 and\n"
    "       s.rows == 5, 'skipped')\n",
    fx->out);
  run_ok(keep, 2, &failed);
  g_assert_cmpuint(failed, ==, 0);

  /* Fixed run: only the three failed points run again; each point once. */
  g_autofree char *fixed = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local ran = 0\n"
    "local s = js.sweep{ points = { {i = 1}, {i = 2}, {i = 3}, {i = 4},\n"
    "  {i = 5} }, out = '%s', table = 'f', jobs = 2,\n"
    "  run = function(p)\n"
    "    assert(p.i == 1 or p.i == 4 or p.i == 5, 'reran a good point')\n"
    "    return { x = p.i * 1.5, n = p.i, name = 'p' .. p.i, ok = true }\n"
    "  end }\n"
    "assert(s.skipped == 2 and s.done == 3 and s.failed == 0 and\n"
    "       s.rows == 5, 'retried')\n",
    fx->out);
  run_ok(fixed, 2, &failed);
  g_assert_cmpuint(failed, ==, 0);
  g_autoptr(GPtrArray) after = read_rows(fx->out, "f");
  g_autoptr(GHashTable) by_id = rows_by_id(after);
  g_assert_cmpuint(g_hash_table_size(by_id), ==, 5);
  for (guint r = 0; r < after->len; r++)
    g_assert_cmpstr(cell(g_ptr_array_index(after, r), "error")->s, ==, "");
}

/* When every point fails, the table has the point's columns only; a later
 * successful rerun replaces it with the full columns. */
static void test_all_fail_then_fix(Fixture *fx, gconstpointer data)
{
  g_autofree char *bad = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local s = js.sweep{ grid = { a = {1, 2}, b = {'x', 'y'} },\n"
    "  out = '%s', jobs = 2, run = function(p) return { r = {} } end }\n"
    "assert(s.failed == 4 and s.done == 0)\n"
    "assert(s.failures[1].error:find('row.r is a table'),\n"
    "       s.failures[1].error)\n",
    fx->out);
  guint failed = 0;
  run_ok(bad, 2, &failed);
  g_assert_cmpuint(failed, ==, 4);
  g_autoptr(GPtrArray) rows = read_rows(fx->out, "sweep");
  g_assert_cmpuint(rows->len, ==, 4);
  g_assert_cmpuint(((GPtrArray *)g_ptr_array_index(rows, 0))->len, ==, 5); /* a, b, point_id, error, run_id */

  g_autofree char *good = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local s = js.sweep{ grid = { a = {1, 2}, b = {'x', 'y'} },\n"
    "  out = '%s', jobs = 2,\n"
    "  run = function(p) return { r = p.a * 10, a = p.a } end }\n"
    "assert(s.failed == 0 and s.done == 4 and s.rows == 4)\n",
    fx->out);
  run_ok(good, 2, &failed);
  g_assert_cmpuint(failed, ==, 0);
  g_autoptr(GPtrArray) rows2 = read_rows(fx->out, "sweep");
  g_assert_cmpuint(rows2->len, ==, 4);
  for (guint r = 0; r < rows2->len; r++) {
    GPtrArray *row = g_ptr_array_index(rows2, r);
    g_assert_cmpuint(row->len, ==, 6); /* a, b, r, point_id, error, run_id */
    g_assert_cmpint(cell(row, "r")->i, ==, cell(row, "a")->i * 10);
  }
}

/* Rows that cannot be stored fail their point with a message naming the
 * problem; the sweep goes on. */
static void test_bad_rows(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local s = js.sweep{\n"
    "  points = { {k = 1}, {k = 2}, {k = 3}, {k = 4}, {k = 5}, {k = 6},\n"
    "             {k = 7}, {k = 8}, {k = 9} },\n"
    "  out = '%s', jobs = 1,\n"
    "  run = function(p)\n"
    "    if p.k == 1 then return { v = 1.0, k = 1 } end -- repeat: fine\n"
    "    if p.k == 2 then return { v = 2.0, k = 3 } end\n"
    "    if p.k == 3 then return 42 end\n"
    "    if p.k == 4 then return { v = 'text' } end\n"
    "    if p.k == 5 then return { v = 5.0, error = 'x' } end\n"
    "    if p.k == 6 then return { v = 6.0, extra = 1 } end\n"
    "    if p.k == 7 then return { v = 7.0, [1] = 'list' } end\n"
    "    if p.k == 8 then os.exit(3) end\n"
    "    if p.k == 9 then js.sweep{ points = {}, out = 'x.h5',\n"
    "                               run = print } end\n"
    "  end }\n"
    "assert(s.done == 1 and s.failed == 8, s.done .. ' ' .. s.failed)\n"
    "local want = { [2] = 'sets \\'k\\' = 3 but the point has 2',\n"
    "  [3] = 'must return a table', [4] = 'expects float64, got string',\n"
    "  [5] = 'column \\'error\\'', [6] = 'unknown column \\'extra\\'',\n"
    "  [7] = 'number key', [8] = 'os.exit is not allowed',\n"
    "  [9] = 'cannot be called from inside' }\n"
    "for _, f in ipairs(s.failures) do\n"
    "  local k = tonumber(f.point_id:match('k=(%%d+)'))\n"
    "  assert(f.error:find(want[k], 1, true), k .. ': ' .. f.error)\n"
    "end\n",
    fx->out);
  guint failed = 0;
  run_ok(src, 1, &failed);
  g_assert_cmpuint(failed, ==, 8);
  g_autoptr(GPtrArray) rows = read_rows(fx->out, "sweep");
  g_assert_cmpuint(rows->len, ==, 9);
}

/* A worker killed while running a point: the point runs once more; a
 * point that kills its worker every time fails with how it died. */
static void test_worker_crash(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local mark = '%s/crashed-once'\n"
    "local s = js.sweep{ grid = { i = {1, 2, 3, 4, 5, 6} },\n"
    "  out = '%s', jobs = 2,\n"
    "  run = function(p)\n"
    "    if p.i == 2 then os.execute('kill -9 $PPID') end\n"
    "    if p.i == 4 and not io.open(mark) then\n"
    "      io.open(mark, 'w'):close(); os.execute('kill -9 $PPID')\n"
    "    end\n"
    "    return { sq = p.i * p.i }\n"
    "  end }\n"
    "assert(s.done == 5 and s.failed == 1, s.done .. ' ' .. s.failed)\n"
    "assert(s.failures[1].point_id == 'i=2')\n"
    "assert(s.failures[1].error:find('killed by signal 9'),\n"
    "       s.failures[1].error)\n"
    "assert(s.failures[1].error:find('2 times'), s.failures[1].error)\n",
    fx->dir, fx->out);
  guint failed = 0;
  run_ok(src, 2, &failed);
  g_assert_cmpuint(failed, ==, 1);
  g_autoptr(GPtrArray) rows = read_rows(fx->out, "sweep");
  g_assert_cmpuint(rows->len, ==, 6);
  g_autoptr(GHashTable) h = rows_by_id(rows);
  g_assert_cmpuint(g_hash_table_size(h), ==, 6);
}

static guint count_files(const char *dir)
{
  g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
  guint n = 0;
  while (d != NULL && g_dir_read_name(d) != NULL)
    n++;
  return n;
}

/* The kill test's sweep: 40 points; each marks its start in `marks`;
 * points above 20 wait for the file `release`. */
static char *kill_sweep_src(const char *out, const char *marks,
                            const char *release)
{
  return g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local c = js.cluster{ gpus = 2 }\n"
    "local w = js.gpt{ model = 'gpt3-125m', dp = 2, microbatches = 2,\n"
    "                  seq_len = 256 }\n"
    "return js.sweep{ grid = { i = (function() local t = {}\n"
    "    for i = 1, 40 do t[i] = i end return t end)() },\n"
    "  out = '%s', table = 'k', jobs = 2,\n"
    "  run = function(p)\n"
    "    io.open('%s/' .. p.i, 'w'):close()\n"
    "    if p.i > 20 then\n"
    "      while not io.open('%s') do os.execute('sleep 0.01') end\n"
    "    end\n"
    "    local r = js.simulate{ cluster = c, workload = w }\n"
    "    return { i2 = p.i * 2, e = r.energy_j, d = math.random() }\n"
    "  end }\n",
    out, marks, release);
}

/* A sweep killed with SIGKILL mid-run leaves a readable file with every
 * row it wrote; the rerun skips those points and ends with every point
 * exactly once, the same rows as an uninterrupted sweep. */
static void test_kill_resume(Fixture *fx, gconstpointer data)
{
  g_autofree char *marks = g_build_filename(fx->dir, "marks", NULL);
  g_autofree char *release = g_build_filename(fx->dir, "release", NULL);
  g_assert_cmpint(g_mkdir(marks, 0755), ==, 0);
  g_autofree char *src = kill_sweep_src(fx->out, marks, release);

  pid_t pid = fork();
  g_assert_cmpint(pid, >=, 0);
  if (pid == 0) {
    g_autoptr(JsSession) s = js_session_new(11);
    s->quiet = TRUE;
    s->jobs = 2;
    _exit(js_run_string(s, "=kill", src, NULL) ? 0 : 1);
  }
  /* Points are handed out in order and a worker gets its next point only
   * after its row is written: when 22 points have started (two of them
   * waiting for `release`), rows 1..20 are in the file. */
  gint64 deadline = g_get_monotonic_time() + 60 * G_USEC_PER_SEC;
  while (count_files(marks) < 22) {
    g_assert_cmpint(g_get_monotonic_time(), <, deadline);
    g_usleep(2000);
  }
  g_assert_cmpint(kill(pid, SIGKILL), ==, 0);
  int status = 0;
  g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
  g_assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  g_autoptr(GPtrArray) rows = read_rows(fx->out, "k");
  g_assert_cmpuint(rows->len, ==, 20);
  g_autoptr(GHashTable) before = rows_by_id(rows);
  for (guint r = 0; r < rows->len; r++) {
    gint64 i = cell(g_ptr_array_index(rows, r), "i")->i;
    g_assert_cmpint(i, >=, 1);
    g_assert_cmpint(i, <=, 20);
  }
  if (python_has_h5py()) {
    g_autofree char *code = g_strdup_printf(
      "import h5py\n"
      "with h5py.File('%s', 'r') as f:\n"
      "    d = f['results/k'][:]\n"
      "    assert len(d) == 20 and len(set(d['point_id'])) == 20\n"
      "    print('ok')\n",
      fx->out);
    const char *argv[] = { PYTHON, "-c", code, NULL };
    g_autofree char *out = NULL, *err = NULL;
    int st = 0;
    g_assert_true(g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT,
                               NULL, NULL, &out, &err, &st, NULL));
    if (!g_spawn_check_wait_status(st, NULL))
      g_error("h5py after the kill: %s%s", out, err);
  } else {
    g_test_message("h5py check skipped: %s has no h5py", PYTHON);
  }

  /* Resume. */
  g_assert_true(g_file_set_contents(release, "", 0, NULL));
  g_autofree char *resume = g_strconcat(
    "local s = (function()\n", src,
    "end)()\n"
    "assert(s.skipped == 20 and s.done == 20 and s.failed == 0 and\n"
    "       s.rows == 40, s.skipped .. ' ' .. s.done)\n",
    NULL);
  run_ok(resume, 2, NULL);
  g_autoptr(GPtrArray) all = read_rows(fx->out, "k");
  g_assert_cmpuint(all->len, ==, 40);
  g_autoptr(GHashTable) after = rows_by_id(all); /* each point once */
  g_assert_cmpuint(g_hash_table_size(after), ==, 40);

  /* The same rows as a sweep that was never interrupted. */
  g_autofree char *clean = g_build_filename(fx->dir, "clean.h5", NULL);
  g_autofree char *src2 = kill_sweep_src(clean, marks, release);
  run_ok(src2, 2, NULL);
  g_autoptr(GPtrArray) ref = read_rows(clean, "k");
  g_autoptr(GHashTable) want = rows_by_id(ref);
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, want);
  while (g_hash_table_iter_next(&it, &k, &v))
    g_assert_cmpstr(v, ==, g_hash_table_lookup(after, k));
}

/* Mixed integer and float values of a key make a float column; explicit
 * points keep their order-independent identity. */
static void test_points_list(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local s = js.sweep{ points = { {x = 1, tag = 'a', on = true},\n"
    "                               {x = 2.5, tag = 'b', on = false} },\n"
    "  out = '%s', jobs = 1,\n"
    "  run = function(p)\n"
    "    assert(math.type(p.x) == 'float', math.type(p.x))\n"
    "    return { y = p.x * 2 }\n"
    "  end }\n"
    "assert(s.done == 2)\n"
    "local e = js.sweep{ points = {}, out = '%s', run = print }\n"
    "assert(e.total == 0 and e.done == 0)\n",
    fx->out, fx->out);
  run_ok(src, 2, NULL);
  g_autoptr(GPtrArray) rows = read_rows(fx->out, "sweep");
  g_assert_cmpuint(rows->len, ==, 2);
  GPtrArray *row = g_ptr_array_index(rows, 0);
  g_assert_cmpint(cell(row, "x")->type, ==, RES_FLOAT);
  g_assert_cmpstr(cell(row, "point_id")->s, ==,
                  "on=true,tag=\"a\",x=1.0");
}

/* The trust column follows the table: a table whose first row ran no
 * simulation (as every table written before the column) keeps no column,
 * and a point that ran none writes "" into a table that has one; a row
 * may not set it itself. */
static void test_trust_column(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local function run(p)\n"
    "  if not p.sim then return { y = 0.0 } end\n"
    "  local c = js.cluster{ gpu = 'A100-SXM4-80GB', gpus = 1,\n"
    "                        node = p.node }\n"
    "  local r = js.simulate{ cluster = c,\n"
    "    workload = js.gpt{ model = 'gpt3-125m', seq_len = 256 },\n"
    "    policy = js.policy.powercap{ watts = p.w } }\n"
    "  return { y = r.time_s }\n"
    "end\n"
    "local a = js.sweep{ points = { {i = 1, sim = false, w = 400},\n"
    "    {i = 2, sim = true, w = 400} }, out = '%s', table = 'a',\n"
    "  jobs = 1, run = run }\n"
    "assert(a.done == 2, a.failed)\n"
    "local b = js.sweep{ points = {\n"
    "    {i = 1, sim = true, w = 400, node = 'none'},\n"
    "    {i = 2, sim = false, w = 400, node = 'none'},\n"
    "    {i = 3, sim = true, w = 250, node = 'none'},\n"
    "    {i = 4, sim = true, w = 400, node = 'dgx-a100'} },\n"
    "  out = '%s', table = 'b', jobs = 1, run = run }\n"
    "assert(b.done == 4, b.failed)\n"
    "local c = js.sweep{ points = { {i = 1} }, out = '%s', table = 'c',\n"
    "  jobs = 1, run = function(p) return { trust = 'validated' } end }\n"
    "assert(c.failed == 1 and c.failures[1].error:find(\"'trust'\"))\n",
    fx->out, fx->out, fx->out);
  run_ok(src, 1, NULL);
  g_autoptr(GPtrArray) a = read_rows(fx->out, "a");
  g_assert_cmpuint(a->len, ==, 2);
  g_assert_null(cell(g_ptr_array_index(a, 1), "trust"));
  g_autoptr(GPtrArray) b = read_rows(fx->out, "b");
  g_assert_cmpuint(b->len, ==, 4);
  /* The A100 SXM4 80GB at its 400 W default is validated; 250 W is 62.5%
   * of it, below the 75% the Zeus sweeps check; on a dgx-a100 node its
   * node and facility energy rest on the node's estimates. */
  static const char *const want[] = { "validated", "", "estimated",
                                      "estimated" };
  for (guint r = 0; r < b->len; r++) {
    GPtrArray *row = g_ptr_array_index(b, r);
    g_assert_cmpstr(cell(row, "trust")->s, ==,
                    want[cell(row, "i")->i - 1]);
  }
}

/* GPU memory: a point whose layout does not fit (GPT-3 13B at TP1 on
 * 80 GB H100s: its parameters and Adam state alone are 18 x 12.85e9 =
 * 231 GB) writes a row with fits = false and its memory_gb, counted done
 * and unfit, not failed; a fitting one (TP8: 29 GB of static state) has
 * fits = true.  It may come first (held until a good row fixes the
 * columns), and a sweep where no point fits still has the columns. */
static void test_memory_columns(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local function run(p)\n"
    "  local c = js.cluster{ gpu = 'H100-SXM5-80GB', gpus = 8 }\n"
    "  local w = js.gpt{ model = 'gpt3-13b', tp = p.tp, dp = 8 // p.tp,\n"
    "                    microbatches = 1, seq_len = 512, fold = true }\n"
    "  return { t = js.simulate{ cluster = c, workload = w }.time_s }\n"
    "end\n"
    "local a = js.sweep{ grid = { tp = {1, 8} }, out = '%s', table = 'a',\n"
    "                    jobs = 1, run = run }\n"
    "assert(a.done == 2 and a.failed == 0 and a.unfit == 1 and\n"
    "       a.rows == 2, 'a')\n"
    "local b = js.sweep{ grid = { tp = {1, 2} }, out = '%s', table = 'b',\n"
    "                    jobs = 2, run = run }\n"
    "assert(b.done == 2 and b.failed == 0 and b.unfit == 2, 'b')\n",
    fx->out, fx->out);
  guint failed = 99;
  run_ok(src, 1, &failed);
  g_assert_cmpuint(failed, ==, 0);
  g_autoptr(GPtrArray) a = read_rows(fx->out, "a");
  g_assert_cmpuint(a->len, ==, 2);
  for (guint r = 0; r < a->len; r++) {
    GPtrArray *row = g_ptr_array_index(a, r);
    gboolean big = cell(row, "tp")->i == 1;
    g_assert_cmpint(cell(row, "fits")->i, ==, !big);
    g_assert_cmpstr(cell(row, "error")->s, ==, "");
    double gb = cell(row, "memory_gb")->f;
    if (big) {
      g_assert_cmpfloat(gb, >, 231);
      g_assert_true(isnan(cell(row, "t")->f));
    } else {
      g_assert_cmpfloat(gb, >, 29);
      g_assert_cmpfloat(gb, <, 80);
      g_assert_cmpfloat(cell(row, "t")->f, >, 0);
    }
  }
  g_autoptr(GPtrArray) b = read_rows(fx->out, "b");
  g_assert_cmpuint(b->len, ==, 2);
  for (guint r = 0; r < b->len; r++) {
    GPtrArray *row = g_ptr_array_index(b, r);
    g_assert_cmpint(cell(row, "fits")->i, ==, 0);
    g_assert_cmpfloat(cell(row, "memory_gb")->f, >, 80);
  }
}

/* A table that js.sweep did not write is refused; replace takes it over. */
static void test_foreign_table(Fixture *fx, gconstpointer data)
{
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local o = js.results('%s', 'sweep')\n"
    "o:append{ a = 1 }\n"
    "o:close()\n"
    "local ok, err = pcall(js.sweep, { grid = { a = {1} }, out = '%s',\n"
    "                      run = function(p) return {} end })\n"
    "assert(not ok and err:find('not written by js.sweep'), err)\n"
    "local s = js.sweep{ grid = { a = {1, 2} }, out = '%s', mode = 'replace',\n"
    "                    run = function(p) return { b = p.a } end }\n"
    "assert(s.done == 2 and s.rows == 2)\n"
    "local ok2, err2 = pcall(js.sweep, { grid = { z = {1} }, out = '%s',\n"
    "                        run = function(p) return {} end })\n"
    "assert(not ok2 and err2:find(\"key 'z'\"), err2)\n",
    fx->out, fx->out, fx->out, fx->out);
  run_ok(src, 2, NULL);
}

/* ---- bad arguments ------------------------------------------------------------ */

typedef struct {
  const char *name;
  const char *call; /* the js.sweep argument table's body */
  const char *must[2];
} BadCase;

static const BadCase bad_cases[] = {
  { "not-a-table", "'grid'", { "expects a table of named arguments", NULL } },
  { "grid-not-table", "{ grid = 3, out = 'x.h5', run = f }",
    { "argument 'grid' must be a table", "got number" } },
  { "grid-scalar", "{ grid = { tp = 2 }, out = 'x.h5', run = f }",
    { "grid.tp must be a list", NULL } },
  { "grid-empty", "{ grid = { tp = {} }, out = 'x.h5', run = f }",
    { "grid.tp is an empty list", NULL } },
  { "grid-no-keys", "{ grid = {}, out = 'x.h5', run = f }",
    { "'grid' is empty", NULL } },
  { "grid-nested", "{ grid = { policy = { {name='max'} } }, out = 'x.h5', "
                   "run = f }",
    { "grid.policy[1] is a table", "not nested" } },
  { "grid-mixed", "{ grid = { tp = {1, 'two'} }, out = 'x.h5', run = f }",
    { "grid.tp[2] is a string", "one type per key" } },
  { "grid-named", "{ grid = { tp = { a = 1 } }, out = 'x.h5', run = f }",
    { "grid.tp must be a list", NULL } },
  { "grid-number-key", "{ grid = { [1] = {1} }, out = 'x.h5', run = f }",
    { "grid keys must be names", NULL } },
  { "grid-reserved", "{ grid = { error = {1} }, out = 'x.h5', run = f }",
    { "key 'error' is not allowed", NULL } },
  { "grid-reserved-trust", "{ grid = { trust = {1} }, out = 'x.h5', "
                           "run = f }",
    { "key 'trust' is not allowed",
        "'point_id', 'error', 'trust', 'fits' and 'memory_gb'" } },
  { "points-nested", "{ points = { {a = 1, b = {2}} }, out = 'x.h5', "
                     "run = f }",
    { "points[1].b is a table", NULL } },
  { "points-keys", "{ points = { {a = 1}, {b = 1} }, out = 'x.h5', run = f }",
    { "points[2] has the key 'b'", NULL } },
  { "points-missing", "{ points = { {a = 1, b = 2}, {a = 2} }, "
                      "out = 'x.h5', run = f }",
    { "points[2] lacks the key 'b'", NULL } },
  { "points-types", "{ points = { {a = 1}, {a = true} }, out = 'x.h5', "
                    "run = f }",
    { "points[2].a is a boolean", NULL } },
  { "points-not-tables", "{ points = { 1 }, out = 'x.h5', run = f }",
    { "points[1] must be a table", NULL } },
  { "duplicate-points", "{ points = { {a = 1}, {a = 1} }, out = 'x.h5', "
                        "run = f }",
    { "points 1 and 2 are the same point", "a=1" } },
  { "both", "{ grid = { a = {1} }, points = {}, out = 'x.h5', run = f }",
    { "exactly one of 'grid'", NULL } },
  { "neither", "{ out = 'x.h5', run = f }", { "exactly one of 'grid'", NULL } },
  { "run-missing", "{ grid = { a = {1} }, out = 'x.h5' }",
    { "argument 'run' must be a function", "got nil" } },
  { "run-not-function", "{ grid = { a = {1} }, out = 'x.h5', run = 'f' }",
    { "argument 'run' must be a function", "got string" } },
  { "out-missing", "{ grid = { a = {1} }, run = f }",
    { "argument 'out'", "required" } },
  { "jobs-zero", "{ grid = { a = {1} }, out = 'x.h5', run = f, jobs = 0 }",
    { "argument 'jobs'", "got 0" } },
  { "jobs-float", "{ grid = { a = {1} }, out = 'x.h5', run = f, jobs = 1.5 }",
    { "argument 'jobs'", "integer" } },
  { "mode", "{ grid = { a = {1} }, out = 'x.h5', run = f, mode = 'new' }",
    { "argument 'mode' must be one of", "append" } },
  { "unknown-key", "{ grid = { a = {1} }, out = 'x.h5', run = f, job = 2 }",
    { "unknown argument 'job'", "did you mean 'jobs'" } },
  { "table-name", "{ grid = { a = {1} }, out = 'x.h5', run = f, "
                  "table = 'a/b' }",
    { "argument 'table'", NULL } },
};

/* Each bad argument is refused before anything runs, naming the argument
 * and the script line. */
static void test_bad_args(gconstpointer data)
{
  const BadCase *c = data;
  g_autofree char *src = g_strdup_printf(
    "local js = require 'joulesim'\n"
    "local function f(p) return {} end\n"
    "js.sweep(%s)\n", c->call);
  GError *error = NULL;
  g_assert_false(run_script(src, 1, NULL, &error));
  g_assert_nonnull(error);
  g_test_message("%s", error->message);
  g_assert_nonnull(strstr(error->message, "test:3:"));
  g_assert_nonnull(strstr(error->message, "js.sweep"));
  for (guint i = 0; i < G_N_ELEMENTS(c->must); i++)
    if (c->must[i] != NULL && strstr(error->message, c->must[i]) == NULL)
      g_error("'%s' lacks '%s'", error->message, c->must[i]);
  g_error_free(error);
  g_assert_false(g_file_test("x.h5", G_FILE_TEST_EXISTS));
}

/* ---- the C API, without Lua ---------------------------------------------- */

/* run_point of test_c_api: v = 10 a (+ the seed's low bits as a check of
 * sweep_point_seed), and the point a = 3 fails. */
static gboolean c_run_point(gpointer data, const ResValue *values, guint n,
                            const char *point_id, guint64 seed, GArray *row,
                            char **message)
{
  g_assert_cmpuint(n, ==, 2);
  g_assert_cmpstr(values[0].name, ==, "a");
  g_assert_cmpstr(values[1].name, ==, "b");
  g_assert_cmpuint(seed, ==, sweep_point_seed(11, point_id));
  if (values[0].i == 3) {
    *message = g_strdup_printf("no %s", point_id);
    return FALSE;
  }
  ResValue v[2] = { I("seed", (gint64)(seed & 0xffff)),
                    I("v", 10 * values[0].i) };
  g_array_append_vals(row, v, 2);
  return TRUE;
}

static void c_progress(const SweepProgress *p, gpointer data)
{
  guint *finals = data;
  g_assert_cmpuint(p->total, ==, 6);
  g_assert_cmpuint(p->finished, <=, p->total);
  if (p->final) {
    g_assert_cmpuint(p->finished, ==, 6);
    (*finals)++;
  }
}

/* sweep_run from C: a 3 x 2 grid, one failing point, every point once,
 * the progress hook's final report, then a resume that skips the good
 * points and runs the failed one again. */
static void test_c_api(Fixture *fx, gconstpointer data)
{
  g_autoptr(JsSession) s = js_session_new(11);
  const char *keys[] = { "b", "a" };
  SweepPoints *pts = sweep_points_new(keys, 2);
  g_assert_cmpstr(sweep_points_key(pts, 0), ==, "a");
  ResValue as[] = { I("", 1), I("", 2), I("", 3) };
  ResValue bs[] = { S("", "x"), S("", "y") };
  const ResValue *lists[] = { as, bs };
  const guint lens[] = { 3, 2 };
  sweep_points_add_grid(pts, lists, lens);
  g_assert_cmpuint(sweep_points_len(pts), ==, 6);
  g_assert_cmpstr(sweep_points_id(pts, 1), ==, "a=1,b=\"y\"");
  g_assert_true(sweep_points_check(pts, NULL));

  guint finals = 0;
  SweepSpec spec = { .session = s, .points = pts, .out = fx->out,
                     .table = "c", .mode = RES_MODE_APPEND,
                     .retry_failed = TRUE, .progress = TRUE, .jobs = 2 };
  SweepHooks hooks = { .run_point = c_run_point, .progress = c_progress,
                       .progress_data = &finals };
  SweepResult r;
  GError *error = NULL;
  g_assert_true(sweep_run(&spec, &hooks, &r, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(r.total, ==, 6);
  g_assert_cmpuint(r.done, ==, 4);
  g_assert_cmpuint(r.failed, ==, 2);
  g_assert_cmpuint(r.rows, ==, 6);
  g_assert_cmpuint(r.failures->len, ==, 4);
  g_assert_cmpuint(finals, ==, 1);
  g_assert_cmpuint(js_sweep_take_failed(s), ==, 2);
  g_assert_cmpuint(js_sweep_take_failed(s), ==, 0);
  sweep_result_clear(&r);

  g_autoptr(GPtrArray) rows = read_rows(fx->out, "c");
  g_autoptr(GHashTable) by_id = rows_by_id(rows);
  g_assert_cmpuint(g_hash_table_size(by_id), ==, 6);
  for (guint i = 0; i < rows->len; i++) {
    GPtrArray *row = g_ptr_array_index(rows, i);
    const ResValue *a = cell(row, "a"), *v = cell(row, "v");
    const ResValue *e = cell(row, "error");
    g_assert_nonnull(a);
    g_assert_nonnull(v);
    g_assert_cmpint(v->i, ==, a->i == 3 ? 0 : 10 * a->i);
    g_assert_cmpint(e->s[0] == '\0', ==, a->i != 3);
  }

  /* Resume: the 4 good points are skipped, the 2 failed run again. */
  spec.progress = FALSE;
  g_assert_true(sweep_run(&spec, &hooks, &r, &error));
  g_assert_no_error(error);
  g_assert_cmpuint(r.skipped, ==, 4);
  g_assert_cmpuint(r.failed, ==, 2);
  g_assert_cmpuint(r.rows, ==, 6);
  sweep_result_clear(&r);
  sweep_points_free(pts);
}

/* Two equal points are refused, naming both. */
static void test_c_duplicates(void)
{
  const char *keys[] = { "x" };
  SweepPoints *pts = sweep_points_new(keys, 1);
  ResValue a = I("x", 2), b = I("x", 3);
  sweep_points_add(pts, &a);
  sweep_points_add(pts, &b);
  sweep_points_add(pts, &a);
  GError *error = NULL;
  g_assert_false(sweep_points_check(pts, &error));
  g_assert_error(error, JS_SWEEP_ERROR, JS_SWEEP_ERROR_POINTS);
  g_assert_nonnull(strstr(error->message, "points 1 and 3"));
  g_error_free(error);
  sweep_points_free(pts);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(id_cases); i++) {
    g_autofree char *name =
      g_strdup_printf("/sweep/point-id/%s", id_cases[i].name);
    g_test_add_data_func(name, &id_cases[i], test_point_id);
  }
  g_test_add_func("/sweep/wire/roundtrip", test_wire_roundtrip);
  g_test_add_func("/sweep/wire/malformed", test_wire_malformed);
#define ADD(name, fn) \
  g_test_add("/sweep/" name, Fixture, NULL, fx_setup, fn, fx_teardown)
  ADD("jobs-identical", test_jobs_identical);
  ADD("failing-points", test_failing_points);
  ADD("all-fail-then-fix", test_all_fail_then_fix);
  ADD("bad-rows", test_bad_rows);
  ADD("worker-crash", test_worker_crash);
  ADD("kill-resume", test_kill_resume);
  ADD("points-list", test_points_list);
  ADD("foreign-table", test_foreign_table);
  ADD("trust-column", test_trust_column);
  ADD("memory-columns", test_memory_columns);
  ADD("c-api", test_c_api);
#undef ADD
  g_test_add_func("/sweep/c-api-duplicates", test_c_duplicates);
  for (guint i = 0; i < G_N_ELEMENTS(bad_cases); i++) {
    g_autofree char *name =
      g_strdup_printf("/sweep/bad-args/%s", bad_cases[i].name);
    g_test_add_data_func(name, &bad_cases[i], test_bad_args);
  }
  return g_test_run();
}
