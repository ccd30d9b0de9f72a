/* models/numeric.c -- a 3x3 linear solve, small NNLS and Nelder-Mead
 * (contracts in models/numeric.h).
 */
#include "models/numeric.h"

#include <math.h>
#include <string.h>

/* Solves the n x n system a x = b (n <= 3) by Gaussian elimination with
 * partial pivoting.  FALSE when (nearly) singular relative to the
 * diagonal. */
gboolean num_solve_small(double a[3][3], double b[3], guint n, double x[3])
{
  double m[3][4];
  double scale = 0;
  for (guint i = 0; i < n; i++) {
    for (guint j = 0; j < n; j++)
      m[i][j] = a[i][j];
    m[i][n] = b[i];
    scale = MAX(scale, fabs(a[i][i]));
  }
  if (!(scale > 0))
    return FALSE;
  for (guint c = 0; c < n; c++) {
    guint piv = c;
    for (guint r = c + 1; r < n; r++)
      if (fabs(m[r][c]) > fabs(m[piv][c]))
        piv = r;
    if (fabs(m[piv][c]) < 1e-12 * scale)
      return FALSE;
    if (piv != c)
      for (guint j = 0; j <= n; j++) {
        double tmp = m[c][j];
        m[c][j] = m[piv][j];
        m[piv][j] = tmp;
      }
    for (guint r = c + 1; r < n; r++) {
      double f = m[r][c] / m[c][c];
      for (guint j = c; j <= n; j++)
        m[r][j] -= f * m[c][j];
    }
  }
  for (guint i = n; i-- > 0;) {
    double s = m[i][n];
    for (guint j = i + 1; j < n; j++)
      s -= m[i][j] * x[j];
    x[i] = s / m[i][i];
  }
  return TRUE;
}

/* NNLS with n <= 3 variables given the normal equations (G = X'X, g = X'y,
 * yy = y'y): the optimum is the unconstrained solution on its passive set,
 * so every subset is tried.  Returns the minimal objective ||y - X c||^2;
 * c receives the solution (zeros outside the passive set).  Returns -1 when
 * no subset is solvable. */
double num_nnls_small(double G[3][3], const double g[3], double yy, guint n,
                      double c[3])
{
  double best = 0;
  gboolean found = FALSE;
  for (guint mask = 0; mask < (1u << n); mask++) {
    guint idx[3], k = 0;
    for (guint i = 0; i < n; i++)
      if (mask & (1u << i))
        idx[k++] = i;
    double a[3][3], b[3], x[3] = {0, 0, 0};
    for (guint i = 0; i < k; i++) {
      for (guint j = 0; j < k; j++)
        a[i][j] = G[idx[i]][idx[j]];
      b[i] = g[idx[i]];
    }
    if (k > 0 && !num_solve_small(a, b, k, x))
      continue;
    gboolean feasible = TRUE;
    for (guint i = 0; i < k; i++)
      if (x[i] < 0)
        feasible = FALSE;
    if (!feasible)
      continue;
    double full[3] = {0, 0, 0};
    for (guint i = 0; i < k; i++)
      full[idx[i]] = x[i];
    /* ||y - Xc||^2 = yy - 2 c'g + c'Gc */
    double obj = yy;
    for (guint i = 0; i < n; i++) {
      obj -= 2 * full[i] * g[i];
      for (guint j = 0; j < n; j++)
        obj += full[i] * G[i][j] * full[j];
    }
    obj = MAX(obj, 0); /* rounding */
    if (!found || obj < best - 1e-15 * fabs(yy)) {
      found = TRUE;
      best = obj;
      memcpy(c, full, sizeof full);
    }
  }
  return found ? best : -1;
}

static void clamp_box(double *x, guint n, const double *lo, const double *hi)
{
  if (lo == NULL)
    return;
  for (guint k = 0; k < n; k++)
    x[k] = CLAMP(x[k], lo[k], hi[k]);
}

static void swap_vertex(double *a, double *b, guint n)
{
  for (guint k = 0; k < n; k++) {
    double t = a[k];
    a[k] = b[k];
    b[k] = t;
  }
}

double num_nelder_mead(NumObjective fn, void *data, guint n, double *x,
                       const double *step, const double *lo,
                       const double *hi, guint max_iter, const double *tol)
{
  double p[NUM_NM_MAX + 1][NUM_NM_MAX], f[NUM_NM_MAX + 1];
  gsize row = n * sizeof(double);
  g_return_val_if_fail(n > 0 && n <= NUM_NM_MAX, NAN);
  for (guint i = 0; i <= n; i++) {
    for (guint k = 0; k < n; k++)
      p[i][k] = x[k] + (i == k + 1 ? step[k] : 0);
    clamp_box(p[i], n, lo, hi);
    f[i] = fn(p[i], data);
  }
  for (guint it = 0; it < max_iter; it++) {
    /* Order: 0 best, n worst. */
    for (guint a = 0; a <= n; a++)
      for (guint b = a + 1; b <= n; b++)
        if (f[b] < f[a]) {
          double tf = f[a];
          f[a] = f[b];
          f[b] = tf;
          swap_vertex(p[a], p[b], n);
        }
    double c[NUM_NM_MAX], r[NUM_NM_MAX];
    for (guint k = 0; k < n; k++) {
      double s = 0;
      for (guint i = 0; i < n; i++)
        s += p[i][k];
      c[k] = s / n;
      r[k] = c[k] + (c[k] - p[n][k]);
    }
    clamp_box(r, n, lo, hi);
    double fr = fn(r, data);
    if (fr < f[0]) {
      double e[NUM_NM_MAX];
      for (guint k = 0; k < n; k++)
        e[k] = c[k] + 2 * (c[k] - p[n][k]);
      clamp_box(e, n, lo, hi);
      double fe = fn(e, data);
      if (fe < fr) {
        memcpy(p[n], e, row);
        f[n] = fe;
      } else {
        memcpy(p[n], r, row);
        f[n] = fr;
      }
    } else if (fr < f[n - 1]) {
      memcpy(p[n], r, row);
      f[n] = fr;
    } else {
      double q[NUM_NM_MAX];
      for (guint k = 0; k < n; k++)
        q[k] = c[k] + 0.5 * (p[n][k] - c[k]);
      double fq = fn(q, data);
      if (fq < f[n]) {
        memcpy(p[n], q, row);
        f[n] = fq;
      } else {
        for (guint i = 1; i <= n; i++) {
          for (guint k = 0; k < n; k++)
            p[i][k] = p[0][k] + 0.5 * (p[i][k] - p[0][k]);
          f[i] = fn(p[i], data);
        }
      }
    }
    if (tol != NULL) {
      gboolean done = TRUE;
      for (guint k = 0; k < n && done; k++)
        done = fabs(p[n][k] - p[0][k]) < tol[k];
      if (done)
        break;
    }
  }
  guint best = 0;
  for (guint i = 1; i <= n; i++)
    if (f[i] < f[best])
      best = i;
  memcpy(x, p[best], row);
  return f[best];
}
