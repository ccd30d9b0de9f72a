/* tests/fuzz/fuzz.h -- helpers shared by the libFuzzer targets
 * (tests/fuzz/fuzz-NAME.c) and the regression test (tests/test-fuzz-regress.c).
 *
 * Every target is one function `fuzz_NAME_one(data, size)` that turns the
 * input into files or a script, runs it through the same entry point the
 * program uses (trace_import, profile_load, trace_native_load, Lua
 * scripts), and checks the outcome: success, or a clean GError -- the
 * module's domain, a non-empty message that names the file.  A violated
 * check prints what went wrong and abort()s, which libFuzzer reports as a
 * crash and the regression test as a failure.  Each target file ends with
 * FUZZ_TARGET(fuzz_NAME_one), which defines LLVMFuzzerTestOneInput unless
 * FUZZ_NO_MAIN is defined, so the regression test can #include every
 * target and call the same functions.
 *
 * Input decoding never fails: a short input reads as zeros, so every byte
 * string is a valid test case and the fuzzer's mutations always reach the
 * parser.
 *
 * The one piece of process-wide state is the scratch directory (created on
 * first use, emptied after every input, removed at exit): a harness, not
 * library code.
 */
#ifndef TESTS_FUZZ_FUZZ_H
#define TESTS_FUZZ_FUZZ_H

#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/workload.h"
#include "traces/info.h"

#define FUZZ_FAIL(...)                                                      \
  do {                                                                      \
    fprintf(stderr, "fuzz: check failed at %s:%d: ", __FILE__, __LINE__);  \
    fprintf(stderr, __VA_ARGS__);                                           \
    fputc('\n', stderr);                                                    \
    abort();                                                                \
  } while (0)

/* FUZZ_TARGET(fn): makes `fn(data, size)` the target's libFuzzer entry
 * point (LLVMFuzzerTestOneInput), unless FUZZ_NO_MAIN is defined (the
 * regression test includes every target and calls each fn itself).  Every
 * target file ends with it. */
#ifdef FUZZ_NO_MAIN
#define FUZZ_TARGET(fn)
#else
#define FUZZ_TARGET(fn)                                                     \
  int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);             \
  int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)              \
  {                                                                         \
    return fn(data, size);                                                  \
  }
#endif

#define FUZZ_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond))                                                            \
      FUZZ_FAIL(__VA_ARGS__);                                               \
  } while (0)

/* ---- reading the input ------------------------------------------------- */

typedef struct {
  const guint8 *p;
  size_t n;
} FuzzIn;

static inline guint8 fuzz_u8(FuzzIn *in)
{
  if (in->n == 0)
    return 0;
  in->n--;
  return *in->p++;
}

static inline guint16 fuzz_u16(FuzzIn *in)
{
  guint16 v = fuzz_u8(in);
  return (guint16)(v | (guint16)fuzz_u8(in) << 8);
}

static inline guint32 fuzz_u32(FuzzIn *in)
{
  guint32 v = 0;
  for (int i = 0; i < 4; i++)
    v |= (guint32)fuzz_u8(in) << (8 * i);
  return v;
}

static inline guint64 fuzz_u64(FuzzIn *in)
{
  guint64 v = 0;
  for (int i = 0; i < 8; i++)
    v |= (guint64)fuzz_u8(in) << (8 * i);
  return v;
}

/* An integer, mostly from the values parsers get wrong: small ones,
 * boundaries of every width, and sometimes 8 raw bytes. */
static inline gint64 fuzz_int(FuzzIn *in)
{
  static const gint64 special[] = {
    0, 1, -1, 2, 7, 13, 100, 1000, 4096, 65535, 65536, G_MAXINT8,
    G_MAXUINT8, G_MAXINT16, G_MAXUINT16, G_MAXINT32, (gint64)G_MAXUINT32,
    (gint64)G_MAXUINT32 + 1, G_MININT32, G_MAXINT64, G_MININT64,
    G_MAXINT64 - 1, G_MININT64 + 1, (gint64)1 << 53, 1000000000,
    1682725898000000000};
  guint8 tag = fuzz_u8(in);
  switch (tag >> 6) {
  case 0:
    return tag & 0x3f;                          /* 0..63 */
  case 1:
    return special[(tag & 0x3f) % G_N_ELEMENTS(special)];
  case 2:
    return (gint64)fuzz_u16(in) - ((tag & 1) ? 32768 : 0);
  default:
    return (gint64)fuzz_u64(in);
  }
}

/* A double, mostly special: integers, fractions, infinities, NaN. */
static inline double fuzz_double(FuzzIn *in)
{
  guint8 tag = fuzz_u8(in);
  switch (tag & 7) {
  case 0: return (double)fuzz_int(in);
  case 1: return (double)fuzz_int(in) / 1000.0;
  case 2: return tag & 8 ? INFINITY : -INFINITY;
  case 3: return NAN;
  case 4: return tag & 8 ? 1e308 : -1e-308;
  case 5: return (double)(tag >> 4) * 0.25;
  default: {
    guint64 bits = fuzz_u64(in);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
  }
  }
}

/* Up to `max` bytes (length from the input); may contain any byte but
 * NUL (the result is a C string).  Caller frees. */
