/* lua/policy.c -- DVFS policies from Lua: the policy tables built by
 * js.policy.* and their conversion to DvfsPolicy values. */
#include "lua/luautil.h"

#include <lauxlib.h>
#include <string.h>

/* Reads a policy table {name = "max"|"fixed", sm =, mem =} at idx. */
void jsl_policy_from_lua(lua_State *L, int idx, const char *fn, DvfsPolicy *p)
{
  memset(p, 0, sizeof *p);
  if (lua_isnoneornil(L, idx)) {
    p->kind = DVFS_MAX;
    return;
  }
  if (!lua_istable(L, idx))
    luaL_error(L, "%s: argument 'policy' must be a policy from js.policy "
                  "(got %s)", fn, luaL_typename(L, idx));
  static const char *const kinds[] = {"max", "fixed", NULL};
  int k = jsl_opt_choice(L, idx, fn, "name", -1, kinds);
  if (k < 0)
    luaL_error(L, "%s: argument 'policy' must be a policy from js.policy "
                  "(the table has no 'name')", fn);
  p->kind = (DvfsKind)k;
  if (p->kind == DVFS_FIXED) {
    p->sm_mhz = (guint)jsl_opt_int(L, idx, "js.policy.fixed", "sm", 0, 0, 65535);
    p->mem_mhz = (guint)jsl_opt_int(L, idx, "js.policy.fixed", "mem", 0, 0,
                                65535);
  }
}


void jsl_register_policy(lua_State *L)
{
  (void)L; /* js.policy constructors live in the prelude */
}
