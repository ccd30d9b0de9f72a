/* lua/sweep.c -- js.sweep: the Lua binding of the sweep engine
 * (run/sweep.h, docs/sweeps.md).
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
 * This file reads the arguments and the points from Lua (a point is a flat
 * table of string keys and numbers, booleans or strings; anything else is
 * an error naming the key; a key whose values mix integers and floats is
 * made float throughout) and supplies the engine's hooks: running a point
 * in a worker's Lua state and tidying the state before the workers fork.
 * Everything else (ids, resume, the workers, MPI, the rows) is the
 * engine's.  Progress goes to the session's hook (the CLI's).
 *
 * A worker is a fork()ed copy of the caller: its Lua state already holds
 * `run` and everything the script built before, copy-on-write.  It calls
 * run(point) under lua_pcall after reseeding math.random with the point's
 * seed (so a row depends on --seed and the point only; run must not rely
 * on globals it changes itself: a worker runs many points).  What a
 * worker must not do: write the sweep's results file (io/results.c
 * refuses writes through an inherited table), call js.sweep (refused), or
 * os.exit (refused: it would run the parent's exit handlers in the
 * child).
 */
#include "run/sweep.h"
#include "lua/luautil.h"
#include "io/results.h"

#include <lauxlib.h>
#include <lua.h>
#include <string.h>
#include <unistd.h>

#define SWEEP_FN "js.sweep"
#define SWEEP_WORKER_KEY "joulesim.sweep.worker"
#define SWEEP_MT "joulesim.Sweep"

/* Everything C-allocated that a call owns hangs off this userdata: a Lua
 * error anywhere frees it through __gc. */
typedef struct {
  SweepPoints *pts;
  SweepResult result;
} LSweep;

static int sweep_gc(lua_State *L)
{
  LSweep *u = luaL_checkudata(L, 1, SWEEP_MT);
  g_clear_pointer(&u->pts, sweep_points_free);
  sweep_result_clear(&u->result);
  return 0;
}

/* ---- flat Lua tables <-> values -------------------------------------------- */

static int compare_values(gconstpointer a, gconstpointer b)
{
  return strcmp(((const ResValue *)a)->name, ((const ResValue *)b)->name);
}

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

/* ---- building the points --------------------------------------------------- */

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

/* One more value of a key (at the top of the stack, named `where`;
 * `first` names the key's first value): checks it (check_scalar) and that
 * it has the kind of the key's earlier values (*kind, LUA_TNONE before
 * the first; integers and floats are one kind, numbers), and sets
 * *as_float when it is a float: a key whose values mix integers and
 * floats is float throughout, so its column has one type (the table
 * promotes an int column later given a float the same way,
 * io/results.h). */
static void note_kind(lua_State *L, const char *where, const char *first,
                      int *kind, gboolean *as_float)
{
  check_scalar(L, where);
  int vk = lua_type(L, -1);
  if (*kind == LUA_TNONE)
    *kind = vk;
  else if (vk != *kind)
    luaL_error(L, "%s: %s is a %s but %s is a %s (one type per key)",
               SWEEP_FN, where, lua_typename(L, vk), first,
               lua_typename(L, *kind));
  if (vk == LUA_TNUMBER && !lua_isinteger(L, -1))
    *as_float = TRUE;
}

/* Copies the Lua value at the top of the stack (checked by check_scalar)
 * into v (strings borrowed from Lua); as_float turns integers into
 * floats. */
static void value_from_top(lua_State *L, const char *name, gboolean as_float,
                           ResValue *v)
{
  if (!jsl_value_from_top(L, name, v))
    g_assert_not_reached();
  if (v->type == RES_INT && as_float) {
    v->type = RES_FLOAT;
    v->f = (double)v->i;
    v->i = 0;
  }
}

/* Makes u->pts with the keys of the table at idx; raises on a key that is
 * not a name or is reserved. */
