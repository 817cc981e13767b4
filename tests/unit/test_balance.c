/*
 * test_balance.c - unit tests for the placement decisions and the table
 * they act on (src/cluster/balance.h, meta.h): the first placement puts
 * each group on R distinct nodes with every node holding as many as the
 * others or one fewer, and spreads preferred leaders the same way; a node
 * that joins gets its share and a decommissioned one loses every replica,
 * one change per group, never below R; a node that does not answer takes
 * nothing; a drained node keeps its replicas and loses its preferences;
 * the table refuses what would break it (a stale target, a removal of a
 * node still used, an address another node holds).
 *
 * How: a table made with the commands the metadata leader proposes,
 * applied with rn_meta_apply; a loop that plays the driver (each move
 * recorded as the group's new target, then its configuration reported as
 * reached, as its leader would) until balance.h asks for nothing more,
 * bounded in steps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/balance.h"
#include "cluster/meta.h"

/* Applies one command held in b to m and returns its result. */
static rn_meta_result apply(rn_meta *m, rn_buf *b) {
    rn_meta_result res[4];
    int n = rn_meta_apply(m, b->data, b->len, res, 4);
    rn_buf_free(b);
    assert_true(n == 1 || n == -1);
    return res[0];
}

static rn_meta_node node(unsigned id) {
    rn_meta_node n = {.id = (uint8_t)id, .state = RN_NODE_ACTIVE};
    snprintf(n.raft, sizeof n.raft, "127.0.0.1:%u", 7000 + id);
    snprintf(n.url, sizeof n.url, "http://127.0.0.1:%u", 4400 + id);
    return n;
}

/* A table of nodes 1..n and groups placed on replicas of them. */
static void make_table(rn_meta *m, unsigned n, unsigned groups, unsigned replicas) {
    rn_meta_node nodes[RN_META_MAX_NODES];
    uint8_t ids[RN_META_MAX_NODES];
    for (unsigned i = 0; i < n; i++) {
        nodes[i] = node(i + 1);
        ids[i] = (uint8_t)(i + 1);
    }
    rn_meta_group first[64];
    rn_balance_initial(replicas, groups, ids, n, first);
    rn_meta_init_empty(m);
    rn_buf b = {0};
    rn_meta_cmd_init(&b, replicas, groups, nodes, n, first);
    assert_int_equal(apply(m, &b), RN_META_OK);
}

/* Replicas of node id over every group's target; leaderships preferred. */
static unsigned held(const rn_meta *m, unsigned id) {
    unsigned n = 0;
    for (unsigned g = 0; g < m->groups; g++)
        n += (unsigned)rn_meta_in_target(&m->group[g], id);
    return n;
}

static unsigned preferred(const rn_meta *m, unsigned id) {
    unsigned n = 0;
    for (unsigned g = 0; g < m->groups; g++)
        n += m->group[g].leader == id;
    return n;
}

/* Each group's target: r distinct nodes, ascending. */
static void assert_targets(const rn_meta *m, unsigned r) {
    for (unsigned g = 0; g < m->groups; g++) {
        const rn_meta_group *gr = &m->group[g];
        assert_int_equal(gr->n_target, r);
        for (unsigned k = 1; k < gr->n_target; k++)
            assert_true(gr->target[k - 1] < gr->target[k]);
    }
}

/* The group's configuration reported as its target, all voters, at a
 * newer term (as its leader reports it once a move is done). */
static void reach(rn_meta *m, unsigned g) {
    const rn_meta_group *gr = &m->group[g];
    rn_meta_member mem[RN_META_MAX_REPLICAS];
    for (unsigned k = 0; k < gr->n_target; k++)
        mem[k] = (rn_meta_member){gr->target[k], 2};
    rn_buf b = {0};
    rn_meta_cmd_group_members(&b, g, gr->members_term + 1, mem, gr->n_target);
    assert_int_equal(apply(m, &b), RN_META_OK);
}

