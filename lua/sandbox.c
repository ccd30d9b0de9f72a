/* lua/sandbox.c -- the Lua state of a scenario: its allocator, where its
 * text goes, the sandbox's allow-listed globals, and the limits that stop
 * a runaway script (docs/lua-api.md, "The sandbox" and "Limits").
 *
 * Text: print, Lua's warnings and the panic message go to the session's
 * print hook (run/session.h), never to a stream; the CLI's hook writes
 * them to stdout and stderr.  (The one exception is the --max-seconds
 * hard stop, run/limits.c: a signal handler can only write(2) its
 * message.)
 *
 * The sandbox is an allow-list.  A sandboxed state never opens io, os,
 * debug or package.  It opens base, string, table, math, utf8 and
 * coroutine, copies the safe names of base into a fresh table, and makes
 * that table the state's globals (registry[LUA_RIDX_GLOBALS]): load's
 * default environment, lua_getglobal from C and the prelude's _ENV all see
 * only it, and the original base table is unreachable.  Replaced there:
 *   require         resolves "joulesim" only;
 *   load            text chunks only (malformed bytecode can crash the VM),
 *                   strings only (no reader functions);
 *   collectgarbage  "count" only (a "step" loop is a denial of service);
 *   setmetatable    refuses a metatable with __gc: Lua 5.4 runs finalizers
 *                   with hooks off, out of reach of the instruction and
 *                   time limits.
 * string.dump is removed, and the string metatable and every joulesim
 * metatable carry __metatable, so getmetatable cannot reach a library
 * table or a C __gc that would free an object still in use.  Files are
 * confined by the joulesim API itself (run/confine.h, jsl_check_read/
 * jsl_check_write), the one way a sandboxed script can reach them.
 *
 * Limits, sandboxed or not:
 *   - the Lua heap: the allocator refuses to grow past --max-memory (or
 *     the memory available at start); Lua raises "not enough memory";
 *   - --max-instructions: a count hook every JS_HOOK_PERIOD instructions
 *     adds the period to a counter (so the budget holds to within one
 *     period);
 *   - --max-seconds: the same hook compares the monotonic clock with the
 *     deadline.  Once a limit is hit the hook raises on every instruction
 *     of every coroutine, so a pcall can catch the error but no Lua code
 *     runs on after it.  Time spent inside C (a long js.simulate, a
 *     planner, a sweep's parent waiting for workers) is out of the hook's
 *     reach: run/limits.c's hard stop, JS_HARD_STOP_S seconds after the
 *     deadline, writes the reason and _exit(1)s.  Results files are flushed row by row and
 *     every other output is written by rename, so that stop loses nothing
 *     already written.
 * Coroutines inherit the hook (lua_newthread copies it) and the session
 * pointer (the state's extra space).  A fork()ed sweep worker inherits the
 * state; js_limits_after_fork (run/limits.c) takes the worker's share of
 * the memory limits (js_limits_share: the workers divide --max-memory)
 * and re-arms its alarm, which fork does not keep.
 *
 * Guards, sandboxed or not (jsl_open_guards): Lua runs some script code
 * with hooks off -- an xpcall handler called for the hook's own error, the
 * __close of a coroutine the hook stopped -- so xpcall, coroutine.close
 * and coroutine.wrap are replaced by versions that run no script code once
 * a limit is hit; and coroutine.close counts its nesting, which Lua 5.4.4
 * does not (a C-stack overflow).
 */
#include "lua/luautil.h"
#include "run/memory.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#define JS_HOOK_PERIOD 1000

/* ---- the allocator ----------------------------------------------------- */

/* lua_Alloc with the session's heap cap.  Only growth can be refused: Lua
 * assumes that shrinking never fails. */
static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
  JsLimits *lim = ud;
  if (ptr == NULL)
    osize = 0; /* osize then encodes the object's type */
  if (nsize == 0) {
    free(ptr);
    lim->heap_bytes -= osize;
    return NULL;
  }
  if (nsize > osize && lim->heap_limit > 0 &&
      nsize - osize > lim->heap_limit - MIN(lim->heap_bytes, lim->heap_limit)) {
    lim->heap_refused = TRUE;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (p != NULL)
    lim->heap_bytes = lim->heap_bytes - osize + nsize;
  return p;
}