static SweepPoints *points_with_keys(lua_State *L, LSweep *u, int idx,
                                     const char *what)
{
  GPtrArray *keys = g_ptr_array_new(); /* freed by hand: lua_error */
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pushfstring(L, "%s: %s keys must be names (strings), got a %s key",
                      SWEEP_FN, what, luaL_typename(L, -1));
      g_ptr_array_unref(keys);
      lua_error(L);
    }
    size_t n = 0;
    const char *k = lua_tolstring(L, -1, &n);
    if (n == 0 || strlen(k) != n || !g_utf8_validate(k, -1, NULL) ||
        sweep_key_reserved(k)) {
      lua_pushfstring(L, "%s: %s key '%s' is not allowed (%s)", SWEEP_FN,
                      what, k,
                      sweep_key_reserved(k)
                        ? "js.sweep writes its own 'point_id', 'error', "
                          "'trust', 'fits' and 'memory_gb' columns"
                        : "empty, not UTF-8 or with a NUL byte");
      g_ptr_array_unref(keys);
      lua_error(L);
    }
    g_ptr_array_add(keys, (gpointer)k); /* held by the table */
  }
  u->pts = sweep_points_new((const char *const *)keys->pdata, keys->len);
  g_ptr_array_unref(keys);
  return u->pts;
}

