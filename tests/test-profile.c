/* tests/test-profile.c -- measured profile loading (traces/profile.c):
 * both CSV forms, interpolation, NVML sample series, measured iterations,
 * every kind of malformed input with its error code and location, and a
 * mutation fuzz of the parser. */
#include "traces/profile.h"
#include "sim/pcg.h"
#include "tests/testutil.h"

#include <math.h>
#include <string.h>

/* Writes text to a fresh file in dir; returns its path (caller frees). */
static char *write_file(const char *dir, const char *name, const char *text)
{
  char *path = g_build_filename(dir, name, NULL);
  GError *error = NULL;
  g_file_set_contents(path, text, -1, &error);
  g_assert_no_error(error);
  return path;
}

static Profile *load_text(const char *text, GError **error)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = write_file(dir, "p.csv", text);
  Profile *p = profile_load(path, error);
  test_rmdir(dir);
  return p;
}

/* ---- the shared measured profiles ------------------------------------- */

typedef struct {
  const char *file;
  guint n_clocks, lo, hi;
} SharedCase;

static const SharedCase shared[] = {
  {TEST_DATA("profiles/gpt3-175b+a100_sxm_bf16.csv"), 38, 855, 1410},
  {TEST_DATA("profiles/bloom+a100_sxm_bf16.csv"), 38, 855, 1410},
  {TEST_DATA("profiles/gpt3-175b+a40_bf16.csv"), 60, 855, 1740},
  {TEST_DATA("profiles/bloom+a40_bf16.csv"), 60, 855, 1740},
};

static void test_shared(gconstpointer data)
{
  const SharedCase *c = data;
  GError *error = NULL;
  g_autoptr(Profile) p = profile_load(c->file, &error);
  g_assert_no_error(error);
  g_assert_cmpint(p->format, ==, PROFILE_PERSEUS);
  g_assert_cmpuint(p->ops->len, ==, 16);
  g_assert_cmpuint(p->n_stages, ==, 8);
  for (guint s = 0; s < 8; s++)
    for (int k = 0; k < 2; k++) {
      const char *instr = k == 0 ? "forward" : "backward";
      const ProfileOp *op = profile_find_stage(p, s, instr);
      g_assert_nonnull(op);
      g_autofree char *name = g_strdup_printf("stage%u.%s", s, instr);
      g_assert_cmpstr(op->name, ==, name);
      g_assert_true(profile_find(p, name) == op);
      g_assert_cmpuint(op->points->len, ==, c->n_clocks);
      const ProfilePoint *pts = (const ProfilePoint *)op->points->data;
      g_assert_cmpuint(pts[0].sm_mhz, ==, c->lo);
      g_assert_cmpuint(pts[op->points->len - 1].sm_mhz, ==, c->hi);
      for (guint j = 1; j < op->points->len; j++) {
        g_assert_cmpuint(pts[j].sm_mhz, ==, pts[j - 1].sm_mhz + 15);
        g_assert_cmpuint(pts[j].mem_mhz, ==, 0);
      }
      g_autoptr(GArray) clocks = profile_op_clocks(op, 0);
      g_assert_cmpuint(clocks->len, ==, c->n_clocks);
    }
  g_assert_null(profile_find_stage(p, 8, "forward"));
  g_assert_null(profile_find(p, "stage0.sideways"));
}

/* The first data row of the A100 GPT-3 file, read back exactly. */
static void test_values(void)
{
  GError *error = NULL;
  g_autoptr(Profile) p =
      profile_load(TEST_DATA("profiles/gpt3-175b+a100_sxm_bf16.csv"), &error);
  g_assert_no_error(error);
  const ProfileOp *op = profile_find_stage(p, 0, "forward");
  double t, e;
  g_assert_true(profile_op_at(op, 1410, 0, &t, &e, &error));
  g_assert_cmpfloat(t, ==, 0.05016166687011708);
  g_assert_cmpfloat(e, ==, 23.80547200000007);
  /* Halfway between 1395 and 1410 is the mean of the two points. */
  g_assert_true(profile_op_at(op, 1402, 0, &t, &e, &error));
  double t1395, e1395, t1410, e1410;
  g_assert_true(profile_op_at(op, 1395, 0, &t1395, &e1395, &error));
  g_assert_true(profile_op_at(op, 1410, 0, &t1410, &e1410, &error));
  double w = 7.0 / 15.0;
  g_assert_true(test_close(t, t1395 + w * (t1410 - t1395), 1e-12));
  g_assert_true(test_close(e, e1395 + w * (e1410 - e1395), 1e-12));
}

