/* wait_policy.h — how idle OpenMP worker threads wait between parallel regions
 * (`--wait-policy auto|spin|passive`), chosen before libgomp starts them.
 *
 * libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded, before
 * main runs, so the choice is made by setting them and re-running the program once
 * (execv of /proc/self/exe). Why it matters: a step of many small nodes opens hundreds
 * of parallel regions; a sleeping worker costs 10-15 us to wake on this kind of VM
 * (18% of a 48-layer MLP's step), a spinning one costs nothing on an idle machine but
 * starves the work of others (and its own team) on a busy one: 2-5x slower there. */
#ifndef OT_CLI_WAIT_POLICY_H
#define OT_CLI_WAIT_POLICY_H

#include <stdbool.h>

typedef enum ot_wait_policy {
    OT_WAIT_AUTO,    /* spin when the CPUs the threads need were idle before the start, else passive */
    OT_WAIT_SPIN,    /* spin a bounded while (GOMP_SPINCOUNT=OT_WAIT_SPIN_COUNT), then sleep */
    OT_WAIT_PASSIVE, /* sleep at once (OMP_WAIT_POLICY=PASSIVE) */
} ot_wait_policy;

/* Iterations libgomp spins before it sleeps under "spin" (each a pause instruction):
 * about 50-100 us here, long enough to bridge the serial gaps between one node's region
 * and the next (the whole gain on an idle machine: 3,000 and 300,000 measured alike on
 * mlp6x512 and chain48), short enough that a worker waiting for a descheduled
 * teammate gives its CPU back soon (30,000 was 3-5x slower than passive at load 6). */
#define OT_WAIT_SPIN_COUNT "3000"

/* The environment variable the re-run carries: the policy applied and why, e.g.
 * "spin (auto: 0.02 of 2 CPUs busy before the start)". Set by
 * ot_cli_apply_wait_policy; read by train's set-up summary. */
#define OT_WAIT_APPLIED_ENV "ONNXTRAIN_WAIT_POLICY_APPLIED"

/* "auto", "spin" or "passive" into *out; false on anything else. */
bool ot_wait_policy_parse(const char *text, ot_wait_policy *out);

/* Applies the policy the command line asks for (--wait-policy, default auto) unless the
 * environment already decides it (OMP_WAIT_POLICY or GOMP_SPINCOUNT set: the user's
 * choice; ONNXTRAIN_NO_REEXEC=1; or this is the re-run). Commands that run no kernel
 * (plan, info, help) get passive without measuring. Re-runs the program with the
 * policy's variables; returns only when it does not (already applied, or execv
 * failed: then the program goes on with libgomp's default). */
void ot_cli_apply_wait_policy(int argc, char **argv);

/* Watches step times under "spin" for a machine that got busy after the start (auto
 * measured only then): the median step of each window of OT_WAIT_WATCH_WINDOW steps
 * against the fastest window's. A single slow step (a checkpoint, validation) moves
 * no median. */
#define OT_WAIT_WATCH_WINDOW 10
typedef struct ot_wait_watch {
    bool active;  /* the workers spin: set from OT_WAIT_APPLIED_ENV */
    bool hinted;  /* said once; never again */
    double t_prev; /* the previous step's end, seconds; < 0 before the first */
    double fastest; /* the fastest window's median step, seconds; 0 before one */
    double window[OT_WAIT_WATCH_WINDOW];
    int n;
} ot_wait_watch;

void ot_wait_watch_init(ot_wait_watch *w);
/* Forget the previous step's end (after a pause that is no step: validation). */
void ot_wait_watch_pause(ot_wait_watch *w);
/* A step ended at `now` (seconds, monotonic). Returns the slowdown (current window's
 * median over the fastest's) the first time it reaches 2.5x, else 0: the caller then
 * suggests --wait-policy passive once. */
double ot_wait_watch_step(ot_wait_watch *w, double now);

#endif
