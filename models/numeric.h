/* models/numeric.h -- small dense numerics: a 3x3 linear solve, NNLS with
 * up to 3 variables, and a box-bounded Nelder-Mead.
 *
 * Used by the model fit (models/fit.c) and the calibration tests
 * (tests/test-gpu.c).  No allocation, no errors: a singular system is a
 * FALSE return, an unsolvable NNLS -1.  All results are deterministic
 * (fixed operation order), so a fit reproduces bit for bit.
 */
#ifndef MODELS_NUMERIC_H
#define MODELS_NUMERIC_H

#include <glib.h>

G_BEGIN_DECLS

/* Solves the n x n system a x = b (n <= 3) by Gaussian elimination with
 * partial pivoting.  FALSE when (nearly) singular relative to the
 * diagonal; a and b are not modified. */
gboolean num_solve_small(double a[3][3], double b[3], guint n, double x[3]);

/* NNLS with n <= 3 variables given the normal equations (G = X'X, g = X'y,
 * yy = y'y): the optimum is the unconstrained solution on its passive set,
 * so every subset is tried.  Returns the minimal objective ||y - X c||^2;
 * c receives the solution (zeros outside the passive set).  Returns -1 when
 * no subset is solvable. */
double num_nnls_small(double G[3][3], const double g[3], double yy, guint n,
                      double c[3]);

#define NUM_NM_MAX 8

/* An objective of n parameters. */
typedef double (*NumObjective)(const double *x, void *data);

/* Nelder-Mead over n <= NUM_NM_MAX parameters; x in/out.  The first simplex
 * is x and x + step[k] e_k.  With lo and hi (both or neither), the first
 * simplex, reflections and expansions are clamped into the box.  Runs at
 * most max_iter iterations; with tol, stops when the newest vertex is
 * within tol[k] of the best in every coordinate k.  Returns the objective
 * at the best vertex, which x receives. */
double num_nelder_mead(NumObjective fn, void *data, guint n, double *x,
                       const double *step, const double *lo,
                       const double *hi, guint max_iter, const double *tol);

G_END_DECLS

#endif
