/* lua/validate.c -- js.profile, js.validate and `joulesim validate` (being
 * written). */
#include "lua/commands.h"
#include "lua/luautil.h"

#include <stdio.h>

void jsl_register_profile(lua_State *L)
{
  (void)L;
}

int js_cmd_validate(int argc, char **argv)
{
  (void)argc;
  (void)argv;
  fprintf(stderr, "joulesim validate: not available in this build\n");
  return 2;
}
