/* tests/fuzz/fuzz-sched.c -- libFuzzer target: Perseus/Merak frequency
 * schedules (N.sched.json) through sched_plan_load(), as
 * js.perseus.load_schedule reads them.
 *
 * The input is the file's bytes, as they are: the JSON text (the seeds are
 * small schedules of real shape; tests/fuzz/sched.dict holds the layout's
 * tokens).  One byte string, one file.
 *
 * Checks: success with a plan whose clocks are all set (1..65535 MHz) and
 * whose shape is a Merak 1F1B pipeline (1 <= n_stages <= 4096, at least
 * one microbatch), or a SCHED_ERROR naming the file.  Deep nesting (the
 * recursive free of yajl's tree crashed on 300,000 '[': issue 27 finding
 * 11) must be a clean refusal.
 */
#include "tests/fuzz/fuzz.h"
#include "traces/sched.h"

static int fuzz_sched_one(const guint8 *data, size_t size)
{
  g_autofree char *path = fuzz_path("x.sched.json");
  fuzz_write(path, data, size);
  GError *err = NULL;
  g_autoptr(SchedPlan) p = sched_plan_load(path, &err);
  fuzz_check_outcome("sched_plan_load", p != NULL, err, SCHED_ERROR, path);
  if (p != NULL) {
    FUZZ_CHECK(p->n_stages >= 1 && p->n_stages <= 4096, "n_stages %u",
               p->n_stages);
    FUZZ_CHECK(p->n_microbatches >= 1, "n_microbatches %u",
               p->n_microbatches);
    gsize n = (gsize)2 * p->n_stages * p->n_microbatches;
    for (gsize i = 0; i < n; i++)
      FUZZ_CHECK(p->mhz[i] >= 1, "clock %" G_GSIZE_FORMAT " unset", i);
  }
  g_clear_error(&err);
  fuzz_clean_dir();
  return 0;
}

FUZZ_TARGET(fuzz_sched_one)
