/* tests/test-pcg.c -- pcg32 against the published reference output, plus
 * jump-ahead, stream derivation and bounded-draw properties. */
#include "sim/pcg.h"

#include <string.h>

#include "tests/testutil.h"

/* Round 1 of the PCG paper's demo program (pcg32-demo, seeded 42u, 54u), as
 * published in pcg-c's test-high/expected/check-pcg32.out. */
static const guint32 demo_round1_32bit[6] = {
  0xa15c02b7u, 0x7b47f409u, 0xba1d3330u, 0x83d2f293u, 0xbfa4784bu, 0xcbed606eu,
};
static const char demo_round1_coins[] =
  "HHTTTHTHHHTHTTTHHHHHTTTHHHTHTHTHTTHTTTHHHHHHTTTTHHTTTTTHTTTTTTTHT";
static const char demo_round1_rolls[] =
  "3 4 1 1 2 2 3 2 4 3 2 4 3 3 5 2 3 1 3 1 5 1 4 1 5 6 4 6 6 2 6 3 3";
static const char demo_round1_cards[] =
  "Qd Ks 6d 3s 3d 4c 3h Td Kc 5c Jh Kd Jd As 4s 4h Ad Th Ac Jc 7s Qs "
  "2s 7h Kh 2d 6c Ah 4d Qh 9h 6s 5s 2c 9c Ts 8d 9s 3c 8c Js 5d 2h 6h "
  "7d 8s 9d 5h 8h Qc 7c Tc";
/* First output of round 2: checks that round 1 consumed exactly as many
 * draws as the demo does. */
static const guint32 demo_round2_first = 0x74ab93adu;

/* Replays round 1 of the demo: six outputs, back six steps and the same six
 * again ("Again:" line), 65 coin flips, 33 die rolls, a Fisher-Yates shuffle
 * of 52 cards (card c is rank c / 4 of suit c % 4, suits h c d s). */
static void test_demo_round1(void)
{
  SimPcg rng;
  sim_pcg_seed(&rng, 42u, 54u);

  for (guint i = 0; i < 6; i++)
    g_assert_cmphex(sim_pcg_next(&rng), ==, demo_round1_32bit[i]);
  sim_pcg_advance(&rng, (guint64)-6);
  for (guint i = 0; i < 6; i++)
    g_assert_cmphex(sim_pcg_next(&rng), ==, demo_round1_32bit[i]);

  char coins[66];
  for (guint i = 0; i < 65; i++)
    coins[i] = sim_pcg_bounded(&rng, 2) ? 'H' : 'T';
  coins[65] = '\0';
  g_assert_cmpstr(coins, ==, demo_round1_coins);

  g_autoptr(GString) rolls = g_string_new(NULL);
  for (guint i = 0; i < 33; i++)
    g_string_append_printf(rolls, "%s%u", i ? " " : "",
                           sim_pcg_bounded(&rng, 6) + 1);
  g_assert_cmpstr(rolls->str, ==, demo_round1_rolls);

  static const char rank[] = "A23456789TJQK";
  static const char suit[] = "hcds";
  guint cards[52];
  for (guint i = 0; i < 52; i++)
    cards[i] = i;
  for (guint i = 52; i > 1; i--) {
    guint chosen = sim_pcg_bounded(&rng, i);
    guint card = cards[chosen];
    cards[chosen] = cards[i - 1];
    cards[i - 1] = card;
  }
  g_autoptr(GString) deal = g_string_new(NULL);
  for (guint i = 0; i < 52; i++)
    g_string_append_printf(deal, "%s%c%c", i ? " " : "", rank[cards[i] / 4],
                           suit[cards[i] % 4]);
  g_assert_cmpstr(deal->str, ==, demo_round1_cards);

  g_assert_cmphex(sim_pcg_next(&rng), ==, demo_round2_first);
}

/* advance(n) lands where n calls of next land, for several n (data). */
static void test_advance_matches_steps(gconstpointer data)
{
  guint64 n = GPOINTER_TO_SIZE(data);
  SimPcg a, b;
  sim_pcg_seed(&a, G_GUINT64_CONSTANT(0x853c49e6748fea9b), 7u);
  b = a;
  for (guint64 i = 0; i < n; i++)
    sim_pcg_next(&a);
  sim_pcg_advance(&b, n);
  g_assert_cmpuint(a.state, ==, b.state);
  g_assert_cmpuint(a.inc, ==, b.inc);
  g_assert_cmphex(sim_pcg_next(&a), ==, sim_pcg_next(&b));
}