/* Plays the driver: each move balance.h asks for is recorded and reached,
 * until it asks for none; returns the moves made (at most `bound`). */
static unsigned settle(rn_meta *m, const uint8_t alive[256], unsigned bound) {
    unsigned moves = 0, g, n;
    uint8_t ids[RN_META_MAX_REPLICAS];
    while (rn_balance_move(m, alive, &g, ids, &n)) {
        assert_true(++moves <= bound);
        const rn_meta_group *gr = &m->group[g];
        unsigned in = 0, out = 0;
        for (unsigned k = 0; k < n; k++)
            in += !rn_meta_in_target(gr, ids[k]);
        for (unsigned k = 0; k < gr->n_target; k++) {
            int kept = 0;
            for (unsigned j = 0; j < n; j++)
                kept |= ids[j] == gr->target[k];
            out += !kept;
        }
        assert_true(in <= 1 && out <= 1 && in + out >= 1); /* one node in, at most one out */
        rn_buf b = {0};
        rn_meta_cmd_group_target(&b, g, gr->epoch, ids, n);
        assert_int_equal(apply(m, &b), RN_META_OK);
        assert_true(rn_meta_group_moving(&m->group[g]));
        reach(m, g);
        assert_false(rn_meta_group_moving(&m->group[g]));
    }
    return moves;
}

static void all_alive(uint8_t alive[256]) {
    memset(alive, 1, 256);
}

static void test_the_first_placement_is_even(void **state) {
    (void)state;
    rn_meta m;
    make_table(&m, 6, 6, 3);
    assert_targets(&m, 3);
    for (unsigned id = 1; id <= 6; id++) {
        assert_int_equal(held(&m, id), 3); /* half the groups each */
        assert_int_equal(preferred(&m, id), 1);
    }
    for (unsigned g = 0; g < 6; g++)
        assert_true(rn_meta_in_target(&m.group[g], m.group[g].leader));
    rn_meta_free(&m);

    make_table(&m, 6, 16, 3); /* 48 replicas: 8 each; 16 leaderships: 2 or 3 */
    for (unsigned id = 1; id <= 6; id++) {
        assert_int_equal(held(&m, id), 8);
        assert_in_range(preferred(&m, id), 2, 3);
    }
    rn_meta_free(&m);

    make_table(&m, 2, 4, 3); /* fewer nodes than replicas: every node */
    assert_targets(&m, 2);
    assert_int_equal(rn_balance_replicas(&m), 2);
    rn_meta_free(&m);
}

static void test_the_same_inputs_give_the_same_placement(void **state) {
    (void)state;
    rn_meta_group a[16], b[16];
    const uint8_t ids[] = {1, 2, 3, 4, 5, 6};
    rn_balance_initial(3, 16, ids, 6, a);
    rn_balance_initial(3, 16, ids, 6, b);
    for (unsigned g = 0; g < 16; g++) {
        assert_int_equal(a[g].n_target, b[g].n_target);
        assert_memory_equal(a[g].target, b[g].target, a[g].n_target);
        assert_int_equal(a[g].leader, b[g].leader);
    }
}

static void test_a_joining_node_gets_its_share(void **state) {
    (void)state;
    rn_meta m;
    uint8_t alive[256];
    all_alive(alive);
    make_table(&m, 6, 16, 3);
    assert_int_equal(settle(&m, alive, 0), 0); /* balanced already: nothing moves */
    rn_meta_node seven = node(7);
    rn_buf b = {0};
    rn_meta_cmd_node_add(&b, 7, seven.raft, seven.url, "");
    assert_int_equal(apply(&m, &b), RN_META_OK);
    unsigned moves = settle(&m, alive, 16);
    assert_true(moves >= 6); /* 48 replicas over 7 nodes: node 7 takes 6 or 7 */
    assert_targets(&m, 3);
    unsigned lo = 99, hi = 0;
    for (unsigned id = 1; id <= 7; id++) {
        lo = held(&m, id) < lo ? held(&m, id) : lo;
        hi = held(&m, id) > hi ? held(&m, id) : hi;
    }
    assert_true(hi - lo <= 1);
    rn_meta_free(&m);
}

