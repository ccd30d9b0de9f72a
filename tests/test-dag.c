/* tests/test-dag.c -- models/dag.h (CSR adjacency, both topological
 * orders, earliest starts, latest finishes, the longest path) and
 * models/schedule.h (stage orders of 1f1b, gpipe and interleaved) on
 * small hand-computed cases. */
#include "models/dag.h"
#include "models/schedule.h"

#include "tests/testutil.h"

static Dag *make(guint32 n, const guint32 *edges, guint32 ne)
{
  guint32 bad = G_MAXUINT32;
  Dag *d = dag_new(n, edges, ne, &bad);
  g_assert_nonnull(d);
  g_assert_cmpuint(bad, ==, G_MAXUINT32);
  return d;
}

static void assert_u32(const guint32 *got, const guint32 *want, guint n)
{
  for (guint i = 0; i < n; i++)
    g_assert_cmpuint(got[i], ==, want[i]);
}

static void assert_i64(const gint64 *got, const gint64 *want, guint n)
{
  for (guint i = 0; i < n; i++)
    g_assert_cmpint(got[i], ==, want[i]);
}

/* 0 -> {1, 2} -> 3, durations 2, 5, 3, 1. */
static void test_diamond(void)
{
  static const guint32 e[] = {0, 1, 0, 2, 1, 3, 2, 3};
  g_autoptr(Dag) d = make(4, e, 4);
  g_assert_true(dag_acyclic(d));
  static const guint32 succ_off[] = {0, 2, 3, 4, 4}, succ[] = {1, 2, 3, 3};
  static const guint32 pred_off[] = {0, 0, 1, 2, 4}, pred[] = {0, 0, 1, 2};
  assert_u32(d->succ_off, succ_off, 5);
  assert_u32(d->succ, succ, 4);
  assert_u32(d->pred_off, pred_off, 5);
  assert_u32(d->pred, pred, 4);
  static const guint32 topo[] = {0, 1, 2, 3};
  assert_u32(d->topo, topo, 4);
  static const gint64 dur[] = {2, 5, 3, 1};
  gint64 es[4], lf[4];
  g_assert_cmpint(dag_earliest(d, dur, es), ==, 8);
  static const gint64 es_want[] = {0, 2, 2, 7};
  assert_i64(es, es_want, 4);
  dag_latest(d, dur, 8, lf);
  static const gint64 lf_want[] = {2, 7, 7, 8};
  assert_i64(lf, lf_want, 4);
  g_assert_cmpint(dag_longest_path(d, dur), ==, 8);
  /* Listing 0 -> 2 first puts 2 before 1 in the FIFO order. */
  static const guint32 e2[] = {0, 2, 0, 1, 1, 3, 2, 3};
  g_autoptr(Dag) d2 = make(4, e2, 4);
  static const guint32 topo2[] = {0, 2, 1, 3};
  assert_u32(d2->topo, topo2, 4);
}

/* 3 -> 2 -> 1 -> 0: the order runs against the indices. */
static void test_chain(void)
{
  static const guint32 e[] = {3, 2, 2, 1, 1, 0};
  g_autoptr(Dag) d = make(4, e, 3);
  static const guint32 topo[] = {3, 2, 1, 0};
  assert_u32(d->topo, topo, 4);
  guint32 low[4];
  g_assert_cmpuint(dag_order_lowest(d, low), ==, 0);
  assert_u32(low, topo, 4);
  static const gint64 dur[] = {1, 1, 1, 1};
  gint64 es[4], lf[4];
  g_assert_cmpint(dag_earliest(d, dur, es), ==, 4);
  static const gint64 es_want[] = {3, 2, 1, 0};
  assert_i64(es, es_want, 4);
  dag_latest(d, dur, 10, lf);
  static const gint64 lf_want[] = {10, 9, 8, 7};
  assert_i64(lf, lf_want, 4);
}

