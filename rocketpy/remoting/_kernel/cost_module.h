/* take_cost(), for a module built with ROCKETPY_COUNT_COST (cost.h): the counters since the last
 * take, as {"probes": n, "moves": n, "bytes": n}, then zeroed.  A shipped build has no take_cost
 * (COST_METHODS is empty), so a test can tell which build it holds. */
#ifndef ROCKETPY_COST_MODULE_H
#define ROCKETPY_COST_MODULE_H

#include "cost.h"

#ifdef ROCKETPY_COUNT_COST
static PyObject *take_cost(PyObject *self, PyObject *unused) {
    PyObject *counts = Py_BuildValue("{s:K,s:K,s:K}",
                                     "probes", (unsigned long long)rk_cost[COST_PROBES],
                                     "moves", (unsigned long long)rk_cost[COST_MOVES],
                                     "bytes", (unsigned long long)rk_cost[COST_BYTES]);
    if (counts)
        memset(rk_cost, 0, sizeof rk_cost);
    return counts;
}
#define COST_METHODS \
    {"take_cost", take_cost, METH_NOARGS, "take_cost(): the cost counters since the last take"},
#else
#define COST_METHODS
#endif

#endif
