/*
 * backup_cmd.h — the backup and restore subcommands of the runnel command:
 * `runnel backup` (backup_cmd.c) asks a running server for a backup,
 * `runnel restore` (restore.c) builds a data directory from one.
 */
#ifndef RN_OPS_BACKUP_CMD_H
#define RN_OPS_BACKUP_CMD_H

/* argv[0] is the subcommand's name. They return the process's exit code. */
int rn_backup_cmd(int argc, char **argv);
int rn_restore_cmd(int argc, char **argv);

#endif