/* grid = { key = {v1, v2, ...}, ... }: the Cartesian product. */
static void sweep_points_from_grid(lua_State *L, LSweep *u, int grid)
{
  SweepPoints *pts = points_with_keys(L, u, grid, "grid");
  if (sweep_points_n_keys(pts) == 0)
    luaL_error(L, "%s: argument 'grid' is empty (give at least one key with "
                  "a list of values)", SWEEP_FN);
  guint n = sweep_points_n_keys(pts);
  /* Scratch arrays as Lua memory: a Lua error below must not leak. */
  guint *len = lua_newuserdatauv(L, sizeof(guint) * n, 0);
  gboolean *as_float = lua_newuserdatauv(L, sizeof(gboolean) * n, 0);
  guint64 total = 1;
  for (guint k = 0; k < n; k++) {
    const char *key = sweep_points_key(pts, k);
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
      char where[200], first[200];
      g_snprintf(where, sizeof where, "grid.%s[%d]", key, (int)j);
      g_snprintf(first, sizeof first, "grid.%s[1]", key);
      note_kind(L, where, first, &kind0, &has_float);
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

  /* The values, read again from the (checked) lists (strings borrowed
   * from them), then their product. */
  guint sum = 0;
  for (guint k = 0; k < n; k++)
    sum += len[k];
  ResValue *all = lua_newuserdatauv(L, sizeof(ResValue) * sum, 0);
  const ResValue **lists = lua_newuserdatauv(L, sizeof(ResValue *) * n, 0);
  for (guint k = 0, at = 0; k < n; at += len[k], k++) {
    const char *key = sweep_points_key(pts, k);
    lists[k] = all + at;
    lua_getfield(L, grid, key);
    for (guint j = 0; j < len[k]; j++) {
      lua_rawgeti(L, -1, (lua_Integer)j + 1);
      value_from_top(L, key, as_float[k], &all[at + j]);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  sweep_points_add_grid(pts, lists, len);
  lua_pop(L, 4);
}

/* points = { {k = v, ...}, ... }: every point with the same keys. */
static void sweep_points_from_list(lua_State *L, LSweep *u, int list)
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
  if (m == 0) {
    u->pts = sweep_points_new(NULL, 0);
    return;
  }

  /* Keys from the first point; kinds and float-ness over all points. */
  lua_rawgeti(L, list, 1);
  if (!lua_istable(L, -1))
    luaL_error(L, "%s: points[1] must be a table of values (got %s)",
               SWEEP_FN, luaL_typename(L, -1));
  SweepPoints *pts = points_with_keys(L, u, lua_gettop(L), "points[1]");
  lua_pop(L, 1);
  guint n = sweep_points_n_keys(pts);
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
        known = strcmp(sweep_points_key(pts, i), k) == 0;
      if (!known)
        luaL_error(L, "%s: points[%d] has the key '%s', which points[1] has "
                      "not (every point needs the same keys)", SWEEP_FN,
                   (int)j, k);
      seen++;
    }
    if (seen != n) {
      for (guint k = 0; k < n; k++) {
        if (lua_getfield(L, pt, sweep_points_key(pts, k)) == LUA_TNIL)
          luaL_error(L, "%s: points[%d] lacks the key '%s' of points[1] "
                        "(every point needs the same keys)", SWEEP_FN,
                     (int)j, sweep_points_key(pts, k));
        lua_pop(L, 1);
      }
    }
    for (guint k = 0; k < n; k++) {
      lua_getfield(L, pt, sweep_points_key(pts, k));
      char where[200], first[200];
      g_snprintf(where, sizeof where, "points[%d].%s", (int)j, sweep_points_key(pts, k));
      g_snprintf(first, sizeof first, "points[1].%s", sweep_points_key(pts, k));
      note_kind(L, where, first, &kind[k], &as_float[k]);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  for (lua_Integer j = 1; j <= m; j++) {
    lua_rawgeti(L, list, j);
    for (guint k = 0; k < n; k++) {
      lua_getfield(L, -1, sweep_points_key(pts, k));
      value_from_top(L, sweep_points_key(pts, k), as_float[k], &vals[k]);
      lua_pop(L, 1);
    }
    sweep_points_add(pts, vals);
    lua_pop(L, 1);
  }
  lua_pop(L, 3);
}

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

/* The hooks' state: the caller's Lua state and `run`'s stack index. */
typedef struct {
  lua_State *L;
  int run_idx;
  int base; /* a worker's stack top between points */
} SweepLua;

/* SweepHooks.worker_init: a worker refuses js.sweep and os.exit. */
static void worker_init(gpointer data)
{
  SweepLua *sl = data;
  lua_State *L = sl->L;
  lua_pushboolean(L, 1);
  lua_setfield(L, LUA_REGISTRYINDEX, SWEEP_WORKER_KEY);
  if (lua_getglobal(L, "os") == LUA_TTABLE) {
    lua_pushcfunction(L, worker_no_exit);
    lua_setfield(L, -2, "exit");
  }
  lua_pop(L, 1);
  sl->base = lua_gettop(L);
}

/* SweepHooks.run_point: run(point) in the worker's state.  The row's
 * strings stay on the stack until the next point. */
static gboolean worker_run_point(gpointer data, const ResValue *values,
                                 guint n, const char *point_id, guint64 seed,
                                 GArray *row, char **message)
{
  SweepLua *sl = data;
  lua_State *L = sl->L;
  int top = sl->base;
  lua_settop(L, top);
  /* Each point's math.random stream, set from C: a script that replaces
   * math.randomseed does not change it. */
  jsl_reseed_script(L, seed >> 1);
  lua_pushcfunction(L, worker_msgh);
  lua_pushvalue(L, sl->run_idx);
  push_values(L, values, n);
  if (lua_pcall(L, 1, 1, top + 1) != LUA_OK) {
    const char *m = lua_tostring(L, -1);
    /* Which limit, when one stopped it (the heap's share of a sweep). */
    char *why = jsl_limits_explain(jsl_session(L), m != NULL ? m : "");
    *message = why != NULL ? why : g_strdup(m != NULL ? m : "");
    lua_settop(L, top);
    return FALSE;
  }
  if (!lua_istable(L, -1)) {
    *message = g_strdup_printf("run must return a table (the row), got %s",
                               luaL_typename(L, -1));
    return FALSE;
  }
  *message = flat_from_lua(L, -1, "row", row);
  return *message == NULL;
}

/* SweepHooks.before_fork: finalise garbage here, not in the workers. */
static void sweep_collect(gpointer data)
{
  lua_gc(((SweepLua *)data)->L, LUA_GCCOLLECT);
}

/* ---- js.sweep -------------------------------------------------------------------------- */

static void push_summary(lua_State *L, const SweepResult *r,
                         const char *out, const char *table)
{
  lua_createtable(L, 0, 9);
  lua_pushinteger(L, r->total);
  lua_setfield(L, -2, "total");
  lua_pushinteger(L, r->done);
  lua_setfield(L, -2, "done");
  lua_pushinteger(L, r->skipped);
  lua_setfield(L, -2, "skipped");
  lua_pushinteger(L, r->failed);
  lua_setfield(L, -2, "failed");
  lua_pushinteger(L, r->unfit);
  lua_setfield(L, -2, "unfit");
  lua_pushinteger(L, (lua_Integer)r->rows);
  lua_setfield(L, -2, "rows");
  lua_pushstring(L, out);
  lua_setfield(L, -2, "out");
  lua_pushstring(L, table);
  lua_setfield(L, -2, "table");
  lua_createtable(L, (int)(r->failures->len / 2), 0);
  for (guint i = 0; i + 1 < r->failures->len; i += 2) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, g_ptr_array_index(r->failures, i));
    lua_setfield(L, -2, "point_id");
    lua_pushstring(L, g_ptr_array_index(r->failures, i + 1));
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
  LSweep *u = lua_newuserdatauv(L, sizeof *u, 0);
  memset(u, 0, sizeof *u);
  luaL_setmetatable(L, SWEEP_MT);

  SweepSpec spec = { .session = s };
  if (lua_getfield(L, 1, "run") != LUA_TFUNCTION)
    return luaL_error(L, "%s: argument 'run' must be a function(point) that "
                         "returns a row (got %s)", SWEEP_FN,
                      luaL_typename(L, -1));
  SweepLua sl = { L, lua_gettop(L), 0 };
  spec.out = jsl_opt_str(L, 1, SWEEP_FN, "out", NULL);
  if (spec.out == NULL || spec.out[0] == '\0')
    return luaL_error(L, "%s: argument 'out' (the results file, a string) is "
                         "required", SWEEP_FN);
  jsl_check_write(L, SWEEP_FN, spec.out, JS_FILE_RESULTS);
  spec.table = jsl_opt_str(L, 1, SWEEP_FN, "table", "sweep");
  if (spec.table[0] == '\0' || spec.table[0] == '.' ||
      strchr(spec.table, '/') != NULL)
    return luaL_error(L, "%s: argument 'table' = '%s' must be a name without "
                         "'/' that does not start with '.'", SWEEP_FN,
                      spec.table);
  spec.mode = (ResMode)jsl_opt_choice(L, 1, SWEEP_FN, "mode",
                                      RES_MODE_APPEND, sweep_modes);
  spec.retry_failed = jsl_opt_bool(L, 1, SWEEP_FN, "retry_failed", TRUE);
  spec.progress = jsl_opt_bool(L, 1, SWEEP_FN, "progress",
                               !s->quiet && isatty(STDERR_FILENO));
  guint def_jobs = s->jobs > 0 ? s->jobs : MAX(g_get_num_processors(), 1);
  guint max_jobs = js_sweep_max_jobs();
  spec.jobs = (guint)jsl_opt_int(L, 1, SWEEP_FN, "jobs",
                                 MIN(def_jobs, max_jobs), 1, max_jobs);

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
    sweep_points_from_grid(L, u, lua_gettop(L) - 1);
  } else {
    if (tp != LUA_TTABLE)
      return luaL_error(L, "%s: argument 'points' must be a list of points "
                           "(got %s)", SWEEP_FN, lua_typename(L, tp));
    sweep_points_from_list(L, u, lua_gettop(L));
  }
  lua_pop(L, 2);
  GError *err = NULL;
  if (!sweep_points_check(u->pts, &err)) {
    /* Without a position, as every message about the points. */
    lua_pushfstring(L, "%s: %s", SWEEP_FN, err->message);
    g_error_free(err);
    return lua_error(L);
  }

  spec.points = u->pts;
  SweepHooks hooks = {
    .before_fork = sweep_collect,
    .worker_init = worker_init,
    .run_point = worker_run_point,
    .data = &sl,
    .progress = s->sweep_progress,
    .progress_data = s->sweep_progress_data,
  };
  if (!sweep_run(&spec, &hooks, &u->result, &err))
    return jsl_raise_gerror(L, SWEEP_FN, err);
  push_summary(L, &u->result, spec.out, spec.table);
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
