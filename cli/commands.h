/* cli/commands.h -- CLI subcommands implemented next to the features they
 * expose.  Each takes the arguments after its name and returns the exit
 * status (0 ok, 1 user error, 2 usage error), printing its own messages. */
#ifndef LUA_COMMANDS_H
#define LUA_COMMANDS_H

int js_cmd_trace(int argc, char **argv);     /* lua/trace.c */
int js_cmd_validate(int argc, char **argv);  /* lua/validate.c */
int js_cmd_bench(const char *self, int argc, char **argv); /* cli/bench.c */

#endif
