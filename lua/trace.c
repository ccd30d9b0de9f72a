/* lua/trace.c -- js.trace: load, import, save and info.
 *
 * Inputs: a native trace file (HDF5, traces/native.h) is recognised by its
 * HDF5 signature; anything else goes to the profiler importers
 * (traces/import.h: Kineto JSON, Nsight Systems SQLite, Chakra); both
 * through run/inputs.h, which `joulesim trace` (cli/cmd_trace.c) uses too.
 * Every check that can raise comes before the first C allocation.
 */
#include "lua/luautil.h"
#include "run/inputs.h"
#include "run/memory.h"
#include "traces/import.h"
#include "traces/info.h"
#include "traces/native.h"

#include <lauxlib.h>
#include <string.h>

/* ---- Lua: js.trace ----------------------------------------------------------- */

/* js.trace.load(path) -> workload */
static int l_trace_load(lua_State *L)
{
  const char *fn = "js.trace.load";
  const char *path = luaL_checkstring(L, 1);
  if (lua_gettop(L) > 1)
    luaL_error(L, "%s: takes one argument, the trace file (got %d)", fn,
               lua_gettop(L));
  jsl_check_read(L, fn, path);
  GError *err = NULL;
  LWorkload *u = jsl_new_workload(L);
  u->w = trace_native_load_within(
    path, js_memory_limit(jsl_session(L)->max_memory), &err);
  if (u->w == NULL)
    return jsl_raise_gerror(L, fn, err);
  u->label = g_path_get_basename(path);
  return 1;
}

/* Pushes an owner of a new, empty list of strings, and returns the list:
 * an importer's warnings, held there while they are copied into a Lua
 * table (whose allocations may raise). */
static GPtrArray *push_warnings(lua_State *L)
{
  gpointer *owner = jsl_push_owner(L, (GDestroyNotify)g_ptr_array_unref);
  return *owner = g_ptr_array_new_with_free_func(g_free);
}

/* js.trace.import(path, ...) or js.trace.import{ path, ..., gpu = NAME }
 * -> workload, warnings (a list of strings) */