/* ---- what a script writes ---------------------------------------------- */

/* Hands text to the session's print hook (run/session.h); without one the
 * text is dropped. */
static void emit(JsSession *s, JsPrintStream to, const char *text, gsize len)
{
  if (s != NULL && s->print != NULL)
    s->print(to, text, len, s->print_data);
}

/* Writes "joulesim: warning: WHERE: message" to the diagnostics (stderr
 * in the CLI), WHERE being the script line that called the C function
 * running now.  A message is written once per script run however often
 * the same line (or another) raises it: a sweep of 100 points over one
 * suspicious policy gets one warning.  Never raises except on memory. */
void jsl_warn(lua_State *L, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  g_autofree char *msg = g_strdup_vprintf(fmt, ap);
  va_end(ap);
  /* Seen messages: a table in the registry, message -> true. */
  if (lua_getfield(L, LUA_REGISTRYINDEX, "joulesim.warned") != LUA_TTABLE) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "joulesim.warned");
  }
  if (lua_getfield(L, -1, msg) != LUA_TNIL) {
    lua_pop(L, 2);
    return;
  }
  lua_pop(L, 1);
  lua_pushboolean(L, 1);
  lua_setfield(L, -2, msg);
  lua_pop(L, 1);
  luaL_where(L, 1);
  g_autofree char *line = g_strdup_printf("joulesim: warning: %s%s\n",
                                          lua_tostring(L, -1), msg);
  lua_pop(L, 1);
  emit(jsl_session(L), JS_PRINT_ERR, line, strlen(line));
}

static int panic(lua_State *L)
{
  const char *msg = lua_tostring(L, -1);
  g_autofree char *line = g_strdup_printf(
    "joulesim: Lua panic (unprotected error): %s\n",
    msg != NULL ? msg : "(not a string)");
  emit(jsl_session(L), JS_PRINT_ERR, line, strlen(line));
  return 0; /* Lua aborts */
}

/* Lua's warning function as luaL_newstate sets it up: off until "@on",
 * then "Lua warning: " + the pieces, as diagnostics.  ud is the session,
 * which keeps the on/off state and whether a warning is half written. */
static void warnf(void *ud, const char *msg, int tocont)
{
  JsSession *s = ud;
  if (!s->lua_warning_open && !tocont && msg[0] == '@') {
    if (strcmp(msg, "@on") == 0)
      s->lua_warnings_on = TRUE;
    else if (strcmp(msg, "@off") == 0)
      s->lua_warnings_on = FALSE;
    return;
  }
  if (s->lua_warnings_on) {
    if (!s->lua_warning_open)
      emit(s, JS_PRINT_ERR, "Lua warning: ", 13);
    emit(s, JS_PRINT_ERR, msg, strlen(msg));
    if (!tocont)
      emit(s, JS_PRINT_ERR, "\n", 1);
  }
  s->lua_warning_open = tocont != 0;
}

/* print(...): Lua's own (luaB_print), its text going to the print hook:
 * each argument through tostring, separated by tabs, then a newline. */
static int l_print(lua_State *L)
{
  JsSession *s = jsl_session(L);
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *str = luaL_tolstring(L, i, &len);
    if (i > 1)
      emit(s, JS_PRINT_OUT, "\t", 1);
    emit(s, JS_PRINT_OUT, str, len);
    lua_pop(L, 1);
  }
  emit(s, JS_PRINT_OUT, "\n", 1);
  return 0;
}

void jsl_open_print(lua_State *L)
{
  lua_pushcfunction(L, l_print);
  lua_setglobal(L, "print");
}