static void test_a_decommissioned_node_loses_every_replica_first(void **state) {
    (void)state;
    rn_meta m;
    uint8_t alive[256];
    all_alive(alive);
    make_table(&m, 6, 6, 3);
    rn_buf b = {0};
    rn_meta_cmd_node_state(&b, 2, RN_NODE_REMOVED); /* still used: refused */
    assert_int_equal(apply(&m, &b), RN_META_NOT_ALLOWED);
    rn_meta_cmd_node_state(&b, 2, RN_NODE_LEAVING);
    assert_int_equal(apply(&m, &b), RN_META_OK);
    /* the first moves take node 2 out, and each keeps 3 replicas */
    unsigned g, n;
    uint8_t ids[RN_META_MAX_REPLICAS];
    assert_true(rn_balance_move(&m, alive, &g, ids, &n));
    assert_true(rn_meta_in_target(&m.group[g], 2));
    assert_int_equal(n, 3);
    settle(&m, alive, 12);
    assert_targets(&m, 3);
    assert_int_equal(held(&m, 2), 0);
    assert_int_equal(preferred(&m, 2), 0);
    rn_meta_cmd_node_state(&b, 2, RN_NODE_REMOVED);
    assert_int_equal(apply(&m, &b), RN_META_OK);
    /* an id removed is never used again; its addresses may be */
    rn_meta_node two = node(2);
    rn_meta_cmd_node_add(&b, 2, two.raft, two.url, "");
    assert_int_equal(apply(&m, &b), RN_META_NODE_REMOVED);
    rn_meta_cmd_node_add(&b, 8, two.raft, two.url, "");
    assert_int_equal(apply(&m, &b), RN_META_OK);
    rn_meta_node three = node(3);
    rn_meta_cmd_node_add(&b, 9, three.raft, "http://127.0.0.1:1", ""); /* node 3's Raft address */
    assert_int_equal(apply(&m, &b), RN_META_CONFLICT);
    rn_meta_free(&m);
}

static void test_a_node_that_does_not_answer_takes_nothing(void **state) {
    (void)state;
    rn_meta m;
    uint8_t alive[256];
    all_alive(alive);
    make_table(&m, 3, 4, 3);
    rn_meta_node four = node(4);
    rn_buf b = {0};
    rn_meta_cmd_node_add(&b, 4, four.raft, four.url, "");
    assert_int_equal(apply(&m, &b), RN_META_OK);
    alive[4] = 0;
    assert_int_equal(settle(&m, alive, 0), 0);
    assert_int_equal(held(&m, 4), 0);
    alive[4] = 1;
    assert_true(settle(&m, alive, 8) >= 2); /* 12 replicas over 4 nodes: 3 each */
    assert_int_equal(held(&m, 4), 3);
    rn_meta_free(&m);
}

static void test_a_stale_target_is_refused(void **state) {
    (void)state;
    rn_meta m;
    make_table(&m, 4, 2, 3);
    const rn_meta_group *gr = &m.group[0];
    uint8_t ids[] = {1, 2, 4};
    if (rn_meta_in_target(gr, 4))
        ids[2] = 3;
    rn_buf b = {0};
    rn_meta_cmd_group_target(&b, 0, gr->epoch + 1, ids, 3);
    assert_int_equal(apply(&m, &b), RN_META_STALE);
    rn_meta_cmd_group_target(&b, 0, gr->epoch, ids, 3);
    rn_meta_result r = apply(&m, &b);
    assert_true(r == RN_META_OK || r == RN_META_UNCHANGED);
    rn_meta_free(&m);
}

