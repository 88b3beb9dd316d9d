/* placeholder: replaced by its owner */
#include "../passes/passes.h"
#include "simulate_cmd.h"
int hx_simulate_command(int argc, char **argv) { (void)argc; (void)argv; return 70; }