lua_State *jsl_state_new(JsSession *s)
{
  JsLimits *lim = &s->limits;
  lim->heap_bytes = 0;
  lim->heap_refused = FALSE;
  guint64 cap = s->max_memory;
  if (cap == 0) {
    guint64 avail = js_memory_available();
    cap = avail == G_MAXUINT64 ? 0 : avail;
  }
  lim->heap_limit = (gsize)MIN(cap, (guint64)G_MAXSIZE);
  lua_State *L = lua_newstate(limited_alloc, lim);
  if (L == NULL)
    return NULL;
  lua_atpanic(L, panic);
  s->lua_warnings_on = FALSE;
  s->lua_warning_open = FALSE;
  lua_setwarnf(L, warnf, s);
  *(JsSession **)lua_getextraspace(L) = s;
  return L;
}

/* ---- guards on the interpreter ------------------------------------------ */

/* Lua 5.4.4 (Debian 12's, unpatched) overflows the C stack when closes
 * nest: coroutine.close runs the closed coroutine's __close methods with
 * that coroutine's own count of C calls, not the caller's, so a __close
 * that closes another coroutine starts the count afresh and 20,000 of them
 * crash the process (5.4.6 carries the caller's count over).  The guard
 * refuses more than JS_CLOSE_DEPTH nested closes -- the 200 that Lua's own
 * LUAI_MAXCCALLS allows for nested C calls, and what 5.4.6 would allow
 * here; 5,000 were measured safe -- and any close that finds more than
 * JS_CSTACK_MAX bytes of C stack in use since the script began: between
 * two closes a __close may nest up to 200 C calls, so the depth alone
 * would still let 200 x 200 frames through. */
#define JS_CLOSE_DEPTH 200
#define JS_CSTACK_MAX ((guintptr)4 << 20) /* half the usual 8 MiB stack */

/* Whether more C stack is in use than a close may start from: more than
 * JS_CSTACK_MAX, or than half of RLIMIT_STACK when that is smaller. */
static gboolean cstack_deep(const JsLimits *lim)
{
  char here;
  guintptr at = (guintptr)&here;
  if (lim->cstack_base == 0)
    return FALSE;
  guintptr used = at < lim->cstack_base ? lim->cstack_base - at
                                        : at - lim->cstack_base;
  guintptr max = JS_CSTACK_MAX;
  struct rlimit rl;
  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    max = MIN(max, (guintptr)rl.rlim_cur / 2);
  return used > max;
}

/* Raises the limit that stopped the script.  The wrappers below call it
 * rather than run script code: once a limit is hit, Lua code may be
 * running with hooks off (the hook raised inside itself), out of the
 * limits' reach. */
static int raise_hit(lua_State *L, const JsLimits *lim)
{
  lua_pushstring(L, lim->hit);
  return lua_error(L);
}

/* coroutine.close(co), counted; upvalue 1: the original. */
static int guard_close(lua_State *L)
{
  JsLimits *lim = &jsl_session(L)->limits;
  if (lim->hit != NULL)
    return raise_hit(L, lim);
  if (lim->close_depth >= JS_CLOSE_DEPTH || cstack_deep(lim))
    return luaL_error(L, "coroutine.close nested too deeply (a __close "
                         "closing coroutines more than %d deep would "
                         "overflow Lua 5.4.4's C stack)", JS_CLOSE_DEPTH);
  int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lim->close_depth++;
  int rc = lua_pcall(L, n, LUA_MULTRET, 0);
  lim->close_depth--;
  if (rc != LUA_OK)
    return lua_error(L);
  return lua_gettop(L);
}

/* coroutine.wrap's function, as lcorolib.c's auxwrap, except that a
 * coroutine the limits stopped is not closed (its __close would run with
 * hooks off).  upvalue 1: the coroutine. */
