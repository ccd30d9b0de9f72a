/* lua/trace.c -- js.trace and `joulesim trace` (being written). */
#include "lua/commands.h"
#include "lua/luautil.h"

#include <stdio.h>

void jsl_register_trace(lua_State *L)
{
  (void)L;
}

int js_cmd_trace(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "joulesim trace: not available in this build\n");
  return 2;
}
