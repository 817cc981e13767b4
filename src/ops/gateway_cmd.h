/*
 * gateway_cmd.h — `runnel gateway` (the standalone gateway) and `runnel
 * gateway key new`.
 */
#ifndef RN_OPS_GATEWAY_CMD_H
#define RN_OPS_GATEWAY_CMD_H

/* Runs the command with the arguments after "gateway"; returns the exit
 * code. */
int rn_gateway_cmd(int argc, char **argv);

#endif