static int guard_wrapped(lua_State *L)
{
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  int narg = lua_gettop(L);
  if (!lua_checkstack(co, narg))
    return luaL_error(L, "too many arguments to resume");
  lua_xmove(L, co, narg);
  int nres;
  int status = lua_resume(co, L, narg, &nres);
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      return luaL_error(L, "too many results to resume");
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1); /* the error */
  int stat = lua_status(co);
  if (stat != LUA_OK && stat != LUA_YIELD) { /* an error in the coroutine */
    JsLimits *lim = &jsl_session(L)->limits;
    if (lim->hit != NULL)
      return raise_hit(L, lim);
    lua_pop(L, 1);
    stat = lua_resetthread(co); /* close its to-be-closed variables */
    lua_xmove(co, L, 1);
  }
  if (stat != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

static int guard_wrap(lua_State *L)
{
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, guard_wrapped, 1);
  return 1;
}

/* xpcall's message handler: Lua calls it inside the count hook for the
 * limit's own error, with hooks off, so once a limit is hit the script's
 * handler is skipped and the error goes on unchanged.  upvalue 1: the
 * script's handler. */
static int guard_msgh(lua_State *L)
{
  if (jsl_session(L)->limits.hit != NULL)
    return 1;
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* As lbaselib.c's finishpcall. */
static int guard_xpcall_done(lua_State *L, int status, lua_KContext extra)
{
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
  }
  return lua_gettop(L) - (int)extra;
}

/* xpcall(f, msgh, ...), as lbaselib.c's, msgh called through guard_msgh. */
static int guard_xpcall(lua_State *L)
{
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, guard_msgh, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);
  int status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, guard_xpcall_done);
  return guard_xpcall_done(L, status, 2);
}

void jsl_open_guards(lua_State *L)
{
  if (lua_getglobal(L, "xpcall") == LUA_TFUNCTION) {
    lua_pushcfunction(L, guard_xpcall);
    lua_setglobal(L, "xpcall");
  }
  lua_pop(L, 1);
  if (lua_getglobal(L, LUA_COLIBNAME) == LUA_TTABLE) {
    lua_getfield(L, -1, "close");
    lua_pushcclosure(L, guard_close, 1);
    lua_setfield(L, -2, "close");
    lua_pushcfunction(L, guard_wrap);
    lua_setfield(L, -2, "wrap");
  }
  lua_pop(L, 1);
}

/* ---- the sandbox's globals ---------------------------------------------- */

/* load(chunk [, name [, mode [, env]]]): text chunks only; mode is
 * ignored. */
static int sb_load(lua_State *L)
{
  size_t len;
  if (lua_type(L, 1) != LUA_TSTRING)
    return luaL_error(L, "load: the sandbox loads text chunks given as "
                         "strings only (got %s)", luaL_typename(L, 1));
  const char *chunk = lua_tolstring(L, 1, &len);
  const char *name = luaL_optstring(L, 2, chunk);
  int env = !lua_isnone(L, 4) ? 4 : 0;
  if (luaL_loadbufferx(L, chunk, len, name, "t") != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (env != 0) {
    lua_pushvalue(L, env);
    if (lua_setupvalue(L, -2, 1) == NULL)
      lua_pop(L, 1);
  }
  return 1;
}

static int sb_collectgarbage(lua_State *L)
{
  const char *opt = luaL_optstring(L, 1, "collect");
  if (strcmp(opt, "count") != 0)
    return luaL_error(L, "collectgarbage: option '%s' is not available in "
                         "the sandbox (only \"count\")", opt);
  int k = lua_gc(L, LUA_GCCOUNT);
  int b = lua_gc(L, LUA_GCCOUNTB);
  lua_pushnumber(L, (lua_Number)k + ((lua_Number)b / 1024));
  return 1;
}

static int sb_setmetatable(lua_State *L)
{
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (t == LUA_TTABLE) {
    lua_pushliteral(L, "__gc");
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: a metatable with __gc is not "
                           "allowed in the sandbox (finalizers run outside "
                           "the instruction and time limits)");
    lua_pop(L, 1);
  }
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, 2, 1);
  return 1;
}

#define JOULESIM_MODULE_KEY "joulesim.module"

