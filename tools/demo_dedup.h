/* The dedup scene of `grit demo` (issue 17): hedged and retried
 * CreateGroup calls against two replicas sharing one grit-dedup store.
 * Also built into test/dedup/test_dedup_scene, which runs it against
 * PostgreSQL. */
#ifndef GRIT_TOOLS_DEMO_DEDUP_H
#define GRIT_TOOLS_DEMO_DEDUP_H

#include <stddef.h>

/* Run the scene with |n| calls per policy on the in-process store, or on
 * PostgreSQL when |pg_conninfo| is not NULL. Prints a report; returns 0
 * when every call succeeded, requests sent exceed the calls, the domain
 * has exactly one row per call and no duplicate ran. */
int demo_scene_dedup(size_t n, const char *pg_conninfo);

#endif
