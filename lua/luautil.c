/* lua/luautil.c -- argument checking and userdata helpers shared by every
 * file of the Lua binding.  See lua/luautil.h.
 *
 * Rule for every binding function: a Lua error is a longjmp, which skips
 * g_autofree/g_autoptr cleanups.  So no C allocation may be live when an
 * error can be raised: check arguments first, keep temporary strings on the
 * Lua stack, and wrap C objects in userdata (freed by __gc) before calling
 * anything that may raise.  Every Lua call that allocates (making a
 * userdata, a table or a string) may raise a memory error, under the
 * capped heap of lua/sandbox.c too, so the owner comes first, as in
 * liolib: make the userdata empty, then the C object into it. */
#include "lua/luautil.h"

#include <lauxlib.h>
#include <string.h>

JsSession *jsl_session(lua_State *L)
{
  /* jsl_state_new (lua/sandbox.c) stores it in the state's extra space,
   * which every coroutine copies. */
  JsSession *s = *(JsSession **)lua_getextraspace(L);
  g_assert(s != NULL);
  return s;
}

/* Raises a Lua error "fn: message" at the caller's line, freeing err. */
int jsl_raise_gerror(lua_State *L, const char *fn, GError *err)
{
  luaL_where(L, 1);
  lua_pushfstring(L, "%s: %s", fn, err->message);
  g_error_free(err);
  lua_concat(L, 2);
  return lua_error(L);
}


static guint edit_distance(const char *a, const char *b)
{
  gsize n = strlen(a), m = strlen(b);
  g_autofree guint *row = g_new(guint, m + 1);
  for (gsize j = 0; j <= m; j++)
    row[j] = (guint)j;
  for (gsize i = 1; i <= n; i++) {
    guint diag = row[0];
    row[0] = (guint)i;
    for (gsize j = 1; j <= m; j++) {
      guint up = row[j];
      guint cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
      diag = up;
    }
  }
  return row[m];
}

/* The closest of `names` to `s` within distance max_d, or NULL. */
static const char *closest_within(const char *s, const char *const *names,
                                  guint max_d)
{
  const char *best = NULL;
  guint bd = max_d + 1;
  for (int i = 0; names[i] != NULL; i++) {
    guint d = edit_distance(s, names[i]);
    if (d < bd) {
      bd = d;
      best = names[i];
    }
  }
  return best;
}

/* The closest of `names` to `s` within distance 3, or NULL. */
const char *jsl_closest(const char *s, const char *const *names)
{
  return closest_within(s, names, 3);
}

/* The closest of `names` to a short value `s`: within a third of its
 * length (at least 1), so that "kernal" gets "kernel" and "fp8" or "t5"
 * get no guess ("fp16", "gpt" are other things, not typos). */
const char *jsl_closest_value(const char *s, const char *const *names)
{
  return closest_within(s, names, MAX(1, (guint)strlen(s) / 3));
}

/* Checks that the table at idx has only string keys from `allowed`. */
void jsl_check_keys(lua_State *L, int idx, const char *fn,
                       const char *const *allowed)
{
  /* Not luaL_checktype: its "bad argument #N" names a stack slot, not the
   * argument of a nested table such as js.cluster{variability}. */
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: expected a table of named arguments (got %s)", fn,
               luaL_typename(L, idx));
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      luaL_error(L, "%s: arguments must be named (got a %s key)", fn,
                 luaL_typename(L, -1));
    }
    const char *k = lua_tostring(L, -1);
    gboolean ok = FALSE;
    for (int i = 0; allowed[i] != NULL; i++)
      if (strcmp(k, allowed[i]) == 0)
        ok = TRUE;
    if (!ok) {
      /* Build the list on the Lua stack: a Lua error longjmps, so no C
       * allocation may be live when it is raised. */
      char *list = g_strjoinv(", ", (char **)allowed);
      lua_pushstring(L, list);
      g_free(list);
      const char *near = jsl_closest(k, allowed);
      if (near != NULL)
        luaL_error(L, "%s: unknown argument '%s' (did you mean '%s'?); "
                      "allowed: %s", fn, k, near, lua_tostring(L, -1));
      luaL_error(L, "%s: unknown argument '%s'; allowed: %s", fn, k,
                 lua_tostring(L, -1));
    }
  }
}

