/* sim/pcg.c -- pcg32 (PCG-XSH-RR 64/32), written from M.E. O'Neill, "PCG: A
 * Family of Simple Fast Space-Efficient Statistically Good Algorithms for
 * Random Number Generation" (2014).
 *
 * The generator is a 64-bit linear congruential generator
 *
 *     state' = state * A + inc      (mod 2^64),  A = 6364136223846793005
 *
 * whose *old* state is permuted into a 32-bit output: an xorshift of the high
 * bits folds the well-mixed top of the word into bits 27..58, and the top
 * five bits choose a rotation of that 32-bit value.  `inc` must be odd; each
 * odd value is a distinct stream (2^63 of them), each of period 2^64.
 *
 * Jump-ahead uses F. Brown, "Random Number Generation with Arbitrary
 * Stride" (1994): k LCG steps compose to one affine map
 * state -> state * A^k + C_k, built by square-and-multiply in O(log k).
 * Because the arithmetic is mod 2^64, advancing by 2^64 - k steps is the
 * same as going back k steps.
 *
 * Per-entity streams: sim_pcg_for_entity hashes (seed, kind, id) with the
 * splitmix64 finaliser (a bijective 64-bit mixer with full avalanche) into
 * an initial state and a stream selector.  The result depends on nothing
 * but those three numbers, so adding entities, reordering them or running
 * them on other threads never changes any entity's draws.
 */
#include "sim/pcg.h"

#include <math.h>

/* The LCG multiplier of pcg32 (Knuth's MMIX multiplier). */
#define PCG_MULT G_GUINT64_CONSTANT(6364136223846793005)

/* One LCG step; the output function works on the state *before* it. */
static inline void pcg_step(SimPcg *rng)
{
  rng->state = rng->state * PCG_MULT + rng->inc;
}

/* XSH-RR: xorshift high, then rotate right by the top five bits. */
static inline guint32 pcg_output(guint64 old)
{
  guint32 xorshifted = (guint32)(((old >> 18u) ^ old) >> 27u);
  guint32 rot = (guint32)(old >> 59u);
  /* (-rot) & 31 keeps the left shift in range when rot == 0. */
  return (xorshifted >> rot) | (xorshifted << ((-rot) & 31u));
}

/* Same as pcg32_srandom_r: the stream is fixed first (inc = 2*initseq + 1,
 * so the top bit of initseq is dropped), then initstate is mixed in between
 * two steps so that nearby seeds do not give nearby first outputs. */
void sim_pcg_seed(SimPcg *rng, guint64 initstate, guint64 initseq)
{
  g_return_if_fail(rng != NULL);
  rng->state = 0u;
  rng->inc = (initseq << 1u) | 1u;
  pcg_step(rng);
  rng->state += initstate;
  pcg_step(rng);
}

guint32 sim_pcg_next(SimPcg *rng)
{
  guint64 old = rng->state;
  pcg_step(rng);
  return pcg_output(old);
}

/* Rejection sampling as in pcg32_boundedrand_r.  Of the 2^32 outputs, the
 * lowest (2^32 mod bound) are discarded so that the rest split evenly into
 * `bound` residue classes.  2^32 mod bound is computed in 32-bit arithmetic
 * as (2^32 - bound) mod bound, i.e. (-bound) % bound.  At most half the
 * outputs are rejected (bound just above 2^31), so the expected number of
 * draws is below 2. */
guint32 sim_pcg_bounded(SimPcg *rng, guint32 bound)
{
  g_return_val_if_fail(bound > 0, 0);
  guint32 threshold = (guint32)(-bound) % bound;
  for (;;) {
    guint32 r = sim_pcg_next(rng);
    if (r >= threshold)
      return r % bound;
  }
}

/* Two draws, the first one the high half; the top 53 of those 64 bits scaled
 * by 2^-53 give every double k * 2^-53, k in [0, 2^53), with equal
 * probability.  1.0 is never returned. */
double sim_pcg_double(SimPcg *rng)
{
  guint64 hi = sim_pcg_next(rng);
  guint64 lo = sim_pcg_next(rng);
  guint64 bits = ((hi << 32u) | lo) >> 11u;
  return ldexp((double)bits, -53);
}

/* Brown's algorithm.  Invariant: after processing the low i bits of delta,
 * (acc_mult, acc_plus) is the affine map of (delta mod 2^i) steps and
 * (cur_mult, cur_plus) the map of 2^i steps.  Doubling a map (m, p) gives
 * (m^2, (m + 1) p); appending it to the accumulator gives
 * (acc_mult m, acc_plus m + p). */
void sim_pcg_advance(SimPcg *rng, guint64 delta)
{
  guint64 cur_mult = PCG_MULT;
  guint64 cur_plus = rng->inc;
  guint64 acc_mult = 1u;
  guint64 acc_plus = 0u;

  while (delta > 0) {
    if (delta & 1u) {
      acc_mult *= cur_mult;
      acc_plus = acc_plus * cur_mult + cur_plus;
    }
    cur_plus = (cur_mult + 1u) * cur_plus;
    cur_mult *= cur_mult;
    delta >>= 1u;
  }
  rng->state = acc_mult * rng->state + acc_plus;
}

/* The mixer and its increment: sim/pcg.h. */
#define pcg_mix64 sim_splitmix64_fin
#define PCG_GAMMA SIM_SPLITMIX64_GAMMA

/* Chains the mixer over seed, kind and id: each stage is a bijection of its
 * input word, so for a fixed (seed, kind) distinct ids give distinct keys,
 * and the two outputs drawn from the key (state, stream) use different
 * offsets so that they are not trivially related. */
void sim_pcg_for_entity(SimPcg *rng, guint64 seed, guint32 kind, guint64 id)
{
  g_return_if_fail(rng != NULL);
  guint64 key = pcg_mix64(seed + PCG_GAMMA);
  key = pcg_mix64(key ^ ((guint64)kind * PCG_GAMMA + PCG_GAMMA));
  key = pcg_mix64(key ^ id);
  guint64 initstate = pcg_mix64(key + 2u * PCG_GAMMA);
  guint64 initseq = pcg_mix64(key + 3u * PCG_GAMMA);
  sim_pcg_seed(rng, initstate, initseq);
}
