/* tests/testresults.h -- reading results tables back in the C tests.
 *
 * test_read_rows reads every row of a table (res_table_read) and fails the
 * test on an error; test_cell finds a column in one of those rows and fails
 * the test when the row has none.
 */
#ifndef TESTS_TESTRESULTS_H
#define TESTS_TESTRESULTS_H

#include <glib.h>
#include <string.h>

#include "io/results.h"

/* Every row of `table` in the results file `path` (each row a GPtrArray
 * of ResValue, as res_table_read returns it).  Caller frees. */
static inline GPtrArray *test_read_rows(const char *path, const char *table)
{
  g_autoptr(GError) error = NULL;
  GPtrArray *rows = res_table_read(path, table, &error);
  g_assert_no_error(error);
  g_assert_nonnull(rows);
  return rows;
}

/* The value of column `name` in a row of test_read_rows (borrowed from the
 * row). */
static inline const ResValue *test_cell(GPtrArray *row, const char *name)
{
  for (guint i = 0; i < row->len; i++) {
    const ResValue *v = g_ptr_array_index(row, i);
    if (strcmp(v->name, name) == 0)
      return v;
  }
  g_error("no column '%s' in row", name);
  return NULL;
}

#endif