/* advance(2^64 - n) undoes n steps: the same outputs come out again. */
static void test_advance_backwards(void)
{
  SimPcg rng;
  sim_pcg_seed(&rng, 12345u, 678u);
  sim_pcg_advance(&rng, 1000u); /* somewhere in the middle */
  SimPcg start = rng;
  guint32 first[100];
  for (guint i = 0; i < 100; i++)
    first[i] = sim_pcg_next(&rng);
  sim_pcg_advance(&rng, G_MAXUINT64 - 100u + 1u);
  g_assert_cmpuint(rng.state, ==, start.state);
  for (guint i = 0; i < 100; i++)
    g_assert_cmphex(sim_pcg_next(&rng), ==, first[i]);

  /* A full period (2^64 = advance by 2^63 twice) returns to the start. */
  rng = start;
  sim_pcg_advance(&rng, G_GUINT64_CONSTANT(1) << 63);
  g_assert_cmpuint(rng.state, !=, start.state);
  sim_pcg_advance(&rng, G_GUINT64_CONSTANT(1) << 63);
  g_assert_cmpuint(rng.state, ==, start.state);

  /* advance(0) is the identity. */
  sim_pcg_advance(&rng, 0u);
  g_assert_cmpuint(rng.state, ==, start.state);
}

/* seed() fixes inc = 2 * initseq + 1 (odd) as pcg32_srandom_r does. */
static void test_seed_stream(void)
{
  SimPcg a, b;
  sim_pcg_seed(&a, 42u, 54u);
  g_assert_cmpuint(a.inc, ==, 109u);
  sim_pcg_seed(&b, 42u, 55u);
  g_assert_cmpuint(b.inc & 1u, ==, 1u);
  /* Same initial state, other stream: different outputs. */
  guint same = 0;
  for (guint i = 0; i < 64; i++)
    same += sim_pcg_next(&a) == sim_pcg_next(&b);
  g_assert_cmpuint(same, <, 4);
}

/* The same (seed, kind, id) always gives the same generator, whatever was
 * derived before it. */
static void test_entity_deterministic(void)
{
  SimPcg a, b, other;
  sim_pcg_for_entity(&a, 2024u, SIM_PCG_GPU, 17u);
  for (guint i = 0; i < 50; i++)
    sim_pcg_for_entity(&other, 2024u, SIM_PCG_GPU, i);
  sim_pcg_for_entity(&b, 2024u, SIM_PCG_GPU, 17u);
  g_assert_cmpuint(a.state, ==, b.state);
  g_assert_cmpuint(a.inc, ==, b.inc);
  g_assert_cmpuint(a.inc & 1u, ==, 1u);
  for (guint i = 0; i < 100; i++)
    g_assert_cmphex(sim_pcg_next(&a), ==, sim_pcg_next(&b));
}

/* Entities that differ in seed, kind or id get distinct states, streams and
 * output sequences. */
static void test_entity_distinct(void)
{
  enum { N_IDS = 256, N_KINDS = 6, N_SEEDS = 3 };
  static const guint32 kinds[N_KINDS] = {
    SIM_PCG_GPU,     SIM_PCG_STRAGGLER, SIM_PCG_SCRIPT,
    SIM_PCG_HOLDOUT, SIM_PCG_WORKLOAD,  SIM_PCG_USER,
  };
  static const guint64 seeds[N_SEEDS] = { 0u, 1u, G_MAXUINT64 };
  g_autoptr(GHashTable) states = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autoptr(GHashTable) incs = g_hash_table_new(g_int64_hash, g_int64_equal);
  g_autoptr(GHashTable) firsts = g_hash_table_new(g_int64_hash, g_int64_equal);
  guint total = N_IDS * N_KINDS * N_SEEDS;
  g_autofree SimPcg *rngs = g_new(SimPcg, total);
  g_autofree gint64 *first = g_new(gint64, total);
  guint k = 0;

  for (guint s = 0; s < N_SEEDS; s++)
    for (guint j = 0; j < N_KINDS; j++)
      for (guint64 id = 0; id < N_IDS; id++, k++) {
        sim_pcg_for_entity(&rngs[k], seeds[s], kinds[j], id);
        g_hash_table_add(states, &rngs[k].state);
        g_hash_table_add(incs, &rngs[k].inc);
        /* First two outputs as one 64-bit word. */
        SimPcg copy = rngs[k];
        first[k] = (gint64)(((guint64)sim_pcg_next(&copy) << 32) |
                            sim_pcg_next(&copy));
        g_hash_table_add(firsts, &first[k]);
      }
  g_assert_cmpuint(g_hash_table_size(states), ==, total);
  g_assert_cmpuint(g_hash_table_size(incs), ==, total);
  g_assert_cmpuint(g_hash_table_size(firsts), ==, total);
}

/* bounded() stays in range, including bounds near 2^32 where rejection is
 * most frequent, and bound 1 always gives 0. */