static inline char *fuzz_str(FuzzIn *in, size_t max)
{
  size_t len = fuzz_u8(in);
  if (len > max)
    len = max;
  if (len > in->n)
    len = in->n;
  char *s = g_strndup((const char *)in->p, len);
  in->p += len;
  in->n -= len;
  return s;
}

/* Splits data at every occurrence of `sep` into at most max_parts pieces
 * (the last piece keeps the rest).  Returns GBytes (borrowing data). */
static inline GPtrArray *fuzz_split(const guint8 *data, size_t size,
                                    const char *sep, guint max_parts)
{
  GPtrArray *parts = g_ptr_array_new_with_free_func(
      (GDestroyNotify)g_bytes_unref);
  size_t seplen = strlen(sep), start = 0, i = 0;
  while (parts->len + 1 < max_parts && size >= seplen && i + seplen <= size) {
    if (memcmp(data + i, sep, seplen) == 0) {
      g_ptr_array_add(parts, g_bytes_new_static(data + start, i - start));
      i += seplen;
      start = i;
    } else {
      i++;
    }
  }
  g_ptr_array_add(parts, g_bytes_new_static(data + start, size - start));
  return parts;
}

/* ---- scratch files -------------------------------------------------------- */

static char *fuzz_dir_;

static inline void fuzz_clean_dir(void)
{
  if (fuzz_dir_ == NULL)
    return;
  GDir *d = g_dir_open(fuzz_dir_, 0, NULL);
  if (d == NULL)
    return;
  const char *n;
  while ((n = g_dir_read_name(d)) != NULL) {
    char *p = g_build_filename(fuzz_dir_, n, NULL);
    g_unlink(p);
    g_free(p);
  }
  g_dir_close(d);
}

static inline void fuzz_remove_dir(void)
{
  fuzz_clean_dir();
  if (fuzz_dir_ != NULL)
    g_rmdir(fuzz_dir_);
  g_free(fuzz_dir_);
  fuzz_dir_ = NULL;
}

/* The scratch directory (created on first use, removed at exit). */
static inline const char *fuzz_tmpdir(void)
{
  if (fuzz_dir_ == NULL) {
    GError *err = NULL;
    fuzz_dir_ = g_dir_make_tmp("joulesim-fuzz-XXXXXX", &err);
    FUZZ_CHECK(fuzz_dir_ != NULL, "cannot make a scratch directory: %s",
               err->message);
    atexit(fuzz_remove_dir);
  }
  return fuzz_dir_;
}

/* A path in the scratch directory.  Caller frees. */
static inline char *fuzz_path(const char *name)
{
  return g_build_filename(fuzz_tmpdir(), name, NULL);
}

static inline void fuzz_write(const char *path, const void *data, size_t n)
{
  FILE *f = fopen(path, "wb");
  FUZZ_CHECK(f != NULL, "cannot write %s", path);
  FUZZ_CHECK(n == 0 || fwrite(data, 1, n, f) == n, "cannot write %s", path);
  FUZZ_CHECK(fclose(f) == 0, "cannot write %s", path);
}

/* ---- checking outcomes ---------------------------------------------------- */

/* FUZZ_VERBOSE=1 in the environment: print every outcome (for triage and
 * for checking that the seeds reach the parsers' success paths). */
static inline gboolean fuzz_verbose(void)
{
  const char *v = g_getenv("FUZZ_VERBOSE");
  return v != NULL && v[0] != '\0' && v[0] != '0';
}

/* A fallible call returned `ok` with error `err`: either it succeeded with
 * no error, or it failed with an error of `domain` whose message is not
 * empty and contains `named` (the file it was given) when that is not
 * NULL. */
static inline void fuzz_check_outcome(const char *fn, gboolean ok,
                                      const GError *err, GQuark domain,
                                      const char *named)
{
  if (fuzz_verbose())
    fprintf(stderr, "fuzz: %s: %s\n", fn,
            ok ? "ok" : err != NULL ? err->message : "(no error)");
  if (ok) {
    FUZZ_CHECK(err == NULL, "%s succeeded but set an error: %s", fn,
               err->message);
    return;
  }
  FUZZ_CHECK(err != NULL, "%s failed without an error", fn);
  FUZZ_CHECK(err->domain == domain,
             "%s: error in domain %s, expected %s: %s", fn,
             g_quark_to_string(err->domain), g_quark_to_string(domain),
             err->message);
  FUZZ_CHECK(err->message != NULL && err->message[0] != '\0',
             "%s: empty error message", fn);
  FUZZ_CHECK(named == NULL || strstr(err->message, named) != NULL,
             "%s: the error does not name '%s': %s", fn, named,
             err->message);
}

/* A workload a loader returned must pass the engine's validation and
 * have a trace_info summary. */
static inline void fuzz_check_workload(const SimWorkload *w)
{
  GError *verr = NULL;
  FUZZ_CHECK(sim_workload_validate(w, &verr),
             "loaded workload is invalid: %s", verr->message);
  g_autoptr(GString) text = g_string_new(NULL);
  trace_info(w, text);
  FUZZ_CHECK(text->len > 0, "empty trace_info");
}

#endif
