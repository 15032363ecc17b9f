/* Cost counters: the steps a stranger's input can multiply, counted so that tests bound growth
 * by counting, never by a clock (tests/costbuild.py builds them; tests/test_*_complexity and the
 * cost tests of the kernel read them at doubling sizes).
 *
 * Compiled in only when the build defines ROCKETPY_COUNT_COST (CFLAGS=-DROCKETPY_COUNT_COST, a
 * test build); the shipped build has no counter and COST() is nothing, so it pays nothing.
 *
 *   COST(PROBES, n)  n entries looked at to find one: a hash index's slots, keys compared one by
 *                    one, a list walked
 *   COST(MOVES, n)   n entries written or moved: index writes, a table rebuilt or cleared, a
 *                    heap's sift steps, an array compacted
 *   COST(BYTES, n)   n bytes copied, moved or searched: appends, a buffer's compaction, an
 *                    array's growth (counted as a copy of what it held), memchr
 *
 * Whoever writes a loop over something a stranger sizes counts its steps here, in the loop.
 * One array per extension module, for the whole process, neither per call nor thread-safe: a
 * test takes the counts (take_cost(), cost_module.h) around work it does in one thread. */
#ifndef ROCKETPY_COST_H
#define ROCKETPY_COST_H

#include <stdint.h>

enum { COST_PROBES, COST_MOVES, COST_BYTES, COST_KINDS };

#ifdef ROCKETPY_COUNT_COST
extern uint64_t rk_cost[COST_KINDS];
#define COST(kind, n) ((void)(rk_cost[COST_##kind] += (uint64_t)(n)))
#else
#define COST(kind, n) ((void)0)
#endif

#endif