static void test_a_drained_node_loses_its_preferences(void **state) {
    (void)state;
    rn_meta m;
    uint8_t alive[256];
    all_alive(alive);
    make_table(&m, 3, 6, 3);
    assert_int_equal(preferred(&m, 1), 2);
    rn_buf b = {0};
    rn_meta_cmd_node_drain(&b, 1, 1);
    assert_int_equal(apply(&m, &b), RN_META_OK);
    unsigned g, leader, steps = 0;
    while (rn_balance_leader(&m, alive, NULL, &g, &leader)) {
        assert_true(++steps <= 6);
        assert_int_not_equal(leader, 1);
        rn_meta_cmd_group_leader(&b, g, leader);
        assert_int_equal(apply(&m, &b), RN_META_OK);
    }
    assert_int_equal(preferred(&m, 1), 0);
    assert_int_equal(preferred(&m, 2) + preferred(&m, 3), 6);
    assert_int_equal(held(&m, 1), 6); /* its replicas stay */
    rn_meta_cmd_node_drain(&b, 1, 0);
    assert_int_equal(apply(&m, &b), RN_META_OK);
    while (rn_balance_leader(&m, alive, NULL, &g, &leader)) {
        assert_true(++steps <= 12);
        rn_meta_cmd_group_leader(&b, g, leader);
        assert_int_equal(apply(&m, &b), RN_META_OK);
    }
    assert_in_range(preferred(&m, 1), 1, 2); /* it leads its share again */
    rn_meta_free(&m);
}

/* A group whose preferred node died keeps the leader its election gave
 * it, when that one may lead, rather than a second leadership change. */
static void test_a_dead_leaders_groups_keep_their_new_leaders(void **state) {
    (void)state;
    rn_meta m;
    uint8_t alive[256];
    all_alive(alive);
    make_table(&m, 3, 6, 3);
    alive[1] = 0;
    uint8_t leading[6];
    unsigned g, leader, dead_led = 0;
    for (unsigned k = 0; k < 6; k++) {
        unsigned was = m.group[k].leader;
        leading[k] = (uint8_t)(was != 1 ? was : 0);
    }
    /* without the leaders known, the load decides: note its choice */
    unsigned chosen[6] = {0};
    rn_meta copy = m;
    copy.group = malloc(6 * sizeof *copy.group);
    memcpy(copy.group, m.group, 6 * sizeof *copy.group);
    while (rn_balance_leader(&copy, alive, NULL, &g, &leader)) {
        chosen[g] = leader;
        copy.group[g].leader = (uint8_t)leader;
    }
    free(copy.group);
    for (unsigned k = 0; k < 6; k++)
        if (m.group[k].leader == 1) { /* elected: the node the load would not pick */
            leading[k] = (uint8_t)(chosen[k] == 2 ? 3 : 2);
            dead_led++;
        }
    assert_int_equal(dead_led, 2);
    rn_buf b = {0};
    unsigned steps = 0;
    while (rn_balance_leader(&m, alive, leading, &g, &leader)) {
        assert_true(++steps <= 2);
        assert_int_equal(leader, leading[g]);
        rn_meta_cmd_group_leader(&b, g, leader);
        assert_int_equal(apply(&m, &b), RN_META_OK);
    }
    assert_int_equal(steps, 2);
    assert_int_equal(preferred(&m, 1), 0);
    rn_meta_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_first_placement_is_even),
        cmocka_unit_test(test_the_same_inputs_give_the_same_placement),
        cmocka_unit_test(test_a_joining_node_gets_its_share),
        cmocka_unit_test(test_a_decommissioned_node_loses_every_replica_first),
        cmocka_unit_test(test_a_node_that_does_not_answer_takes_nothing),
        cmocka_unit_test(test_a_stale_target_is_refused),
        cmocka_unit_test(test_a_drained_node_loses_its_preferences),
        cmocka_unit_test(test_a_dead_leaders_groups_keep_their_new_leaders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
