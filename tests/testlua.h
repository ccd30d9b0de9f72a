/* tests/testlua.h -- running Lua scripts from the C tests.
 *
 * Every script runs in a fresh session (js_session_new(TEST_LUA_SEED)) as
 * the chunk "=test", so an error located in the script reads "test:LINE:".
 * test_lua_expect_ok fails the test when the script fails, printing its
 * message; test_lua_expect_error fails it unless the script fails with
 * JS_ERROR_SCRIPT and a message containing every fragment given, and
 * prints the message when one is missing.  The fragments are plain
 * substrings, not patterns: the messages quote Lua (`'tp'`, `{lo, hi}`)
 * that a pattern would have to escape.
 *
 * Only for the tests of the binding itself (tests/check-layering.sh lets
 * a C test include lua/bind.h and no other lua/ header).
 */
#ifndef TESTS_TESTLUA_H
#define TESTS_TESTLUA_H

#include <glib.h>
#include <stdarg.h>
#include <string.h>

#include "lua/bind.h"

/* The seed of every session the helpers make. */
#define TEST_LUA_SEED 7

/* Runs `src` in a fresh session; FALSE with `error` set when it fails. */
static inline gboolean test_lua_run(const char *src, GError **error)
{
  g_autoptr(JsSession) s = js_session_new(TEST_LUA_SEED);
  return js_run_string(s, "=test", src, error);
}

/* Runs `src`; the test fails unless it succeeds. */
static inline void test_lua_expect_ok(const char *src)
{
  GError *error = NULL;
  gboolean ok = test_lua_run(src, &error);
  if (!ok)
    g_printerr("script failed: %s\n", error->message);
  g_assert_no_error(error);
  g_assert_true(ok);
}

/* Runs `src`; the test fails unless it fails with a script error whose
 * message contains each of the fragments (a NULL-terminated list). */
static inline void test_lua_expect_error(const char *src, ...)
  G_GNUC_NULL_TERMINATED;

static inline void test_lua_expect_error(const char *src, ...)
{
  GError *error = NULL;
  gboolean ok = test_lua_run(src, &error);
  g_assert_false(ok);
  g_assert_error(error, JS_ERROR, JS_ERROR_SCRIPT);
  va_list ap;
  va_start(ap, src);
  const char *want;
  while ((want = va_arg(ap, const char *)) != NULL) {
    if (strstr(error->message, want) == NULL)
      g_printerr("no '%s' in the message: %s\n", want, error->message);
    g_assert_nonnull(strstr(error->message, want));
  }
  va_end(ap);
  g_clear_error(&error);
}

#endif
