/*
 * test_list.c - unit tests for the intrusive list (src/util/list.h).
 *
 * How: elements embedding a node are linked at both ends and removed from
 * the head, the middle and the tail; after each step the list is walked
 * both ways and compared with the expected order. A walk that saves the
 * next pointer removes the node it visits.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "util/list.h"

typedef struct {
    int value;
    rn_list_node node;
} item;

/* Checks that l holds exactly the values want[0..n), in order, both ways. */
static void check(const rn_list *l, const int *want, size_t n) {
    size_t i = 0;
    for (rn_list_node *p = l->first; p; p = p->next, i++) {
        assert_true(i < n);
        assert_int_equal(rn_list_entry(p, item, node)->value, want[i]);
    }
    assert_int_equal(i, n);
    for (rn_list_node *p = l->last; p; p = p->prev) {
        assert_true(i > 0);
        assert_int_equal(rn_list_entry(p, item, node)->value, want[--i]);
    }
    assert_int_equal(i, 0);
    assert_int_equal(rn_list_empty(l), n == 0);
}

static void test_zeroed_list_is_empty(void **state) {
    (void)state;
    rn_list l = {0};
    check(&l, NULL, 0);
}

static void test_push_and_remove(void **state) {
    (void)state;
    item it[4] = {{.value = 0}, {.value = 1}, {.value = 2}, {.value = 3}};
    rn_list l = {0};
    rn_list_push_back(&l, &it[1].node);
    rn_list_push_front(&l, &it[0].node);
    rn_list_push_back(&l, &it[2].node);
    rn_list_push_back(&l, &it[3].node);
    check(&l, (int[]){0, 1, 2, 3}, 4);
    rn_list_remove(&l, &it[2].node); /* middle */
    check(&l, (int[]){0, 1, 3}, 3);
    assert_null(it[2].node.prev);
    assert_null(it[2].node.next);
    rn_list_remove(&l, &it[0].node); /* head */
    check(&l, (int[]){1, 3}, 2);
    rn_list_remove(&l, &it[3].node); /* tail */
    check(&l, (int[]){1}, 1);
    rn_list_remove(&l, &it[1].node); /* the only one */
    check(&l, NULL, 0);
    rn_list_push_front(&l, &it[2].node); /* a removed node links again */
    check(&l, (int[]){2}, 1);
}

static void test_walk_removing_the_visited_node(void **state) {
    (void)state;
    item it[5];
    rn_list l = {0};
    for (int i = 0; i < 5; i++) {
        it[i] = (item){.value = i};
        rn_list_push_back(&l, &it[i].node);
    }
    int seen = 0;
    for (rn_list_node *p = l.first, *next; p; p = next) {
        next = p->next;
        if (rn_list_entry(p, item, node)->value % 2 == 0)
            rn_list_remove(&l, p);
        seen++;
    }
    assert_int_equal(seen, 5);
    check(&l, (int[]){1, 3}, 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zeroed_list_is_empty),
        cmocka_unit_test(test_push_and_remove),
        cmocka_unit_test(test_walk_removing_the_visited_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
