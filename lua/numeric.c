/* lua/numeric.c -- js.nelder_mead{...}: models/numeric.c's Nelder-Mead
 * (the optimiser the profile fit uses) over a Lua objective, so a script
 * fits with the same method, steps and stopping rule as the library.
 */
#include "lua/luautil.h"
#include "models/numeric.h"

#include <lauxlib.h>
#include <math.h>

#define FN "js.nelder_mead"

/* The objective as num_nelder_mead calls it: f at the stack slot fn. */
typedef struct {
  lua_State *L;
  int fn;
  guint n;
} LObjective;

/* f(x) with x a fresh list (f may keep it).  An error in f propagates
 * through num_nelder_mead, which holds nothing on the heap.  NaN counts
 * as +inf, so a point where f is undefined is simply the worst. */
static double call_objective(const double *x, void *data)
{
  LObjective *o = data;
  lua_State *L = o->L;
  lua_pushvalue(L, o->fn);
  lua_createtable(L, (int)o->n, 0);
  for (guint k = 0; k < o->n; k++) {
    lua_pushnumber(L, x[k]);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  lua_call(L, 1, 1);
  if (lua_type(L, -1) != LUA_TNUMBER)
    luaL_error(L, FN ": f must return a number (got %s)",
               luaL_typename(L, -1));
  double v = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return isnan(v) ? HUGE_VAL : v;
}

/* The list argument key of the table at idx into out: n numbers when n
 * > 0, else 1..NUM_NM_MAX of them.  Returns its length; 0 when absent. */
static guint read_list(lua_State *L, int idx, const char *key, guint n,
                       double *out)
{
  int t = lua_getfield(L, idx, key);
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return 0;
  }
  lua_Integer len = t == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, -1) : 0;
  gboolean ok = n > 0 ? len == n : len >= 1 && len <= NUM_NM_MAX;
  for (lua_Integer k = 1; ok && k <= len; k++) {
    ok = lua_rawgeti(L, -1, k) == LUA_TNUMBER;
    out[k - 1] = lua_tonumber(L, -1);
    ok = ok && isfinite(out[k - 1]);
    lua_pop(L, 1);
  }
  if (!ok) {
    if (n > 0)
      luaL_error(L, FN ": argument '%s' must be a list of %d finite numbers, "
                 "one per coordinate of x", key, (int)n);
    luaL_error(L, FN ": argument '%s' must be a list of 1 to %d finite "
               "numbers", key, NUM_NM_MAX);
  }
  lua_pop(L, 1);
  return (guint)len;
}

/* step: one number for every coordinate, or a list of n. */
static void read_step(lua_State *L, int idx, guint n, double *step)
{
  int t = lua_getfield(L, idx, "step");
  lua_pop(L, 1);
  if (t == LUA_TNIL)
    luaL_error(L, FN ": argument 'step' is required (a number or a list)");
  if (t == LUA_TTABLE) {
    read_list(L, idx, "step", n, step);
    return;
  }
  double s = jsl_opt_num(L, idx, FN, "step", 0, -G_MAXDOUBLE, G_MAXDOUBLE);
  for (guint k = 0; k < n; k++)
    step[k] = s;
}

/* js.nelder_mead{ f =, x =, step =, iterations = [, lo =, hi =] [, tol =] }
 * -> x, value: the best point found and f there. */
static int l_nelder_mead(lua_State *L)
{
  static const char *const keys[] = { "f", "x", "step", "iterations", "lo",
                                      "hi", "tol", NULL };
  jsl_check_keys(L, 1, FN, keys);
  if (lua_getfield(L, 1, "f") != LUA_TFUNCTION)
    luaL_error(L, FN ": argument 'f' must be a function (got %s)",
               luaL_typename(L, -1));
  LObjective o = { L, lua_gettop(L), 0 };
  double x[NUM_NM_MAX], step[NUM_NM_MAX], lo[NUM_NM_MAX], hi[NUM_NM_MAX],
      tol[NUM_NM_MAX];
  o.n = read_list(L, 1, "x", 0, x);
  if (o.n == 0)
    luaL_error(L, FN ": argument 'x' is required (the first point)");
  read_step(L, 1, o.n, step);
  lua_Integer iters = jsl_opt_int(L, 1, FN, "iterations", -1, 1, G_MAXINT);
  if (iters < 0)
    luaL_error(L, FN ": argument 'iterations' is required (the most to run)");
  gboolean has_lo = read_list(L, 1, "lo", o.n, lo) > 0;
  gboolean has_hi = read_list(L, 1, "hi", o.n, hi) > 0;
  if (has_lo != has_hi)
    luaL_error(L, FN ": arguments 'lo' and 'hi' go together (a box)");
  for (guint k = 0; has_lo && k < o.n; k++)
    if (!(lo[k] <= hi[k]))
      luaL_error(L, FN ": lo[%d] = %f is above hi[%d] = %f", (int)k + 1,
                 lo[k], (int)k + 1, hi[k]);
  gboolean has_tol = read_list(L, 1, "tol", o.n, tol) > 0;
  double v = num_nelder_mead(call_objective, &o, o.n, x, step,
                             has_lo ? lo : NULL, has_hi ? hi : NULL,
                             (guint)iters, has_tol ? tol : NULL);
  lua_createtable(L, (int)o.n, 0);
  for (guint k = 0; k < o.n; k++) {
    lua_pushnumber(L, x[k]);
    lua_rawseti(L, -2, (lua_Integer)k + 1);
  }
  lua_pushnumber(L, v);
  return 2;
}

void jsl_register_numeric(lua_State *L)
{
  lua_pushcfunction(L, l_nelder_mead);
  lua_setfield(L, -2, "nelder_mead");
}
