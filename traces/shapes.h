/* traces/shapes.h -- the work of a PyTorch operator from its recorded input
 * shapes (Kineto cpu_op "Input Dims" and "Input type", profiles taken with
 * record_shapes=True).
 *
 * The importer (traces/kineto.c) collects each cpu_op's inputs into a
 * TraceShapeInputs while the JSON streams past; trace_shape_work() turns
 * them into FLOPs and DRAM bytes with the formulas of traces/shapes.c, and
 * the builder (traces/import.c) hands that work to the operator's kernel.
 */
#ifndef TRACES_SHAPES_H
#define TRACES_SHAPES_H

#include <glib.h>

G_BEGIN_DECLS

#define TRACE_SHAPE_MAX_INPUTS 8 /* inputs kept per operator */
#define TRACE_SHAPE_MAX_RANK 8   /* dimensions kept per input */

/* One recorded input.  A tensor input has a dtype (elem > 0) and a list of
 * dims; a Scalar, an int[] argument or a missing optional input has
 * elem == 0.  A TensorList (aten::cat) is recorded by newer profilers as a
 * list of member dim lists: list is set and list_numel sums the members. */
typedef struct {
  guint8 rank;           /* dims recorded (may exceed TRACE_SHAPE_MAX_RANK:
                            only the first ones are kept) */
  guint8 elem;           /* bytes per element from "Input type", 0: none */
  guint8 bad;            /* a dim was not a non-negative integer, or nested
                            deeper than a TensorList */
  guint8 list;           /* a TensorList */
  gint64 dims[TRACE_SHAPE_MAX_RANK];
  double numel;          /* product of every dim (1 for rank 0) */
  double list_numel;     /* TensorList: sum of the members' numel */
} TraceShapeInput;

typedef struct {
  guint n;               /* inputs recorded (at most TRACE_SHAPE_MAX_INPUTS
                            are stored; n counts them all) */
  guint n_types;         /* "Input type" entries seen */
  gboolean malformed;    /* "Input Dims" was not a list of lists */
  TraceShapeInput in[TRACE_SHAPE_MAX_INPUTS];
} TraceShapeInputs;

/* What trace_shape_work() concluded. */
typedef enum {
  TRACE_SHAPE_NONE = 0,  /* not an operator we price, or no shapes recorded
                            (e.g. a TensorList without member dims) */
  TRACE_SHAPE_OK,        /* work filled in */
  TRACE_SHAPE_BAD        /* shapes recorded but unusable: wrong rank,
                            non-numeric dims, inner dims that disagree */
} TraceShapeResult;

/* The work of one operator call. */
typedef struct {
  double flops;          /* floating-point operations */
  double bytes;          /* DRAM bytes: every input read once, the output
                            written once */
  guint8 klass;          /* SimOpClass the operator implies */
  guint8 elem;           /* bytes per element of its main input (the
                            precision its math runs at) */
} TraceOpWork;

/* The operator index of an op name ("aten::mm", ...), or -1 when the name
 * is not one traces/shapes.c prices.  Exact match. */
gint trace_shape_operator(const char *name);

/* The work of operator `op` (from trace_shape_operator(), >= 0) on `in`.
 * TRACE_SHAPE_OK fills *out; otherwise *out is untouched. */
TraceShapeResult trace_shape_work(gint op, const TraceShapeInputs *in,
                                  TraceOpWork *out);

G_END_DECLS

#endif
