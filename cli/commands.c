/* commands.c — the table of subcommands. Add a command here and in cli.h. */
#include <stddef.h>

#include "cli.h"

const ot_cli_command ot_cli_commands[] = {
    {"info", ot_cmd_info},
    {"eval", ot_cmd_eval},
    {"verify", ot_cmd_verify},
    {"plan", ot_cmd_plan},
    {"grad", ot_cmd_grad},
    {"train", ot_cmd_train},
    {"report", ot_cmd_report},
    {"bench", ot_cmd_bench},
    {NULL, NULL},
};
