/* traces/profile-private.h -- what traces/profile.c shares with
 * traces/profile_nvml.c: the small CSV reader, the number parsers (errors
 * name the file, line and column) and profile construction.
 */
#ifndef TRACES_PROFILE_PRIVATE_H
#define TRACES_PROFILE_PRIVATE_H

#include "traces/profile.h"

/* Clocks above this are certainly a unit mistake (Hz or kHz). */
#define MAX_CLOCK_MHZ 100000.0

/* ---- A small CSV reader (profile.c) ---------------------------------- */

/* One logical record: its fields (owned strings) and its 1-based line. */
typedef struct {
  GPtrArray *fields;
  guint line;
} CsvRow;

typedef struct {
  const char *path;
  const char *p;     /* cursor */
  const char *end;
  guint line;        /* line of the cursor, 1-based */
} CsvReader;

/* Reads the next non-blank, non-comment record into row (fields replaced).
 * Returns FALSE at end of input (error unset) or on a syntax error (error
 * set, naming the line). */
gboolean profile_csv_next(CsvReader *r, CsvRow *row, GError **error);
/* TRUE when row has the header's n_cols fields; else FALSE with
 * PROFILE_ERROR_FORMAT "PATH:LINE: N columns, the header has M". */
gboolean profile_csv_check_width(const CsvRow *row, guint n_cols,
                                 const char *path, GError **error);

/* An empty row; clearing frees its fields. */
void profile_csv_row_init(CsvRow *row);
void profile_csv_row_clear(CsvRow *row);

/* Reads `path` into *text (caller frees it) and its header record into row
 * (initialised here; on success the caller clears it); r reads the records
 * that follow.  Errors: PROFILE_ERROR_IO, a CSV syntax error, or
 * PROFILE_ERROR_FORMAT for a file without a header line. */
gboolean profile_csv_open(const char *path, char **text, CsvReader *r,
                          CsvRow *row, GError **error);

/* Parses a finite number from s.  Errors (naming path:line, the column
 * number and name): empty, not a number, not finite. */
gboolean profile_parse_number(const char *path, guint line, guint col,
                              const char *colname, const char *s, double *out,
                              GError **error);

/* A number > 0. */
gboolean profile_parse_positive(const char *path, guint line, guint col,
                                const char *colname, const char *s,
                                double *out, GError **error);

/* A whole clock in MHz, > 0 and below MAX_CLOCK_MHZ. */
gboolean profile_parse_clock(const char *path, guint line, guint col,
                             const char *colname, const char *s, guint *out,
                             GError **error);

/* ---- Construction (profile.c) ------------------------------------------ */

/* An empty profile of `format` read from `path`. */
Profile *profile_new(const char *path, ProfileFormat format);
/* Sorts every op's points by (mem_mhz, sm_mhz). */
void profile_sort_points(Profile *p);

#endif
