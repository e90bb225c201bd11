/*
 * commands.h - every `gmsim <name>` subcommand is cmd_<name>(argc, argv) in
 * its own file cli/cmd_<name>.c (git's builtin/ pattern). argv[0] is the
 * subcommand name. Return value is the process exit code: 0 success,
 * 1 error (message already on stderr), 2 usage error.
 */
#ifndef GM_COMMANDS_H
#define GM_COMMANDS_H

int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_gen(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_fit(int argc, char **argv);
int cmd_tune(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_fidelity(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_scale(int argc, char **argv);
int cmd_export(int argc, char **argv);

#endif