/* Integer argument `key` of table idx in [lo, hi], or def when absent. */
lua_Integer jsl_opt_int(lua_State *L, int idx, const char *fn,
                           const char *key, lua_Integer def, lua_Integer lo,
                           lua_Integer hi)
{
  int t = lua_getfield(L, idx, key);
  lua_Integer v = def;
  if (t != LUA_TNIL) {
    int isnum = 0;
    /* A number only: lua_tointegerx alone would also take "8". */
    v = t == LUA_TNUMBER ? lua_tointegerx(L, -1, &isnum) : 0;
    if (!isnum)
      luaL_error(L, "%s: argument '%s' must be an integer in %I..%I (got %s)",
                 fn, key, lo, hi,
                 t == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
    if (v < lo || v > hi)
      luaL_error(L, "%s: argument '%s' must be an integer in %I..%I (got %I)",
                 fn, key, lo, hi, v);
  }
  lua_pop(L, 1);
  return v;
}

guint64 jsl_opt_seed(lua_State *L, int idx, const char *fn, const char *key)
{
  gboolean given = lua_getfield(L, idx, key) != LUA_TNIL;
  lua_pop(L, 1);
  guint64 seed = given ? (guint64)jsl_opt_int(L, idx, fn, key, 0, 0,
                                              G_MAXINT64)
                       : 0;
  return js_session_seed(jsl_session(L), given, seed);
}

double jsl_opt_num(lua_State *L, int idx, const char *fn, const char *key,
                      double def, double lo, double hi)
{
  int t = lua_getfield(L, idx, key);
  double v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TNUMBER)
      luaL_error(L, "%s: argument '%s' must be a number in [%f, %f] (got %s)",
                 fn, key, lo, hi, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
    if (!(v >= lo && v <= hi))
      luaL_error(L, "%s: argument '%s' must be a number in [%f, %f] (got %f)",
                 fn, key, lo, hi, v);
  }
  lua_pop(L, 1);
  return v;
}

/* String argument (borrowed; valid while the table is alive), or def. */
const char *jsl_opt_str(lua_State *L, int idx, const char *fn,
                           const char *key, const char *def)
{
  int t = lua_getfield(L, idx, key);
  const char *v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TSTRING)
      luaL_error(L, "%s: argument '%s' must be a string (got %s)", fn, key,
                 luaL_typename(L, -1));
    v = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

