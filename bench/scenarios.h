/*
 * scenarios.h — the benchmark scenarios. Each start function begins the
 * scenario's asynchronous work on bn_loop from the options in bn_o, adds its
 * figures to the report and calls bn_run_stop() when finished.
 */
#ifndef BN_SCENARIOS_H
#define BN_SCENARIOS_H

void bn_writes_start(void);
void bn_fanout_start(void);
void bn_catchup_start(void);
void bn_longpoll_start(void);
void bn_bootstrap_start(void);
void bn_create_start(void);
void bn_fill_scenario_start(void);
void bn_replay_scenario_start(void);
void bn_tokens_start(void);

#endif