static void test_range(void)
{
  GError *error = NULL;
  g_autoptr(Profile) p =
      profile_load(TEST_DATA("profiles/gpt3-175b+a40_bf16.csv"), &error);
  g_assert_no_error(error);
  const ProfileOp *op = profile_find_stage(p, 2, "backward");
  double t = -1, e = -1;
  g_assert_false(profile_op_at(op, 840, 0, &t, &e, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE);
  g_assert_nonnull(strstr(error->message, "stage2.backward"));
  g_assert_nonnull(strstr(error->message, "855-1740"));
  g_clear_error(&error);
  g_assert_false(profile_op_at(op, 1755, 0, &t, &e, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_RANGE);
  g_clear_error(&error);
  g_assert_cmpfloat(t, ==, -1); /* untouched on error */
}

/* ---- the per-kernel form ---------------------------------------------- */

static void test_kernel_form(void)
{
  GError *error = NULL;
  /* Columns out of order, a quoted name with commas, CRLF, a comment, two
   * memory clocks. */
  g_autoptr(Profile) p = load_text(
      "# measured on my card\r\n"
      "time_s,kernel,sm_mhz,mem_mhz,energy_j,count,class\r\n"
      "0.002,\"void gemm<float, 4>\",1410,1593,0.8,12,gemm\r\n"
      "0.003,\"void gemm<float, 4>\",1005,1593,0.9,12,gemm\r\n"
      "0.004,\"void gemm<float, 4>\",1005,800,0.95,12,gemm\r\n"
      "\r\n"
      "0.001,layernorm,1410,1593,0.2,24,norm\r\n"
      "0.0011,layernorm,1005,1593,0.19,24,norm\r\n",
      &error);
  g_assert_no_error(error);
  g_assert_cmpint(p->format, ==, PROFILE_KERNEL);
  g_assert_cmpuint(p->ops->len, ==, 2);
  const ProfileOp *g = profile_find(p, "void gemm<float, 4>");
  g_assert_nonnull(g);
  g_assert_cmpint(g->klass, ==, SIM_CLASS_GEMM);
  g_assert_cmpfloat(g->count, ==, 12);
  g_assert_null(g->instruction);
  /* Sorted by (mem, sm). */
  const ProfilePoint *pts = (const ProfilePoint *)g->points->data;
  g_assert_cmpuint(pts[0].mem_mhz, ==, 800);
  g_assert_cmpuint(pts[1].sm_mhz, ==, 1005);
  g_assert_cmpuint(pts[2].sm_mhz, ==, 1410);
  /* mem 0 = the highest measured memory clock; others: the nearest. */
  g_autoptr(GArray) top = profile_op_clocks(g, 0);
  g_assert_cmpuint(top->len, ==, 2);
  g_autoptr(GArray) low = profile_op_clocks(g, 700);
  g_assert_cmpuint(low->len, ==, 1);
  g_assert_cmpuint(g_array_index(low, guint, 0), ==, 1005);
  double t, e;
  g_assert_true(profile_op_at(g, 1005, 810, &t, &e, &error));
  g_assert_cmpfloat(t, ==, 0.004);
  const ProfileOp *ln = profile_find(p, "layernorm");
  g_assert_cmpint(ln->klass, ==, SIM_CLASS_NORM);
  g_assert_true(profile_op_at(ln, 1200, 0, &t, &e, &error));
  g_assert_true(test_close(t, 0.0011 - 0.0001 * 195.0 / 405.0, 1e-12));
}

/* ---- malformed input -------------------------------------------------- */

typedef struct {
  const char *name;
  const char *text;
  int code;
  const char *needle;   /* must occur in the message */
} BadCase;

#define PH "stage,instruction,frequency,time,energy\n"
#define KH "kernel,sm_mhz,mem_mhz,time_s,energy_j\n"
static const BadCase bad[] = {
  {"empty", "", PROFILE_ERROR_FORMAT, "empty file"},
  {"only-comments", "# nothing\n\n", PROFILE_ERROR_FORMAT, "empty file"},
  {"header-only", PH, PROFILE_ERROR_FORMAT, "no data rows"},
  {"missing-column", "stage,instruction,frequency,time\n0,forward,1410,0.1\n",
   PROFILE_ERROR_FORMAT, ":1: missing column 'energy'"},
  {"missing-kernel-column", "kernel,sm_mhz,time_s,energy_j\nk,1410,1,1\n",
   PROFILE_ERROR_FORMAT, "missing column 'mem_mhz'"},
  {"unknown-column", "stage,instruction,frequency,time,energy,power\n",
   PROFILE_ERROR_FORMAT, ":1: column 6: unknown column 'power'"},
  {"mixed-forms", "stage,instruction,frequency,time,energy,sm_mhz\n",
   PROFILE_ERROR_FORMAT, "column 6: unknown column 'sm_mhz'"},
  {"neither-form", "a,b,c\n1,2,3\n", PROFILE_ERROR_FORMAT,
   "neither the Perseus/Zeus form"},
  {"repeated-column", "stage,instruction,frequency,time,energy,time\n",
   PROFILE_ERROR_FORMAT, "column 6: column 'time' repeats column 4"},
  {"non-numeric", PH "0,forward,1410,0.1,20\n0,forward,1395,abc,20\n",
   PROFILE_ERROR_FORMAT, ":3: column 4 (time): 'abc' is not a number"},
  {"trailing-junk", PH "0,forward,1410,0.1x,20\n", PROFILE_ERROR_FORMAT,
   ":2: column 4 (time): '0.1x' is not a number"},
  {"empty-value", PH "0,forward,1410,,20\n", PROFILE_ERROR_FORMAT,
   ":2: column 4 (time): empty value"},
  {"non-finite", PH "0,forward,1410,0.1,inf\n", PROFILE_ERROR_FORMAT,
   ":2: column 5 (energy): 'inf' is not finite"},
  {"nan", PH "0,forward,1410,nan,20\n", PROFILE_ERROR_FORMAT, "not finite"},
  {"zero-time", PH "0,forward,1410,0,20\n", PROFILE_ERROR_FORMAT,
   ":2: column 4 (time): 0 must be > 0"},
  {"negative-energy", PH "0,forward,1410,0.1,-3\n", PROFILE_ERROR_FORMAT,
   "column 5 (energy): -3 must be > 0"},
  {"zero-clock", PH "0,forward,0,0.1,20\n", PROFILE_ERROR_FORMAT,
   "column 3 (frequency): 0 must be > 0"},
  {"fractional-clock", PH "0,forward,1410.5,0.1,20\n", PROFILE_ERROR_FORMAT,
   "not a whole clock"},
  {"negative-stage", PH "-1,forward,1410,0.1,20\n", PROFILE_ERROR_FORMAT,
   "column 1 (stage): -1 is not a whole number"},
  {"empty-instruction", PH "0,,1410,0.1,20\n", PROFILE_ERROR_FORMAT,
   "column 2 (instruction): empty value"},
  {"short-row", PH "0,forward,1410,0.1\n", PROFILE_ERROR_FORMAT,
   ":2: 4 columns, the header has 5 (missing value)"},
  {"long-row", PH "0,forward,1410,0.1,20,7\n", PROFILE_ERROR_FORMAT,
   ":2: 6 columns, the header has 5"},
  {"duplicate", PH "0,forward,1410,0.1,20\n1,forward,1410,0.1,20\n"
                   "0,forward,1410,0.2,21\n",
   PROFILE_ERROR_DUPLICATE,
   ":4: duplicate point: stage 0 forward at 1410 MHz already on line 2"},
  {"duplicate-kernel", KH "k,1410,1593,1,1\nk,1410,1593,2,2\n",
   PROFILE_ERROR_DUPLICATE, ":3: duplicate point: kernel 'k' at sm 1410"},
  {"unterminated-quote", KH "\"k,1410,1593,1,1\n", PROFILE_ERROR_FORMAT,
   ":2: unterminated quoted field"},
  {"text-after-quote", KH "\"k\"x,1410,1593,1,1\n", PROFILE_ERROR_FORMAT,
   "text after a closing quote"},
  {"unknown-class", "kernel,sm_mhz,mem_mhz,time_s,energy_j,class\n"
                    "k,1410,1593,1,1,matmul\n",
   PROFILE_ERROR_FORMAT, "column 6 (class): unknown class 'matmul'"},
  {"class-changes", "kernel,sm_mhz,mem_mhz,time_s,energy_j,class\n"
                    "k,1410,1593,1,1,gemm\nk,1005,1593,1,1,norm\n",
   PROFILE_ERROR_FORMAT, ":3: class 'norm' of kernel 'k' differs"},
  {"count-changes", "kernel,sm_mhz,mem_mhz,time_s,energy_j,count\n"
                    "k,1410,1593,1,1,2\nk,1005,1593,1,1,3\n",
   PROFILE_ERROR_FORMAT, ":3: count 3 of kernel 'k' differs"},
  {"zero-mem", KH "k,1410,0,1,1\n", PROFILE_ERROR_FORMAT,
   "column 3 (mem_mhz): 0 must be > 0"},
};

static void test_bad(gconstpointer data)
{
  const BadCase *c = data;
  GError *error = NULL;
  Profile *p = load_text(c->text, &error);
  g_assert_null(p);
  g_assert_error(error, PROFILE_ERROR, c->code);
  if (strstr(error->message, c->needle) == NULL)
    g_error("%s: message '%s' lacks '%s'", c->name, error->message, c->needle);
  /* Every located error names the file. */
  g_assert_nonnull(strstr(error->message, "p.csv"));
  g_error_free(error);
}

static void test_missing_file(void)
{
  GError *error = NULL;
  g_assert_null(profile_load("tests/data/profiles/no-such.csv", &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_IO);
  g_assert_nonnull(strstr(error->message, "no-such.csv"));
  g_error_free(error);
}

/* js.csv's reader: quoted fields (a comma and a doubled quote inside),
 * blank and comment lines skipped and counted, blanks around fields
 * trimmed; each record keeps its own line. */
static void test_csv_table(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = write_file(
      dir, "t.csv",
      "# a comment\n"
      "name, value ,note\n"
      "\n"
      "a,1,\"x, y\"\n"
      "# another\n"
      "b , 2,\"say \"\"hi\"\"\"\r\n");
  GError *error = NULL;
  g_autoptr(CsvTable) t = profile_csv_read(path, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(t->header->len, ==, 3);
  g_assert_cmpstr(g_ptr_array_index(t->header, 1), ==, "value");
  g_assert_cmpuint(t->header_line, ==, 2);
  g_assert_cmpuint(t->records->len, ==, 2);
  const GPtrArray *r0 = g_ptr_array_index(t->records, 0);
  const GPtrArray *r1 = g_ptr_array_index(t->records, 1);
  g_assert_cmpstr(g_ptr_array_index(r0, 2), ==, "x, y");
  g_assert_cmpstr(g_ptr_array_index(r1, 0), ==, "b");
  g_assert_cmpstr(g_ptr_array_index(r1, 2), ==, "say \"hi\"");
  g_assert_cmpuint(g_array_index(t->lines, guint, 0), ==, 4);
  g_assert_cmpuint(g_array_index(t->lines, guint, 1), ==, 6);

  /* A record of another width is refused at its line; so is a file with
   * no header. */
  g_autofree char *wide = write_file(dir, "w.csv", "a,b\n1,2\n3\n");
  g_assert_null(profile_csv_read(wide, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT);
  g_assert_nonnull(strstr(error->message, "w.csv:3: 1 columns, the header has 2"));
  g_clear_error(&error);
  g_autofree char *empty = write_file(dir, "e.csv", "# only a comment\n");
  g_assert_null(profile_csv_read(empty, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT);
  g_assert_nonnull(strstr(error->message, "e.csv: empty file"));
  g_clear_error(&error);
  test_rmdir(dir);
}

/* Random byte edits of a valid profile never crash the parser and every
 * outcome is a profile or an error with a message (run under ASan in CI). */
static void test_fuzz(void)
{
  g_autofree char *good = NULL;
  gsize len = 0;
  g_assert_true(g_file_get_contents(
      TEST_DATA("profiles/gpt3-175b+a100_sxm_bf16.csv"), &good, &len, NULL));
  len = MIN(len, 600); /* a dozen rows is enough and keeps it fast */
  static const char alphabet[] = ",\n\r\"#.-e0123456789 abcx";
  SimPcg rng;
  sim_pcg_for_entity(&rng, 7, SIM_PCG_USER, 1);
  g_autofree char *dir = test_tmpdir();
  g_autofree char *path = g_build_filename(dir, "fuzz.csv", NULL);
  guint ok = 0, failed = 0;
  for (int it = 0; it < 400; it++) {
    g_autofree char *buf = g_malloc(len + 1);
    memcpy(buf, good, len);
    gsize n = len;
    int edits = 1 + (int)sim_pcg_bounded(&rng, 4);
    for (int k = 0; k < edits; k++) {
      gsize at = sim_pcg_bounded(&rng, (guint32)n);
      switch (sim_pcg_bounded(&rng, 3)) {
      case 0: /* replace */
        buf[at] = alphabet[sim_pcg_bounded(&rng, sizeof alphabet - 1)];
        break;
      case 1: /* delete */
        memmove(buf + at, buf + at + 1, n - at - 1);
        n--;
        break;
      default: /* truncate */
        n = at;
        break;
      }
      if (n == 0)
        break;
    }
    g_assert_true(g_file_set_contents(path, buf, (gssize)n, NULL));
    GError *error = NULL;
    Profile *p = profile_load(path, &error);
    if (p != NULL) {
      g_assert_no_error(error);
      for (guint i = 0; i < p->ops->len; i++) {
        const ProfileOp *op = g_ptr_array_index(p->ops, i);
        g_assert_cmpuint(op->points->len, >, 0);
      }
      profile_free(p);
      ok++;
    } else {
      g_assert_nonnull(error);
      g_assert_cmpuint(strlen(error->message), >, 0);
      g_error_free(error);
      failed++;
    }
  }
  g_assert_cmpuint(ok + failed, ==, 400);
  g_assert_cmpuint(failed, >, 0);
  test_rmdir(dir);
}

/* ---- NVML sample series ----------------------------------------------- */

/* nvidia-smi --format=csv output: power ramps linearly 100 -> 300 W over
 * 0..2 s at 1410 MHz, then holds 200 W at 1005 MHz to 4 s; samples every
 * 100 ms. */
static char *nvml_samples(void)
{
  GString *s = g_string_new(
      "timestamp, clocks.current.sm [MHz], power.draw [W], "
      "utilization.gpu [%]\n");
  for (int i = 0; i <= 40; i++) {
    double t = i * 0.1;
    double pw = t <= 2.0 ? 100 + 100 * t : 200;
    int clk = t < 2.05 ? 1410 : 1005;
    int ms = (i * 100) % 1000, sec = i / 10;
    g_string_append_printf(s, "2024/05/01 12:00:%02d.%03d, %d MHz, %.2f W, 97 %%\n",
                           sec, ms, clk, pw);
  }
  return g_string_free(s, FALSE);
}

static void test_nvml(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *samples_text = nvml_samples();
  g_autofree char *samples = write_file(dir, "s.csv", samples_text);
  /* Windows in seconds since the first sample, and one absolute. */
  g_autofree char *windows = write_file(
      dir, "w.csv",
      "kernel,start,end,count\n"
      "gemm,0.5,1.5,10\n"                 /* 10 launches: per launch */
      "gemm,0.25,1.25,10\n"               /* repetition: averaged */
      "\"copy, fast\",2024/05/01 12:00:02.500,2024/05/01 12:00:03.500,1\n");
  GError *error = NULL;
  g_autoptr(Profile) p = profile_load_nvml(samples, windows, &error);
  g_assert_no_error(error);
  g_assert_cmpint(p->format, ==, PROFILE_KERNEL);
  g_assert_cmpuint(p->ops->len, ==, 2);
  const ProfileOp *g = profile_find(p, "gemm");
  g_assert_cmpuint(g->points->len, ==, 1);
  const ProfilePoint *pt = &g_array_index(g->points, ProfilePoint, 0);
  g_assert_cmpuint(pt->sm_mhz, ==, 1410);
  g_assert_cmpuint(pt->mem_mhz, ==, 0);
  /* Power 100 + 100 t: energy over [0.5, 1.5] = 200 J, over [0.25, 1.25]
   * = 175 J; per launch the mean is (20 + 17.5) / 2. */
  g_assert_true(test_close(pt->energy_j, 18.75, 1e-9));
  g_assert_true(test_close(pt->time_s, 0.1, 1e-9));
  const ProfileOp *c = profile_find(p, "copy, fast");
  pt = &g_array_index(c->points, ProfilePoint, 0);
  g_assert_cmpuint(pt->sm_mhz, ==, 1005);
  g_assert_true(test_close(pt->energy_j, 200, 1e-9));
  g_assert_true(test_close(pt->time_s, 1.0, 1e-9));
  test_rmdir(dir);
}

/* The trapezoid integral on samples of a piecewise-linear signal is exact
 * whatever the window edges; on a non-linear signal it converges with the
 * sampling rate (here: P = 100 + 50 sin t, 10 ms samples). */
static void test_nvml_integral(void)
{
  g_autofree char *dir = test_tmpdir();
  GString *s = g_string_new("timestamp,clocks.sm [MHz],power.draw [W]\n");
  for (int i = 0; i <= 1000; i++) {
    double t = i * 0.01;
    g_string_append_printf(s, "%.2f,1200,%.9f\n", t, 100 + 50 * sin(t));
  }
  g_autofree char *samples = write_file(dir, "s.csv", s->str);
  g_string_free(s, TRUE);
  g_autofree char *windows =
      write_file(dir, "w.csv", "kernel,start,end\nk,1.234,7.777\n");
  GError *error = NULL;
  g_autoptr(Profile) p = profile_load_nvml(samples, windows, &error);
  g_assert_no_error(error);
  const ProfilePoint *pt =
      &g_array_index(profile_find(p, "k")->points, ProfilePoint, 0);
  double exact = 100 * (7.777 - 1.234) + 50 * (cos(1.234) - cos(7.777));
  g_assert_true(test_close(pt->energy_j, exact, 1e-4));
  g_assert_cmpuint(pt->sm_mhz, ==, 1200);
  test_rmdir(dir);
}

typedef struct {
  const char *name;
  const char *samples;   /* NULL: the default series */
  const char *windows;
  int code;
  const char *needle;
} NvmlBad;

static const NvmlBad nvml_bad[] = {
  {"outside", NULL, "kernel,start,end\nk,3.5,4.5\n", PROFILE_ERROR_RANGE,
   "w.csv:2: window 3.500000-4.500000 s"},
  {"no-sample", NULL, "kernel,start,end\nk,1.01,1.05\n", PROFILE_ERROR_RANGE,
   "contains no power sample"},
  {"reversed", NULL, "kernel,start,end\nk,1.5,1.2\n", PROFILE_ERROR_FORMAT,
   "ends before it starts"},
  {"bad-time", NULL, "kernel,start,end\nk,soon,1.2\n", PROFILE_ERROR_FORMAT,
   "w.csv:2: column 2 (start): 'soon'"},
  {"window-columns", NULL, "kernel,begin,end\n", PROFILE_ERROR_FORMAT,
   "unknown column 'begin'"},
  {"no-windows", NULL, "kernel,start,end\n", PROFILE_ERROR_FORMAT,
   "no windows"},
  {"no-power", "timestamp,clocks.sm [MHz]\n0,1410\n1,1410\n",
   "kernel,start,end\nk,0,1\n", PROFILE_ERROR_FORMAT,
   "missing column power.draw"},
  {"not-available", "timestamp,clocks.sm [MHz],power.draw [W]\n0,1410,[N/A]\n",
   "kernel,start,end\nk,0,1\n", PROFILE_ERROR_FORMAT,
   "s.csv:2: column 3 (power.draw): '[N/A]' is not a number"},
  {"backwards-clock",
   "timestamp,clocks.sm [MHz],power.draw [W]\n1,1410,100\n0.5,1410,100\n",
   "kernel,start,end\nk,0,1\n", PROFILE_ERROR_FORMAT,
   "s.csv:3: column 1 (timestamp): '0.5' is not after"},
  {"one-sample", "timestamp,clocks.sm [MHz],power.draw [W]\n1,1410,100\n",
   "kernel,start,end\nk,0,1\n", PROFILE_ERROR_FORMAT, "at least 2"},
};

static void test_nvml_bad(gconstpointer data)
{
  const NvmlBad *c = data;
  g_autofree char *dir = test_tmpdir();
  g_autofree char *def = nvml_samples();
  g_autofree char *samples =
      write_file(dir, "s.csv", c->samples != NULL ? c->samples : def);
  g_autofree char *windows = write_file(dir, "w.csv", c->windows);
  GError *error = NULL;
  g_assert_null(profile_load_nvml(samples, windows, &error));
  g_assert_error(error, PROFILE_ERROR, c->code);
  if (strstr(error->message, c->needle) == NULL)
    g_error("%s: message '%s' lacks '%s'", c->name, error->message, c->needle);
  g_error_free(error);
  test_rmdir(dir);
}

/* ---- measured iterations ---------------------------------------------- */

static void test_run(void)
{
  g_autofree char *dir = test_tmpdir();
  g_autofree char *good = write_file(
      dir, "run.csv", "energy_j,rank,time_s\n300,1,1.5\n310,0,1.49\n");
  GError *error = NULL;
  g_autoptr(GArray) r = profile_load_run(good, &error);
  g_assert_no_error(error);
  g_assert_cmpuint(r->len, ==, 2);
  g_assert_cmpuint(g_array_index(r, ProfileRank, 0).rank, ==, 0);
  g_assert_cmpfloat(g_array_index(r, ProfileRank, 0).energy_j, ==, 310);
  g_autofree char *dup =
      write_file(dir, "dup.csv", "rank,time_s,energy_j\n0,1,1\n0,1,1\n");
  g_assert_null(profile_load_run(dup, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_DUPLICATE);
  g_assert_nonnull(strstr(error->message, "dup.csv:3: rank 0 already on line 2"));
  g_clear_error(&error);
  g_autofree char *gap =
      write_file(dir, "gap.csv", "rank,time_s,energy_j\n0,1,1\n2,1,1\n");
  g_assert_null(profile_load_run(gap, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT);
  g_assert_nonnull(strstr(error->message, "rank 1 is missing"));
  g_clear_error(&error);
  g_autofree char *neg =
      write_file(dir, "neg.csv", "rank,time_s,energy_j\n0,1,-1\n");
  g_assert_null(profile_load_run(neg, &error));
  g_assert_error(error, PROFILE_ERROR, PROFILE_ERROR_FORMAT);
  g_assert_nonnull(strstr(error->message, "neg.csv:2: column 3 (energy_j)"));
  g_clear_error(&error);
  test_rmdir(dir);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (gsize i = 0; i < G_N_ELEMENTS(shared); i++) {
    g_autofree char *base = g_path_get_basename(shared[i].file);
    g_autofree char *name = g_strdup_printf("/profile/shared/%s", base);
    g_test_add_data_func(name, &shared[i], test_shared);
  }
  g_test_add_func("/profile/values", test_values);
  g_test_add_func("/profile/csv-table", test_csv_table);
  g_test_add_func("/profile/range", test_range);
  g_test_add_func("/profile/kernel-form", test_kernel_form);
  for (gsize i = 0; i < G_N_ELEMENTS(bad); i++) {
    g_autofree char *name = g_strdup_printf("/profile/bad/%s", bad[i].name);
    g_test_add_data_func(name, &bad[i], test_bad);
  }
  g_test_add_func("/profile/missing-file", test_missing_file);
  g_test_add_func("/profile/fuzz", test_fuzz);
  g_test_add_func("/profile/nvml/windows", test_nvml);
  g_test_add_func("/profile/nvml/integral", test_nvml_integral);
  for (gsize i = 0; i < G_N_ELEMENTS(nvml_bad); i++) {
    g_autofree char *name =
        g_strdup_printf("/profile/nvml/bad/%s", nvml_bad[i].name);
    g_test_add_data_func(name, &nvml_bad[i], test_nvml_bad);
  }
  g_test_add_func("/profile/run", test_run);
  return g_test_run();
}
