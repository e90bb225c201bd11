/*
 * gen_serve.h - `gmsim gen llm-serve`: an LLM inference service's trace
 * (traces/gen_serve.h); cmd_gen.c dispatches to it.
 */
#ifndef GM_CLI_GEN_SERVE_H
#define GM_CLI_GEN_SERVE_H

/* argv as cmd_gen got it; command: the command line for the trace. Returns the exit code. */
int gm_gen_serve_cmd(int argc, char **argv, const char *command);

#endif
