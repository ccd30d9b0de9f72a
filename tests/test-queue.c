/* tests/test-queue.c -- the 4-ary event heap against a sorted reference. */
#include "sim/queue.h"

#include "sim/pcg.h"
#include "tests/testutil.h"

/* Reference order: (time_ns, prio, seq) ascending. */
static int event_cmp(gconstpointer pa, gconstpointer pb)
{
  const SimEvent *a = pa, *b = pb;
  if (a->time_ns != b->time_ns)
    return a->time_ns < b->time_ns ? -1 : 1;
  if (a->prio != b->prio)
    return a->prio < b->prio ? -1 : 1;
  if (a->seq != b->seq)
    return a->seq < b->seq ? -1 : 1;
  return 0;
}

static void assert_event_eq(const SimEvent *got, const SimEvent *want)
{
  g_assert_cmpint(got->time_ns, ==, want->time_ns);
  g_assert_cmpuint(got->prio, ==, want->prio);
  g_assert_cmpuint(got->kind, ==, want->kind);
  g_assert_cmpuint(got->seq, ==, want->seq);
  g_assert_cmpuint(got->payload, ==, want->payload);
}

/* Parameters of one random-order case: how many events and how wide the
 * time and priority ranges are (narrow ranges force many ties). */
typedef struct {
  guint n;
  guint32 time_range;
  guint32 prio_range;
} OrderCase;

static const OrderCase order_cases[] = {
  { 100000, 1000000000u, 1u << 20 }, /* few ties */
  { 100000, 1000u, 4u },             /* many ties on time and prio */
  { 100000, 1u, 1u },                /* everything tied: pure FIFO */
  { 1, 10u, 10u },
  { 5, 3u, 2u },
};

/* Pushes n random events and pops them all: the pop sequence must equal the
 * reference sorted by (time, prio, insertion order), seq must be the push
 * index, and popped times never decrease. */
static void test_order(gconstpointer data)
{
  const OrderCase *c = data;
  g_autoptr(SimQueue) q = sim_queue_new();
  g_autofree SimEvent *ref = g_new(SimEvent, c->n);
  SimPcg rng;
  sim_pcg_for_entity(&rng, 1u, SIM_PCG_USER, c->n ^ c->time_range);

  for (guint i = 0; i < c->n; i++) {
    SimEvent e = {
      .time_ns = (gint64)sim_pcg_bounded(&rng, c->time_range) - 500,
      .prio = sim_pcg_bounded(&rng, c->prio_range),
      .kind = sim_pcg_next(&rng),
      .seq = i,
      .payload = ((guint64)sim_pcg_next(&rng) << 32) | i,
    };
    ref[i] = e;
    sim_queue_push(q, e.time_ns, e.prio, e.kind, e.payload);
    g_assert_cmpuint(sim_queue_len(q), ==, i + 1);
  }
  qsort(ref, c->n, sizeof *ref, event_cmp);

  SimEvent ev, peeked;
  gint64 last = G_MININT64;
  for (guint i = 0; i < c->n; i++) {
    g_assert_true(sim_queue_peek(q, &peeked));
    g_assert_true(sim_queue_pop(q, &ev));
    assert_event_eq(&peeked, &ev);
    assert_event_eq(&ev, &ref[i]);
    g_assert_cmpint(ev.time_ns, >=, last);
    last = ev.time_ns;
    g_assert_cmpuint(sim_queue_len(q), ==, c->n - i - 1);
  }
  g_assert_false(sim_queue_pop(q, &ev));
  g_assert_false(sim_queue_peek(q, &ev));
}

/* Ties: equal time goes by prio, equal (time, prio) by insertion order. */
static void test_ties(void)
{
  g_autoptr(SimQueue) q = sim_queue_new();
  sim_queue_push(q, 10, 2, 0, 1);
  sim_queue_push(q, 10, 1, 0, 2);
  sim_queue_push(q, 10, 2, 0, 3);
  sim_queue_push(q, 5, 9, 0, 4);
  sim_queue_push(q, 10, 1, 0, 5);
  sim_queue_push(q, 10, 0, 0, 6);
  static const guint64 want[] = { 4, 6, 2, 5, 1, 3 };
  SimEvent ev;
  for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
    g_assert_true(sim_queue_pop(q, &ev));
    g_assert_cmpuint(ev.payload, ==, want[i]);
  }
  g_assert_false(sim_queue_pop(q, &ev));
}

/* Extreme keys sort correctly (no subtraction overflow in comparisons). */
static void test_extremes(void)
{
  g_autoptr(SimQueue) q = sim_queue_new();
  sim_queue_push(q, G_MAXINT64, G_MAXUINT32, 1, 1);
  sim_queue_push(q, G_MININT64, 0, 2, 2);
  sim_queue_push(q, 0, G_MAXUINT32, 3, 3);
  sim_queue_push(q, 0, 0, 4, 4);
  sim_queue_push(q, G_MAXINT64, 0, 5, 5);
  static const guint64 want[] = { 2, 4, 3, 5, 1 };
  SimEvent ev;
  for (guint i = 0; i < G_N_ELEMENTS(want); i++) {
    g_assert_true(sim_queue_pop(q, &ev));
    g_assert_cmpuint(ev.payload, ==, want[i]);
  }
}

