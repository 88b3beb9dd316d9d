#ifndef HX_SIMULATE_CMD_H
#define HX_SIMULATE_CMD_H

/* `hexic simulate PLAN.json FILE...`: re-simulates a plan a person edited,
 * after checking it is valid for the model and cluster. argv[0] is "simulate". */
int hx_simulate_command(int argc, char **argv);

#endif