static int l_trace_import(lua_State *L)
{
  const char *fn = "js.trace.import";
  JsSession *s = jsl_session(L);
  const char *gpu = NULL;
  TraceImportOptions how;
  memset(&how, 0, sizeof how);
  /* Every check that can raise comes before the first allocation (a Lua
   * error longjmps past any free).  The file names stay on the Lua stack,
   * at first..first+n-1, and are only borrowed below. */
  int first = 1, n = lua_gettop(L);
  if (lua_type(L, 1) == LUA_TTABLE) {
    if (lua_gettop(L) > 1)
      luaL_error(L, "%s: give either file names or one table", fn);
    lua_Integer len = (lua_Integer)lua_rawlen(L, 1);
    lua_pushnil(L);
    while (lua_next(L, 1) != 0) {
      lua_pop(L, 1);
      if (lua_type(L, -1) == LUA_TSTRING) {
        const char *k = lua_tostring(L, -1);
        if (strcmp(k, "gpu") != 0 && strcmp(k, "step") != 0 &&
            strcmp(k, "gpu_only") != 0) {
          static const char *const keys[] = {"gpu", "step", "gpu_only", NULL};
          const char *near = jsl_closest(k, keys);
          luaL_error(L, "%s: unknown argument '%s'%s%s%s; allowed: the "
                        "file names (a list), gpu, step and gpu_only", fn, k,
                     near ? " (did you mean '" : "", near ? near : "",
                     near ? "'?)" : "");
        }
      } else if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
                 lua_tointeger(L, -1) > len) {
        luaL_error(L, "%s: the table must hold a list of file names and "
                      "named options (got a %s key)", fn,
                   luaL_typename(L, -1));
      }
    }
    /* The names, and LUA_MINSTACK slots for what is pushed above them. */
    if (len > G_MAXINT - LUA_MINSTACK ||
        !lua_checkstack(L, (int)len + LUA_MINSTACK))
      luaL_error(L, "%s: too many files (%I)", fn, len);
    first = lua_gettop(L) + 1;
    n = (int)len;
    for (lua_Integer i = 1; i <= len; i++) {
      if (lua_rawgeti(L, 1, i) != LUA_TSTRING)
        luaL_error(L, "%s: file %d must be a string (got %s)", fn, (int)i,
                   luaL_typename(L, -1));
    }
    gpu = jsl_opt_str(L, 1, fn, "gpu", NULL);
    /* step = "first" | "median" | "all" | a step number */
    lua_getfield(L, 1, "step");
    if (lua_isinteger(L, -1)) {
      lua_Integer v = lua_tointeger(L, -1);
      if (v < 0)
        luaL_error(L, "%s: argument 'step' must be a step number >= 0, "
                      "\"first\", \"median\" or \"all\" (got %I)", fn, v);
      how.step = TRACE_STEP_NUMBER;
      how.step_number = (gint64)v;
    } else if (lua_type(L, -1) == LUA_TSTRING) {
      const char *v = lua_tostring(L, -1);
      if (strcmp(v, "first") == 0)
        how.step = TRACE_STEP_FIRST;
      else if (strcmp(v, "median") == 0)
        how.step = TRACE_STEP_MEDIAN;
      else if (strcmp(v, "all") == 0)
        how.step = TRACE_STEP_ALL;
      else
        luaL_error(L, "%s: argument 'step' must be \"first\", \"median\", "
                      "\"all\" or a step number (got \"%s\")", fn, v);
    } else if (!lua_isnil(L, -1)) {
      luaL_error(L, "%s: argument 'step' must be \"first\", \"median\", "
                    "\"all\" or a step number (got %s)", fn,
                 luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    lua_getfield(L, 1, "gpu_only");
    if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
      luaL_error(L, "%s: argument 'gpu_only' must be a boolean (got %s)", fn,
                 luaL_typename(L, -1));
    how.gpu_only = lua_toboolean(L, -1);
    lua_pop(L, 1);
  } else {
    for (int i = 1; i <= n; i++) {
      if (lua_type(L, i) != LUA_TSTRING)
        luaL_error(L, "%s: argument %d must be a file name (got %s)", fn, i,
                   luaL_typename(L, i));
    }
  }
  if (n <= 0)
    return luaL_error(L, "%s: give at least one trace file", fn);
  for (int i = 0; i < n; i++)
    jsl_check_read(L, fn, lua_tostring(L, first + i));
  GError *err = NULL;
  if (gpu != NULL && gpu_catalogue_lookup(s->catalogue, gpu, &err) == NULL) {
    g_prefix_error(&err, "argument 'gpu': ");
    return jsl_raise_gerror(L, fn, err);
  }
  /* The owners first (lua/luautil.c): the workload, the warnings' owner,
   * the path list in Lua memory. */
  LWorkload *u = jsl_new_workload(L);
  GPtrArray *warnings = push_warnings(L);
  const char **paths = lua_newuserdatauv(L, sizeof *paths * (size_t)n, 0);
  for (int i = 0; i < n; i++)
    paths[i] = lua_tostring(L, first + i);
  u->w = js_inputs_load(s->catalogue, paths, (guint)n, gpu, &how,
                        s->max_memory, warnings, &err);
  if (u->w == NULL)
    return jsl_raise_gerror(L, fn, err);
  u->label = js_inputs_label(paths, (guint)n);
  lua_pop(L, 1);
  lua_createtable(L, (int)warnings->len, 0);
  for (guint i = 0; i < warnings->len; i++) {
    lua_pushstring(L, g_ptr_array_index(warnings, i));
    lua_rawseti(L, -2, i + 1);
  }
  lua_remove(L, -2); /* the owner: its __gc frees the C warnings */
  return 2;
}

/* js.trace.save(workload, path) */
static int l_trace_save(lua_State *L)
{
  const char *fn = "js.trace.save";
  LWorkload *u = jsl_check_workload(L, 1, fn);
  if (lua_type(L, 2) != LUA_TSTRING)
    luaL_error(L, "%s: argument 2 must be the output file name (got %s)", fn,
               luaL_typename(L, 2));
  const char *path = lua_tostring(L, 2);
  jsl_check_write(L, fn, path, JS_FILE_TRACE);
  GError *err = NULL;
  if (!trace_native_save(u->w, path, &err))
    return jsl_raise_gerror(L, fn, err);
  return 0;
}

static void set_str(lua_State *L, const char *k, const char *v)
{
  if (v == NULL)
    return;
  lua_pushstring(L, v);
  lua_setfield(L, -2, k);
}

/* js.trace.info(workload) -> table (see docs/trace-files.md) */
static int l_trace_info(lua_State *L)
{
  const char *fn = "js.trace.info";
  LWorkload *u = jsl_check_workload(L, 1, fn);
  const SimWorkload *w = u->w;
  TraceStats st;
  trace_stats_compute(w, &st);
  lua_createtable(L, 0, 24);
  set_str(L, "label", u->label);
  jsl_set_int(L, "ranks", st.n_ranks);
  jsl_set_int(L, "ops", (lua_Integer)st.n_ops);
  jsl_set_int(L, "shapes", st.n_shapes);
  jsl_set_int(L, "names", st.n_names);
  jsl_set_int(L, "groups", st.n_groups);
  lua_createtable(L, 0, 3);
  jsl_set_int(L, "min", st.streams_min);
  jsl_set_int(L, "max", st.streams_max);
  jsl_set_int(L, "total", (lua_Integer)st.streams_total);
  lua_setfield(L, -2, "streams");
  lua_createtable(L, 0, SIM_CLASS_COUNT);
  for (int c = 0; c < SIM_CLASS_COUNT; c++)
    jsl_set_int(L, sim_class_name((SimOpClass)c), (lua_Integer)st.by_class[c]);
  lua_setfield(L, -2, "by_class");
  lua_createtable(L, 0, SIM_OP_KIND_COUNT);
  for (int k = 0; k < SIM_OP_KIND_COUNT; k++)
    jsl_set_int(L, sim_kind_name((SimOpKind)k), (lua_Integer)st.by_kind[k]);
  lua_setfield(L, -2, "by_kind");
  lua_createtable(L, (int)st.n_ranks, 0);
  for (guint r = 0; r < st.n_ranks; r++) {
    lua_pushnumber(L, (double)st.busy_ns[r] * 1e-9);
    lua_rawseti(L, -2, r + 1);
  }
  lua_setfield(L, -2, "busy_s");
  lua_createtable(L, (int)st.n_ranks, 0);
  for (guint r = 0; r < st.n_ranks; r++) {
    lua_createtable(L, 0, SIM_PHASE_COUNT);
    for (int k = 0; k < SIM_PHASE_COUNT; k++)
      jsl_set_num(L, sim_phase_name((SimPhase)k),
                  (double)st.busy_phase_ns[(gsize)r * SIM_PHASE_COUNT + k] *
                      1e-9);
    lua_rawseti(L, -2, r + 1);
  }
  lua_setfield(L, -2, "busy_by_phase_s");
  jsl_set_num(L, "busy_min_s", (double)st.busy_min_ns * 1e-9);
  jsl_set_num(L, "busy_max_s", (double)st.busy_max_ns * 1e-9);
  jsl_set_num(L, "host_ops", (double)st.host_ops);
  jsl_set_num(L, "host_streams", (double)st.host_streams);
  jsl_set_num(L, "step_s", (double)st.step_ns * 1e-9);
  jsl_set_num(L, "host_bound", st.host_bound);
  jsl_set_num(L, "busy_mean_s", st.busy_mean_ns * 1e-9);
  lua_createtable(L, 0, (int)st.groups->len);
  for (guint k = 0; k < st.groups->len; k++) {
    const TraceGroupStats *gs = &g_array_index(st.groups, TraceGroupStats, k);
    lua_createtable(L, 0, 4);
    jsl_set_int(L, "groups", gs->n_groups);
    jsl_set_int(L, "calls", (lua_Integer)gs->calls);
    jsl_set_int(L, "ops", (lua_Integer)gs->ops);
    jsl_set_num(L, "bytes", gs->bytes);
    lua_setfield(L, -2, gs->label);
  }
  lua_setfield(L, -2, "collectives");
  lua_createtable(L, 0, SIM_COLL_COUNT);
  for (int t = 0; t < SIM_COLL_COUNT; t++) {
    if (st.coll_by_type[t] == 0)
      continue;
    lua_createtable(L, 0, 2);
    jsl_set_int(L, "ops", (lua_Integer)st.coll_by_type[t]);
    jsl_set_num(L, "bytes", st.coll_bytes_by_type[t]);
    lua_setfield(L, -2, sim_coll_name((SimCollType)t));
  }
  lua_setfield(L, -2, "by_collective");
  lua_createtable(L, 0, 2);
  jsl_set_int(L, "sends", (lua_Integer)st.p2p_sends);
  jsl_set_num(L, "bytes", st.p2p_bytes);
  lua_setfield(L, -2, "p2p");
  jsl_set_num(L, "kernel_flops", st.kernel_flops);
  jsl_set_num(L, "kernel_bytes", st.kernel_bytes);
  jsl_set_num(L, "comm_bytes", st.comm_bytes);
  lua_createtable(L, 0, 7);
  jsl_set_int(L, "tp", w->tp);
  jsl_set_int(L, "pp", w->pp);
  jsl_set_int(L, "dp", w->dp);
  jsl_set_int(L, "microbatches", w->microbatches);
  jsl_set_num(L, "tokens_per_iteration", w->tokens_per_iteration);
  set_str(L, "schedule", w->schedule);
  set_str(L, "ref_gpu", w->ref_gpu);
  lua_setfield(L, -2, "layout");
  lua_createtable(L, 0, (int)g_hash_table_size(w->provenance));
  GHashTableIter it;
  gpointer k, v;
  g_hash_table_iter_init(&it, w->provenance);
  while (g_hash_table_iter_next(&it, &k, &v))
    set_str(L, k, v);
  lua_setfield(L, -2, "provenance");
  GString *text = g_string_new(NULL);
  trace_info(w, text);
  lua_pushlstring(L, text->str, text->len);
  lua_setfield(L, -2, "text");
  g_string_free(text, TRUE);
  trace_stats_clear(&st);
  return 1;
}

static const luaL_Reg trace_funcs[] = {
  {"load", l_trace_load},
  {"import", l_trace_import},
  {"save", l_trace_save},
  {"info", l_trace_info},
  {NULL, NULL}};

void jsl_register_trace(lua_State *L)
{
  luaL_newlib(L, trace_funcs);
  lua_setfield(L, -2, "trace");
}

