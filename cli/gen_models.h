/*
 * gen_models.h - the training workloads of `gmsim gen` (gpt, llama,
 * resnet50: traces/gen_gpt.h, gen_llama.h, gen_resnet.h), one option
 * parser for the three; cmd_gen.c dispatches to them.
 */
#ifndef GM_CLI_GEN_MODELS_H
#define GM_CLI_GEN_MODELS_H

/* `gmsim gen NAME ...` for NAME gpt, llama or resnet50; argv as cmd_gen
 * got it; command: the command line for the trace. Returns the exit code. */
int gm_gen_model_cmd(const char *name, int argc, char **argv, const char *command);
/* 1 when name is one of them. */
int gm_gen_model_known(const char *name);

#endif
