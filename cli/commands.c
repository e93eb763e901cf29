/* commands.c — the table of subcommands. Add a command here and in cli.h. */
#include <stddef.h>

#include "cli.h"

const ot_cli_command ot_cli_commands[] = {
    {"info", ot_cmd_info},
    {NULL, NULL},
};
