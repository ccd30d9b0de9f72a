/* cli/policy_spec.h -- a DVFS policy written on the command line.
 *
 *   NAME[:KEY=VALUE[,KEY=VALUE]...]
 *
 * NAME is any policy js.policy has (max, auto, fixed, powercap, iteration,
 * pass, kernel, perseus, envpipe, zeus, plan) and the keys are its Lua
 * arguments, checked against the same table (models/dvfs/policy.h:
 * DvfsPolicyClass.keys and .args): `perseus:slowdown=0.05`,
 * `kernel:slowdown=0.01,granularity=op`, `zeus:eta=0.7`.  Booleans are
 * true or false.  `fixed:SM` and `fixed:SM:MEM` (MHz) stay as before;
 * `plan:FILE` (or `plan:plan=FILE`) replays a Perseus N.sched.json as
 * js.policy.plan{ plan = FILE } does.  `custom` needs a Lua function and is
 * refused with a pointer to js.simulate.
 */
#ifndef CLI_POLICY_SPEC_H
#define CLI_POLICY_SPEC_H

#include <glib.h>
#include "models/dvfs/policy.h"
#include "traces/sched.h"

/* Parses spec into *p.  A plan file is read into *plan (caller frees; p
 * borrows its clocks).  FALSE with an error naming the policy, the key
 * and what it accepts. */
gboolean cli_policy_parse(const char *spec, DvfsPolicy *p, SchedPlan **plan,
                          GError **error);

#define CLI_POLICY_ERROR (cli_policy_error_quark())
GQuark cli_policy_error_quark(void);

#endif
