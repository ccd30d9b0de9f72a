/* sim/pcg.h -- pcg32 random numbers (PCG-XSH-RR 64/32), M.E. O'Neill 2014.
 *
 * Implemented here from the published algorithm (64-bit LCG state, odd
 * increment selecting the stream, xorshift-high then random rotation
 * output).  One stream per (seed, entity kind, entity id): adding an entity
 * never shifts another entity's draws.
 */
#ifndef SIM_PCG_H
#define SIM_PCG_H

#include <glib.h>

G_BEGIN_DECLS

typedef struct {
  guint64 state;
  guint64 inc;   /* always odd */
} SimPcg;

/* pcg32_srandom_r: seeds with initial state and stream selector. */
void sim_pcg_seed(SimPcg *rng, guint64 initstate, guint64 initseq);
/* pcg32_random_r: next 32-bit output. */
guint32 sim_pcg_next(SimPcg *rng);
/* Uniform in [0, bound) without bias (pcg32_boundedrand_r). bound > 0. */
guint32 sim_pcg_bounded(SimPcg *rng, guint32 bound);
/* Uniform double in [0, 1) with 53 random bits. */
double sim_pcg_double(SimPcg *rng);
/* Advances the generator by delta steps in O(log delta) (pcg32_advance_r). */
void sim_pcg_advance(SimPcg *rng, guint64 delta);

/* Entity kinds for stream derivation. */
typedef enum {
  SIM_PCG_GPU = 1,
  SIM_PCG_STRAGGLER = 2,
  SIM_PCG_SCRIPT = 3,
  SIM_PCG_HOLDOUT = 4,
  SIM_PCG_WORKLOAD = 5,
  SIM_PCG_USER = 16
} SimPcgKind;

/* The stream of entity (kind, id) under `seed`: a pure function of its
 * arguments (state and stream selector derived by a 64-bit mix). */
void sim_pcg_for_entity(SimPcg *rng, guint64 seed, guint32 kind, guint64 id);

/* The splitmix64 finaliser (Steele, Lea, Flood 2014; constants from
 * Stafford's "Mix13"): a bijection of 64-bit words in which every input bit
 * affects every output bit with probability close to 1/2.  The one 64-bit
 * mixer of the code base: seeds here, hash keys elsewhere (sim_mix64). */
static inline guint64 sim_splitmix64_fin(guint64 z)
{
  z = (z ^ (z >> 30u)) * G_GUINT64_CONSTANT(0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27u)) * G_GUINT64_CONSTANT(0x94d049bb133111eb);
  return z ^ (z >> 31u);
}

/* The splitmix64 increment (2^64 / golden ratio): offsets words fed to the
 * finaliser so that zero does not map to zero. */
#define SIM_SPLITMIX64_GAMMA G_GUINT64_CONSTANT(0x9e3779b97f4a7c15)

G_END_DECLS

#endif
