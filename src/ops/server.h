/*
 * server.h — `runnel serve`: configuration, start, recovery, serving and
 * graceful shutdown of one server process.
 */
#ifndef RN_SERVER_H
#define RN_SERVER_H

/* Runs the server with the arguments after "serve"; returns the process's
 * exit code (0 after a clean shutdown, 1 when it could not start, 2 for a
 * bad configuration). */
int rn_serve(int argc, char **argv);

#endif
