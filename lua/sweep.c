/* lua/sweep.c -- js.sweep (being written). */
#include "lua/luautil.h"

void jsl_register_sweep(lua_State *L)
{
  (void)L;
}
