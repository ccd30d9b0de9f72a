/* lua/stragglers.c -- the `stragglers` argument of js.simulate and
 * js.pipeline_run: a list of explicit stragglers
 *
 *   { gpu | pipeline, slowdown, from_iteration, to_iteration }
 *
 * or one random model { rate, slowdown = {lo, hi}, duration = {lo, hi} },
 * read into a StragglerSet (models/straggler.h).  Indices in Lua are
 * 1-based: gpu (r.per_gpu[gpu]), pipeline, from_iteration and
 * to_iteration (r.iterations[i]) all count from 1.
 *
 * Every argument is checked before the set is filled; the set lives in a
 * userdata (freed by __gc), so a later Lua error cannot leak it.
 */
#include "lua/luautil.h"

#include <lauxlib.h>

#include "models/straggler.h"

/* Reads {lo, hi} of a random straggler model. */
static void read_pair(lua_State *L, int idx, const char *fn, const char *key,
                      double *lo, double *hi, gboolean integer)
{
  if (lua_getfield(L, idx, key) != LUA_TTABLE)
    luaL_error(L, "%s: random stragglers need '%s' = {lo, hi} (got %s)", fn,
               key, luaL_typename(L, -1));
  for (int k = 1; k <= 2; k++) {
    int isnum = 0;
    lua_rawgeti(L, -1, k);
    double v = integer ? (double)lua_tointegerx(L, -1, &isnum)
                       : lua_tonumberx(L, -1, &isnum);
    if (!isnum)
      luaL_error(L, "%s: '%s' = {lo, hi} must hold two %s", fn, key,
                 integer ? "integers" : "numbers");
    *(k == 1 ? lo : hi) = v;
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
}

static const char *const explicit_keys[] = {"gpu", "pipeline", "slowdown",
                                            "from_iteration", "to_iteration",
                                            NULL};
static const char *const random_keys[] = {"rate", "slowdown", "duration",
                                          NULL};

/* Adds the straggler table at idx (explicit or random) to set; raises on
 * a bad argument, returns the set's error otherwise. */
static gboolean add_straggler(lua_State *L, int idx, const char *fn,
                              StragglerSet *set, guint64 seed,
                              GError **error)
{
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: each straggler must be a table (got %s)", fn,
               luaL_typename(L, idx));
  lua_getfield(L, idx, "rate");
  gboolean random = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (random) {
    jsl_check_keys(L, idx, fn, random_keys);
    StragglerRandom r;
    r.rate = jsl_opt_num(L, idx, fn, "rate", 0, 0, 1);
    read_pair(L, idx, fn, "slowdown", &r.slow_lo, &r.slow_hi, FALSE);
    double dlo, dhi;
    read_pair(L, idx, fn, "duration", &dlo, &dhi, TRUE);
    if (dlo < 1 || dhi < dlo || dhi > 1e9)
      luaL_error(L, "%s: 'duration' = {%d, %d} must be {lo, hi} iterations "
                    "with 1 <= lo <= hi", fn, (int)dlo, (int)dhi);
    r.dur_lo = (guint)dlo;
    r.dur_hi = (guint)dhi;
    return straggler_set_add_random(set, &r, seed, error);
  }
  jsl_check_keys(L, idx, fn, explicit_keys);
  StragglerSpec sp;
  sp.gpu = (gint)jsl_opt_int(L, idx, fn, "gpu", 0, 1, 1 << 20) - 1;
  sp.pipeline = (gint)jsl_opt_int(L, idx, fn, "pipeline", 0, 1, 1 << 20) - 1;
  lua_getfield(L, idx, "slowdown");
  if (!lua_isnumber(L, -1))
    luaL_error(L, "%s: a straggler needs 'slowdown' = a time factor >= 1 "
                  "(got %s)", fn, luaL_typename(L, -1));
  lua_pop(L, 1);
  sp.slowdown = jsl_opt_num(L, idx, fn, "slowdown", 1, 1,
                            STRAGGLER_MAX_SLOWDOWN);
  sp.from_iteration = (guint)jsl_opt_int(L, idx, fn, "from_iteration", 1, 1,
                                         G_MAXINT32) - 1;
  lua_Integer to = jsl_opt_int(L, idx, fn, "to_iteration", 0, 1, G_MAXINT32);
  sp.to_iteration = to == 0 ? STRAGGLER_FOREVER : (guint)to - 1;
  return straggler_set_add(set, &sp, error);
}

/* Builds the straggler set of argument `stragglers` of the table at idx
 * (a list of specs, or one random model) for workload w simulated for
 * `iterations` iterations; NULL when absent.  The set lives in an owner
 * (jsl_push_owner) pushed on the stack (always pushed), valid while that
 * stays there.
 * Raises on a bad argument.  Exported for js.simulate (lua/luautil.h). */
StragglerSet *jsl_stragglers_from_lua(lua_State *L, int idx, const char *fn,
                                      const SimWorkload *w, guint iterations,
                                      guint64 seed)
{
  gpointer *owner = jsl_push_owner(L, (GDestroyNotify)straggler_set_free);
  int t = lua_getfield(L, idx, "stragglers");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    return NULL;
  }
  if (t != LUA_TTABLE)
    luaL_error(L, "%s: argument 'stragglers' must be a list of stragglers "
                  "or a random model (got %s)", fn, luaL_typename(L, -1));
  int st = lua_gettop(L);
  GError *err = NULL;
  if (w->tp == 0 || w->dp == 0)
    luaL_error(L, "%s: stragglers need a workload with a tp x dp x pp "
                  "layout", fn);
  StragglerSet *set = *owner =
      straggler_set_new(w->n_ranks, w->tp, w->dp, iterations, &err);
  if (set == NULL) {
    jsl_raise_gerror(L, fn, err);
    return NULL;
  }
  lua_getfield(L, st, "rate");
  gboolean single = !lua_isnil(L, -1);
  lua_pop(L, 1);
  if (single) {
    if (!add_straggler(L, st, fn, set, seed, &err)) {
      jsl_raise_gerror(L, fn, err);
      return NULL;
    }
  } else {
    lua_Integer n = (lua_Integer)lua_rawlen(L, st);
    for (lua_Integer i = 1; i <= n; i++) {
      lua_rawgeti(L, st, i);
      if (!add_straggler(L, lua_gettop(L), fn, set, seed, &err)) {
        jsl_raise_gerror(L, fn, err);
        return NULL;
      }
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return set;
}

