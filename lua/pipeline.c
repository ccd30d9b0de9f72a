/* lua/pipeline.c -- js.pipeline (being written). */
#include "lua/luautil.h"

void jsl_register_pipeline(lua_State *L)
{
  (void)L;
}
