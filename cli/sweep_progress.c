/* cli/sweep_progress.c -- the progress line of js.sweep: one line on
 * stderr, rewritten in place ("\r" ... "\033[K"), with the points finished
 * of the total, the failed and skipped ones, the rate of this run and the
 * time left at that rate; the final report ends the line.  The engine
 * (run/sweep_pool.c) decides when to report (at most every 0.2 s).
 */
#include "cli/sweep_progress.h"
#include "run/sweep.h"

#include <stdio.h>

static void print_progress(const SweepProgress *p, gpointer data)
{
  double secs = p->elapsed_s;
  double rate = secs > 0 ? p->ran / secs : 0;
  guint left = p->total - p->finished;
  char eta[32] = "";
  if (rate > 0 && left > 0) {
    guint s = (guint)(left / rate + 0.5);
    g_snprintf(eta, sizeof eta, ", %um%02us left", s / 60, s % 60);
  }
  fprintf(stderr, "\r%s %s: %u/%u points (%u failed, %u skipped), %.1f/s%s\033[K%s",
          "js.sweep", p->table, p->finished, p->total, p->failed, p->skipped,
          rate, eta, p->final ? "\n" : "");
  fflush(stderr);
}

void cli_sweep_progress_install(JsSession *s)
{
  s->sweep_progress = print_progress;
  s->sweep_progress_data = NULL;
}