static int sb_require(lua_State *L)
{
  const char *name = luaL_checkstring(L, 1);
  if (strcmp(name, "joulesim") != 0)
    return luaL_error(L, "require: module '%s' is not available in the "
                         "sandbox (only \"joulesim\" is)", name);
  if (lua_getfield(L, LUA_REGISTRYINDEX, JOULESIM_MODULE_KEY) != LUA_TNIL)
    return 1;
  lua_pop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_getfield(L, -1, "joulesim");
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, JOULESIM_MODULE_KEY);
  return 1;
}

static const char *const base_allowed[] = {
  "assert", "error", "getmetatable", "ipairs", "next", "pairs", "pcall",
  "print", "rawequal", "rawget", "rawlen", "rawset", "select", "tonumber",
  "tostring", "type", "xpcall", "_VERSION", NULL};

static const luaL_Reg libs_allowed[] = {
  {LUA_STRLIBNAME, luaopen_string}, {LUA_TABLIBNAME, luaopen_table},
  {LUA_MATHLIBNAME, luaopen_math},  {LUA_UTF8LIBNAME, luaopen_utf8},
  {LUA_COLIBNAME, luaopen_coroutine}, {NULL, NULL}};

#define PROTECTED "joulesim: protected metatable"

void jsl_open_sandbox(lua_State *L)
{
  luaL_requiref(L, LUA_GNAME, luaopen_base, 0); /* the original globals */
  int base = lua_gettop(L);
  lua_newtable(L);
  int env = lua_gettop(L);
  for (int i = 0; base_allowed[i] != NULL; i++) {
    lua_getfield(L, base, base_allowed[i]);
    lua_setfield(L, env, base_allowed[i]);
  }
  lua_getfield(L, base, "setmetatable");
  lua_pushcclosure(L, sb_setmetatable, 1);
  lua_setfield(L, env, "setmetatable");
  lua_pushcfunction(L, sb_load);
  lua_setfield(L, env, "load");
  lua_pushcfunction(L, sb_collectgarbage);
  lua_setfield(L, env, "collectgarbage");
  lua_pushcfunction(L, sb_require);
  lua_setfield(L, env, "require");
  lua_pushvalue(L, env);
  lua_setfield(L, env, LUA_GNAME);
  /* The loaded-modules table holds only what the sandbox offers (the
   * original base table is dropped with the old one). */
  lua_newtable(L);
  int loaded = lua_gettop(L);
  for (const luaL_Reg *lib = libs_allowed; lib->name != NULL; lib++) {
    luaL_requiref(L, lib->name, lib->func, 0);
    lua_pushvalue(L, -1);
    lua_setfield(L, loaded, lib->name);
    lua_setfield(L, env, lib->name);
  }
  lua_pushvalue(L, env);
  lua_setfield(L, loaded, LUA_GNAME);
  lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  /* string.dump is gone from the table the string metatable indexes too
   * (it is the same table). */
  lua_getfield(L, env, LUA_STRLIBNAME);
  lua_pushnil(L);
  lua_setfield(L, -2, "dump");
  lua_pop(L, 1);
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    lua_pushliteral(L, PROTECTED);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  lua_pushvalue(L, env);
  lua_rawseti(L, LUA_REGISTRYINDEX, LUA_RIDX_GLOBALS);
  lua_settop(L, base - 1);
}

/* Every metatable made by luaL_newmetatable("joulesim.NAME") (it has
 * __name) gets __metatable: getmetatable(obj) then answers a string. */
void jsl_protect_metatables(lua_State *L)
{
  lua_pushnil(L);
  while (lua_next(L, LUA_REGISTRYINDEX) != 0) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_istable(L, -1) &&
        g_str_has_prefix(lua_tostring(L, -2), "joulesim.")) {
      if (lua_getfield(L, -1, "__name") == LUA_TSTRING) {
        lua_pushliteral(L, PROTECTED);
        lua_setfield(L, -3, "__metatable");
      }
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
}

/* ---- file access --------------------------------------------------------- */

void jsl_check_read(lua_State *L, const char *fn, const char *path)
{
  GError *err = NULL;
  if (!js_session_may_read(jsl_session(L), path, &err))
    jsl_raise_gerror(L, fn, err);
}