gboolean jsl_opt_bool(lua_State *L, int idx, const char *fn,
                         const char *key, gboolean def)
{
  int t = lua_getfield(L, idx, key);
  gboolean v = def;
  if (t != LUA_TNIL) {
    if (t != LUA_TBOOLEAN)
      luaL_error(L, "%s: argument '%s' must be a boolean (got %s)", fn, key,
                 luaL_typename(L, -1));
    v = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

/* One of `names` (index), or def when absent. */
int jsl_opt_choice(lua_State *L, int idx, const char *fn, const char *key,
                      int def, const char *const *names)
{
  const char *v = jsl_opt_str(L, idx, fn, key, NULL);
  if (v == NULL)
    return def;
  for (int i = 0; names[i] != NULL; i++)
    if (strcmp(v, names[i]) == 0)
      return i;
  char *list = g_strjoinv("\", \"", (char **)names);
  lua_pushstring(L, list); /* no C allocation may outlive the longjmp */
  g_free(list);
  const char *near = jsl_closest_value(v, names);
  if (near != NULL)
    luaL_error(L, "%s: argument '%s' must be one of \"%s\" (got \"%s\"; did "
                  "you mean \"%s\"?)", fn, key, lua_tostring(L, -1), v, near);
  luaL_error(L, "%s: argument '%s' must be one of \"%s\" (got \"%s\")", fn,
             key, lua_tostring(L, -1), v);
  return def;
}

Cluster *jsl_check_cluster(lua_State *L, int idx, const char *fn)
{
  LCluster *u = luaL_testudata(L, idx, CLUSTER_MT);
  if (u == NULL || u->c == NULL)
    luaL_error(L, "%s: argument 'cluster' must be a cluster from js.cluster "
                  "(got %s)", fn, luaL_typename(L, idx));
  return u->c;
}

LWorkload *jsl_check_workload(lua_State *L, int idx, const char *fn)
{
  LWorkload *u = luaL_testudata(L, idx, WORKLOAD_MT);
  if (u == NULL || u->w == NULL)
    luaL_error(L, "%s: argument 'workload' must be a workload from js.gpt "
                  "(got %s)", fn, luaL_typename(L, idx));
  return u;
}


LWorkload *jsl_new_workload(lua_State *L)
{
  LWorkload *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->w = NULL;
  u->label = NULL;
  u->ref_defaulted = FALSE;
  u->gpu_memory = NULL;
  u->params = u->model_flops = 0;
  luaL_setmetatable(L, WORKLOAD_MT);
  return u;
}

#define OWNER_MT "joulesim.owner"

typedef struct {
  gpointer p;
  GDestroyNotify free_fn;
} JslOwner;

static int owner_gc(lua_State *L)
{
  JslOwner *o = lua_touserdata(L, 1);
  gpointer p = o->p;
  o->p = NULL;
  if (p != NULL)
    o->free_fn(p);
  return 0;
}

void jsl_register_owner(lua_State *L)
{
  luaL_newmetatable(L, OWNER_MT);
  lua_pushcfunction(L, owner_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);
}

gpointer *jsl_push_owner(lua_State *L, GDestroyNotify free_fn)
{
  JslOwner *o = lua_newuserdatauv(L, sizeof *o, 0);
  o->p = NULL;
  o->free_fn = free_fn;
  luaL_setmetatable(L, OWNER_MT);
  return &o->p;
}

gboolean jsl_value_from_top(lua_State *L, const char *name, ResValue *v)
{
  memset(v, 0, sizeof *v);
  v->name = name;
  switch (lua_type(L, -1)) {
  case LUA_TNUMBER:
    if (lua_isinteger(L, -1)) {
      v->type = RES_INT;
      v->i = lua_tointeger(L, -1);
    } else {
      v->type = RES_FLOAT;
      v->f = lua_tonumber(L, -1);
    }
    return TRUE;
  case LUA_TBOOLEAN:
    v->type = RES_BOOL;
    v->i = lua_toboolean(L, -1);
    return TRUE;
  case LUA_TSTRING:
    v->type = RES_STRING;
    v->s = lua_tostring(L, -1);
    return TRUE;
  default:
    return FALSE;
  }
}

/* A slowdown is a fraction of the time (0.01 = 1%); one of 1 or more is
 * legal (up to 10) but far more often meant as a percentage
 * (slowdown = 1 for 1%), so it is spelt out. */
void jsl_warn_slowdown(lua_State *L, const char *fn, double slowdown)
{
  if (slowdown >= 1)
    jsl_warn(L, "%s: slowdown = %g is a fraction of the time: it allows "
                "+%.0f%% (for %g%% write slowdown = %g)", fn, slowdown,
             100 * slowdown, slowdown, slowdown / 100);
}

/* Node and facility energy (models/node.h) beside the GPUs': the NVSwitches
 * are active for the mean fraction of the run the GPUs spend in
 * communication not hidden under a kernel, the NICs likewise when the
 * cluster spans more than one node (a single node's traffic stays on
 * NVLink).  Sets the fields on the table on top of the stack. */
void jsl_push_node_energy(lua_State *L, const SimResult *r,
                          const Cluster *c)
{
  double t = (double)r->time_ns * 1e-9, comm_s = 0;
  for (guint g = 0; g < r->n_gpus; g++)
    comm_s += r->per_gpu[g].comm_ns * 1e-9;
  double comm_u = t > 0 && r->n_gpus > 0 ? comm_s / r->n_gpus / t : 0;
  guint nodes = cluster_n_nodes(c);
  double node_j = node_energy_j(&c->node, nodes, t, r->energy_j,
                                nodes > 1 ? comm_u : 0, comm_u);
  lua_pushstring(L, c->node.name);
  lua_setfield(L, -2, "node");
  jsl_set_num(L, "pue", c->pue);
  jsl_set_num(L, "gpu_energy_j", r->energy_j);
  jsl_set_num(L, "node_energy_j", node_j);
  jsl_set_num(L, "facility_energy_j", node_j * c->pue);
}