/* 0, 1 alone and 2 -> 3. */
static void test_disconnected(void)
{
  static const guint32 e[] = {2, 3};
  g_autoptr(Dag) d = make(4, e, 1);
  static const guint32 topo[] = {0, 1, 2, 3};
  assert_u32(d->topo, topo, 4);
  static const gint64 dur[] = {5, 1, 2, 4};
  gint64 es[4], lf[4];
  g_assert_cmpint(dag_earliest(d, dur, es), ==, 6);
  static const gint64 es_want[] = {0, 0, 0, 2};
  assert_i64(es, es_want, 4);
  dag_latest(d, dur, 6, lf);
  static const gint64 lf_want[] = {6, 6, 2, 6};
  assert_i64(lf, lf_want, 4);
  /* No nodes at all. */
  g_autoptr(Dag) empty = make(0, NULL, 0);
  g_assert_true(dag_acyclic(empty));
  g_assert_cmpint(dag_longest_path(empty, NULL), ==, 0);
}

/* 0 -> 1 -> 2 -> 1: only 0 is ordered; the lowest-first order releases
 * 1, dropping its edge from 2. */
static void test_cycle(void)
{
  static const guint32 e[] = {0, 1, 1, 2, 2, 1};
  g_autoptr(Dag) d = make(3, e, 3);
  g_assert_false(dag_acyclic(d));
  g_assert_cmpuint(d->n_ordered, ==, 1);
  g_assert_cmpuint(d->topo[0], ==, 0);
  guint32 low[3];
  g_assert_cmpuint(dag_order_lowest(d, low), ==, 1);
  static const guint32 want[] = {0, 1, 2};
  assert_u32(low, want, 3);
  /* A two-node cycle alone: 0 released with one edge dropped. */
  static const guint32 e2[] = {0, 1, 1, 0};
  g_autoptr(Dag) d2 = make(2, e2, 2);
  g_assert_cmpuint(d2->n_ordered, ==, 0);
  g_assert_cmpuint(dag_order_lowest(d2, low), ==, 1);
  assert_u32(low, want, 2);
}

static void test_bad_edges(void)
{
  static const guint32 loop[] = {0, 1, 1, 1};
  guint32 bad = 99;
  g_assert_null(dag_new(2, loop, 2, &bad));
  g_assert_cmpuint(bad, ==, 1);
  static const guint32 range[] = {0, 2};
  g_assert_null(dag_new(2, range, 1, &bad));
  g_assert_cmpuint(bad, ==, 0);
  g_assert_null(dag_new(2, range, 1, NULL));
}

/* Ties: FIFO order frees nodes as their last predecessor goes; the
 * lowest-first order always takes the lowest free index. */
static void test_ties(void)
{
  static const guint32 e[] = {0, 3, 1, 2};
  g_autoptr(Dag) d = make(4, e, 2);
  static const guint32 fifo[] = {0, 1, 3, 2}, lowest[] = {0, 1, 2, 3};
  assert_u32(d->topo, fifo, 4);
  guint32 low[4];
  g_assert_cmpuint(dag_order_lowest(d, low), ==, 0);
  assert_u32(low, lowest, 4);
  /* An edge listed twice counts twice and is one precedence. */
  static const guint32 dup[] = {0, 1, 0, 1};
  g_autoptr(Dag) dd = make(2, dup, 2);
  g_assert_cmpuint(dd->pred_off[2] - dd->pred_off[1], ==, 2);
  g_assert_true(dag_acyclic(dd));
  static const gint64 dur[] = {3, 4};
  g_assert_cmpint(dag_longest_path(dd, dur), ==, 7);
}

/* ---- schedules ------------------------------------------------------- */

/* Steps as "F0 B1 ..." (chunk c as "F0.c" when chunks > 1). */
static char *steps_str(const ScheduleStep *st, guint n, guint chunks)
{
  GString *s = g_string_new(NULL);
  for (guint k = 0; k < n; k++) {
    if (k > 0)
      g_string_append_c(s, ' ');
    g_string_append_printf(s, "%c%u", st[k].backward ? 'B' : 'F',
                           st[k].microbatch);
    if (chunks > 1)
      g_string_append_printf(s, ".%u", st[k].chunk);
  }
  return g_string_free(s, FALSE);
}

static void check_order(PipelineSchedule sch, guint S, guint M, guint v,
                        guint s, const char *want)
{
  ScheduleStep st[64];
  g_assert_cmpuint(2 * M * v, <=, G_N_ELEMENTS(st));
  g_assert_true(schedule_stage_order(sch, S, M, v, s, st));
  g_autofree char *got = steps_str(st, 2 * M * v, v);
  g_assert_cmpstr(got, ==, want);
}