void jsl_check_write(lua_State *L, const char *fn, const char *path,
                     JsFileKind kind)
{
  GError *err = NULL;
  if (!js_session_may_write(jsl_session(L), path, kind, &err))
    jsl_raise_gerror(L, fn, err);
}

/* ---- limits ---------------------------------------------------------------- */

static void hook(lua_State *L, lua_Debug *ar)
{
  JsLimits *lim = &jsl_session(L)->limits;
  if (lim->hit == NULL) {
    lim->executed += JS_HOOK_PERIOD;
    if (lim->max_instructions > 0 && lim->executed > lim->max_instructions)
      lim->hit = g_strdup_printf("--max-instructions %" G_GUINT64_FORMAT
                                 " reached: the script was stopped",
                                 lim->max_instructions);
    else if (lim->deadline_us > 0 && g_get_monotonic_time() > lim->deadline_us)
      lim->hit = g_strdup_printf("--max-seconds %g reached: the script was "
                                 "stopped", lim->max_seconds);
    else
      return;
  }
  /* From now on every instruction of this coroutine and of the main
   * thread raises (the other coroutines raise at their next period, and
   * only the main thread could resume them). */
  lua_sethook(L, hook, LUA_MASKCOUNT, 1);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua_State *main_thread = lua_tothread(L, -1);
  lua_pop(L, 1);
  if (main_thread != NULL && main_thread != L)
    lua_sethook(main_thread, hook, LUA_MASKCOUNT, 1);
  if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
    lua_pushfstring(L, "%s:%d: %s", ar->short_src, ar->currentline, lim->hit);
  else
    lua_pushstring(L, lim->hit);
  lua_error(L);
}

void jsl_limits_begin(lua_State *L, JsSession *s)
{
  JsLimits *lim = &s->limits;
  char here;
  g_clear_pointer(&lim->hit, g_free);
  lim->executed = 0;
  lim->close_depth = 0;
  lim->cstack_base = (guintptr)&here;
  /* Outside C code, only a __gc finalizer runs script code with hooks off
   * once the guards above are in place, and the sandbox refuses __gc. */
  g_autofree char *stop_message =
    lim->max_seconds <= 0 ? NULL
    : g_strdup_printf("joulesim: --max-seconds %g reached: stopped %d s "
                      "later inside joulesim's C code (a simulation, a "
                      "planner or a sweep that was still running)%s\n",
                      lim->max_seconds, JS_HARD_STOP_S,
                      s->sandbox ? "" : " or in a __gc finalizer, which "
                                        "Lua runs with hooks off");
  js_limits_start_clock(lim, stop_message);
  if (lim->max_instructions > 0 || lim->max_seconds > 0)
    lua_sethook(L, hook, LUA_MASKCOUNT, JS_HOOK_PERIOD);
}

void jsl_limits_end(lua_State *L, JsSession *s)
{
  js_limits_stop_clock(&s->limits);
  lua_sethook(L, NULL, 0, 0);
}

char *jsl_limits_explain(JsSession *s, const char *message)
{
  JsLimits *lim = &s->limits;
  if (lim->hit != NULL && strstr(message, lim->hit) == NULL)
    return g_strdup_printf("%s (the script went on after the error: %s)",
                           lim->hit, message);
  if (lim->hit == NULL && lim->heap_refused &&
      strstr(message, "not enough memory") != NULL) {
    g_autofree char *cap = js_memory_format(lim->heap_limit);
    g_autofree char *shared =
      lim->shared_by > 0 ? g_strdup_printf(", shared by %u sweep workers",
                                           lim->shared_by)
                         : g_strdup("");
    return g_strdup_printf("%s: %s (the Lua heap reached its limit, %s: "
                           "%s%s)", s->scenario_path != NULL
                                      ? s->scenario_path : "script",
                           message, cap,
                           s->max_memory > 0 ? "--max-memory"
                                             : "the memory available at "
                                               "start", shared);
  }
  return NULL;
}