static void test_bounded_range(void)
{
  static const guint32 bounds[] = {
    1u, 2u, 3u, 6u, 7u, 52u, 1000u, 0x80000001u, 0xfffffffeu, 0xffffffffu,
  };
  SimPcg rng;
  sim_pcg_seed(&rng, 99u, 1u);
  for (guint b = 0; b < G_N_ELEMENTS(bounds); b++)
    for (guint i = 0; i < 10000; i++)
      g_assert_cmpuint(sim_pcg_bounded(&rng, bounds[b]), <, bounds[b]);
}

/* Chi-square of 600,000 draws in 60 cells.  The statistic has 59 degrees of
 * freedom (mean 59, sd ~10.9); the bound 120 is about 5.6 sd out and the
 * seed is fixed, so the test cannot flake, yet a biased or broken generator
 * (e.g. one cell never hit, or modulo bias from a bound near 2^32) fails. */
static void test_bounded_uniform(void)
{
  enum { CELLS = 60, DRAWS = 600000 };
  guint counts[CELLS] = { 0 };
  SimPcg rng;
  sim_pcg_for_entity(&rng, 7u, SIM_PCG_USER, 3u);
  for (guint i = 0; i < DRAWS; i++)
    counts[sim_pcg_bounded(&rng, CELLS)]++;
  double expected = (double)DRAWS / CELLS;
  double chi2 = 0.0;
  for (guint c = 0; c < CELLS; c++) {
    double d = counts[c] - expected;
    chi2 += d * d / expected;
  }
  g_test_message("chi2 = %.2f (59 degrees of freedom)", chi2);
  g_assert_cmpfloat(chi2, <, 120.0);
  g_assert_cmpfloat(chi2, >, 20.0); /* suspiciously perfect is wrong too */

  /* A bound of 3 * 2^30: plain modulo would give cell 0 half again the
   * mass of cell 2; rejection keeps the three thirds equal. */
  guint thirds[3] = { 0 };
  const guint32 big = 3u << 30;
  for (guint i = 0; i < 300000; i++)
    thirds[sim_pcg_bounded(&rng, big) / (1u << 30)]++;
  for (guint c = 0; c < 3; c++)
    g_assert_cmpuint(thirds[c], >, 98000);
}

/* double() is in [0, 1), uses the low bits (53, not 32) and has mean 1/2. */
static void test_double(void)
{
  SimPcg rng;
  sim_pcg_seed(&rng, 5u, 6u);
  double sum = 0.0;
  gboolean fine_bits = FALSE;
  for (guint i = 0; i < 100000; i++) {
    double x = sim_pcg_double(&rng);
    g_assert_cmpfloat(x, >=, 0.0);
    g_assert_cmpfloat(x, <, 1.0);
    sum += x;
    /* A 32-bit double would be a multiple of 2^-32. */
    if (x * 4294967296.0 != (double)(guint64)(x * 4294967296.0))
      fine_bits = TRUE;
  }
  g_assert_true(fine_bits);
  g_assert_cmpfloat(ABS(sum / 100000 - 0.5), <, 0.005);

  /* Two draws per double, high half first. */
  SimPcg a, b;
  sim_pcg_seed(&a, 5u, 6u);
  b = a;
  double x = sim_pcg_double(&a);
  guint64 hi = sim_pcg_next(&b);
  guint64 lo = sim_pcg_next(&b);
  g_assert_cmpfloat(x, ==, (double)(((hi << 32) | lo) >> 11) / 9007199254740992.0);
  g_assert_cmpuint(a.state, ==, b.state);
}

int main(int argc, char **argv)
{
  g_test_init(&argc, &argv, NULL);
  g_test_add_func("/pcg/demo-round1", test_demo_round1);
  static const guint64 steps[] = { 0, 1, 2, 3, 63, 64, 1000, 65537 };
  for (guint i = 0; i < G_N_ELEMENTS(steps); i++) {
    g_autofree char *name =
      g_strdup_printf("/pcg/advance-matches-steps/%" G_GUINT64_FORMAT, steps[i]);
    g_test_add_data_func(name, GSIZE_TO_POINTER(steps[i]),
                         test_advance_matches_steps);
  }
  g_test_add_func("/pcg/advance-backwards", test_advance_backwards);
  g_test_add_func("/pcg/seed-stream", test_seed_stream);
  g_test_add_func("/pcg/entity-deterministic", test_entity_deterministic);
  g_test_add_func("/pcg/entity-distinct", test_entity_distinct);
  g_test_add_func("/pcg/bounded-range", test_bounded_range);
  g_test_add_func("/pcg/bounded-uniform", test_bounded_uniform);
  g_test_add_func("/pcg/double", test_double);
  return g_test_run();
}