static void test_schedule_1f1b(void)
{
  check_order(PIPELINE_1F1B, 3, 4, 1, 0, "F0 F1 F2 B0 F3 B1 B2 B3");
  check_order(PIPELINE_1F1B, 3, 4, 1, 1, "F0 F1 B0 F2 B1 F3 B2 B3");
  check_order(PIPELINE_1F1B, 3, 4, 1, 2, "F0 B0 F1 B1 F2 B2 F3 B3");
  /* Fewer microbatches than warm-up slots. */
  check_order(PIPELINE_1F1B, 4, 2, 1, 0, "F0 F1 B0 B1");
  check_order(PIPELINE_1F1B, 1, 2, 1, 0, "F0 B0 F1 B1");
  /* The node-id form Perseus uses. */
  guint32 ids[8];
  g_assert_true(pipeline_schedule_order("1f1b", 3, 4, 1, ids));
  static const guint32 want[] = {8, 10, 9, 12, 11, 14, 13, 15};
  assert_u32(ids, want, 8);
  g_assert_false(pipeline_schedule_order("interleaved", 3, 4, 1, ids));
  g_assert_false(pipeline_schedule_order("zigzag", 3, 4, 1, ids));
}

static void test_schedule_gpipe(void)
{
  check_order(PIPELINE_GPIPE, 2, 3, 1, 0, "F0 F1 F2 B0 B1 B2");
  check_order(PIPELINE_GPIPE, 2, 3, 1, 1, "F0 F1 F2 B0 B1 B2");
  guint32 ids[6];
  g_assert_true(pipeline_schedule_order("gpipe", 2, 3, 1, ids));
  static const guint32 want[] = {6, 8, 10, 7, 9, 11};
  assert_u32(ids, want, 6);
}

static void test_schedule_interleaved(void)
{
  check_order(PIPELINE_INTERLEAVED, 2, 2, 2, 0,
              "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
  check_order(PIPELINE_INTERLEAVED, 2, 2, 2, 1,
              "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0");
}

static void test_schedule_refused(void)
{
  ScheduleStep st[16];
  g_assert_false(schedule_stage_order(PIPELINE_1F1B, 2, 2, 2, 0, st));
  g_assert_false(schedule_stage_order(PIPELINE_GPIPE, 2, 2, 0, 0, st));
  g_assert_false(schedule_stage_order(PIPELINE_INTERLEAVED, 2, 3, 2, 0, st));
  g_assert_false(schedule_stage_order(PIPELINE_1F1B, 2, 2, 1, 2, st));
  g_assert_false(schedule_stage_order((PipelineSchedule)7, 2, 2, 1, 0, st));
}

static void test_schedule_names(void)
{
  for (guint i = 0; i < PIPELINE_SCHEDULE_COUNT; i++) {
    PipelineSchedule s = PIPELINE_SCHEDULE_COUNT;
    g_assert_true(schedule_from_name(schedule_name((PipelineSchedule)i), &s));
    g_assert_cmpint(s, ==, (int)i);
  }
  g_assert_cmpstr(schedule_name(PIPELINE_1F1B), ==, "1f1b");
  g_assert_cmpstr(schedule_name(PIPELINE_GPIPE), ==, "gpipe");
  g_assert_cmpstr(schedule_name(PIPELINE_INTERLEAVED), ==, "interleaved");
  g_assert_cmpstr(schedule_name(PIPELINE_SCHEDULE_COUNT), ==, "?");
  PipelineSchedule s = PIPELINE_GPIPE;
  g_assert_false(schedule_from_name("zigzag", &s));
  g_assert_false(schedule_from_name(NULL, &s));
  g_assert_cmpint(s, ==, PIPELINE_GPIPE);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/dag/diamond", test_diamond);
  g_test_add_func("/dag/chain", test_chain);
  g_test_add_func("/dag/disconnected", test_disconnected);
  g_test_add_func("/dag/cycle", test_cycle);
  g_test_add_func("/dag/bad-edges", test_bad_edges);
  g_test_add_func("/dag/ties", test_ties);
  g_test_add_func("/schedule/1f1b", test_schedule_1f1b);
  g_test_add_func("/schedule/gpipe", test_schedule_gpipe);
  g_test_add_func("/schedule/interleaved", test_schedule_interleaved);
  g_test_add_func("/schedule/refused", test_schedule_refused);
  g_test_add_func("/schedule/names", test_schedule_names);
  return g_test_run();
}
