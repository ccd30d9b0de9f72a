/* lua/csv.c -- js.csv(path): a CSV file read by the library's reader
 * (traces/profile.c, the one profile CSVs go through), so a script reads
 * CSV as joulesim does: quoted fields, blank and '#' lines skipped, text
 * only, and errors that name the file and line.
 */
#include "lua/luautil.h"
#include "traces/profile.h"

#include <lauxlib.h>

/* Pushes a list of the strings of a (owned by the caller). */
static void push_strings(lua_State *L, const GPtrArray *a)
{
  lua_createtable(L, (int)a->len, 0);
  for (guint i = 0; i < a->len; i++) {
    lua_pushstring(L, g_ptr_array_index(a, i));
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
}

/* js.csv(path) -> { header = {names}, header_line = n, rows = { {name =
 * value, ...}, ... }, lines = {n, ...} }: every value a string, a row per
 * record in file order, lines[k] the line of rows[k].  The table is read
 * into an owner (jsl_push_owner), so a memory error while it is
 * converted leaves nothing behind. */
static int l_csv(lua_State *L)
{
  const char *path = luaL_checkstring(L, 1);
  jsl_check_read(L, "js.csv", path);
  gpointer *owner =
      jsl_push_owner(L, (GDestroyNotify)profile_csv_table_free);
  GError *err = NULL;
  const CsvTable *t = *owner = profile_csv_read(path, &err);
  if (t == NULL)
    return jsl_raise_gerror(L, "js.csv", err);
  lua_createtable(L, 0, 4);
  push_strings(L, t->header);
  lua_setfield(L, -2, "header");
  lua_pushinteger(L, t->header_line);
  lua_setfield(L, -2, "header_line");
  lua_createtable(L, (int)t->records->len, 0);
  for (guint r = 0; r < t->records->len; r++) {
    const GPtrArray *f = g_ptr_array_index(t->records, r);
    lua_createtable(L, 0, (int)f->len);
    for (guint c = 0; c < f->len; c++) {
      lua_pushstring(L, g_ptr_array_index(f, c));
      lua_setfield(L, -2, g_ptr_array_index(t->header, c));
    }
    lua_rawseti(L, -2, (lua_Integer)r + 1);
  }
  lua_setfield(L, -2, "rows");
  lua_createtable(L, (int)t->lines->len, 0);
  for (guint r = 0; r < t->lines->len; r++) {
    lua_pushinteger(L, g_array_index(t->lines, guint, r));
    lua_rawseti(L, -2, (lua_Integer)r + 1);
  }
  lua_setfield(L, -2, "lines");
  return 1;
}

void jsl_register_csv(lua_State *L)
{
  lua_pushcfunction(L, l_csv);
  lua_setfield(L, -2, "csv");
}