/* Simulation-like use: each pop schedules 0-3 later events (never in the
 * past), interleaving pushes and pops.  Popped times never decrease, every
 * event pops exactly once, and the pop order matches a reference that
 * re-sorts the pending set on every step. */
static void test_interleaved(void)
{
  g_autoptr(SimQueue) q = sim_queue_new();
  g_autoptr(GArray) pending = g_array_new(FALSE, FALSE, sizeof(SimEvent));
  SimPcg rng;
  sim_pcg_for_entity(&rng, 2u, SIM_PCG_USER, 0u);
  guint64 pushed = 0, popped = 0;

  for (guint i = 0; i < 8; i++) {
    SimEvent e = { .time_ns = sim_pcg_bounded(&rng, 100), .seq = pushed++ };
    g_array_append_val(pending, e);
    sim_queue_push(q, e.time_ns, 0, 0, e.seq);
  }
  gint64 last = G_MININT64;
  SimEvent ev;
  while (popped < 5000 && sim_queue_pop(q, &ev)) {
    popped++;
    g_assert_cmpint(ev.time_ns, >=, last);
    last = ev.time_ns;
    /* The reference minimum (pending is small, a linear scan will do). */
    guint best = 0;
    for (guint j = 1; j < pending->len; j++)
      if (event_cmp(&g_array_index(pending, SimEvent, j),
                    &g_array_index(pending, SimEvent, best)) < 0)
        best = j;
    g_assert_cmpuint(ev.seq, ==, g_array_index(pending, SimEvent, best).seq);
    g_assert_cmpuint(ev.payload, ==, ev.seq);
    g_array_remove_index_fast(pending, best);

    guint k = pending->len < 64 ? sim_pcg_bounded(&rng, 4) : 0;
    for (guint j = 0; j < k; j++) {
      SimEvent e = {
        .time_ns = ev.time_ns + sim_pcg_bounded(&rng, 20),
        .prio = sim_pcg_bounded(&rng, 3),
        .seq = pushed++,
      };
      g_array_append_val(pending, e);
      sim_queue_push(q, e.time_ns, e.prio, 0, e.seq);
    }
    g_assert_cmpuint(sim_queue_len(q), ==, pending->len);
  }
  g_assert_cmpuint(popped, >, 100);
}

/* peek does not remove; clear empties but keeps the queue usable, and seq
 * keeps counting so later pushes still order after earlier ones. */
static void test_peek_len_clear(void)
{
  g_autoptr(SimQueue) q = sim_queue_new();
  SimEvent ev;
  g_assert_cmpuint(sim_queue_len(q), ==, 0);
  g_assert_false(sim_queue_peek(q, &ev));
  g_assert_false(sim_queue_pop(q, &ev));
  sim_queue_clear(q); /* clearing an empty queue is fine */

  sim_queue_push(q, 30, 0, 7, 300);
  sim_queue_push(q, 10, 0, 8, 100);
  sim_queue_push(q, 20, 0, 9, 200);
  g_assert_cmpuint(sim_queue_len(q), ==, 3);
  for (guint i = 0; i < 3; i++) {
    g_assert_true(sim_queue_peek(q, &ev));
    g_assert_cmpint(ev.time_ns, ==, 10);
    g_assert_cmpuint(ev.kind, ==, 8);
    g_assert_cmpuint(ev.payload, ==, 100);
    g_assert_cmpuint(ev.seq, ==, 1);
  }
  g_assert_cmpuint(sim_queue_len(q), ==, 3);

  for (guint i = 0; i < 1000; i++)
    sim_queue_push(q, i, 0, 0, i);
  g_assert_cmpuint(sim_queue_len(q), ==, 1003);
  sim_queue_clear(q);
  g_assert_cmpuint(sim_queue_len(q), ==, 0);
  g_assert_false(sim_queue_peek(q, &ev));
  g_assert_false(sim_queue_pop(q, &ev));

  sim_queue_push(q, 5, 1, 0, 1);
  sim_queue_push(q, 4, 1, 0, 2);
  g_assert_cmpuint(sim_queue_len(q), ==, 2);
  g_assert_true(sim_queue_pop(q, &ev));
  g_assert_cmpuint(ev.payload, ==, 2);
  g_assert_cmpuint(ev.seq, ==, 1004);
  g_assert_true(sim_queue_pop(q, NULL)); /* discard */
  g_assert_cmpuint(sim_queue_len(q), ==, 0);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  for (guint i = 0; i < G_N_ELEMENTS(order_cases); i++) {
    const OrderCase *c = &order_cases[i];
    g_autofree char *name = g_strdup_printf(
      "/queue/order/n%u-t%u-p%u", c->n, c->time_range, c->prio_range);
    g_test_add_data_func(name, c, test_order);
  }
  g_test_add_func("/queue/ties", test_ties);
  g_test_add_func("/queue/extremes", test_extremes);
  g_test_add_func("/queue/interleaved", test_interleaved);
  g_test_add_func("/queue/peek-len-clear", test_peek_len_clear);
  return g_test_run();
}
