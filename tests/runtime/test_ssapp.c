/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_ssapp.c -- ssapp mode's runtime (runtime/ssapp/ssapp.c) called
 * directly, the way code from the pmkit-ssapp pass calls it
 * (include/pmkit/abi.h): each FASE below is written out by hand as the pass
 * would cut it into RISEs (enter, arguments to the frame, begin; per RISE
 * the buoy -- read and RMW RISEs flip their torn bit first --, the body,
 * values that outlive the RISE in frame slots with the torn bit, a fence;
 * exit), with a crash point at the start and end of every RISE and before
 * every store (the pass's -pmkit-ssapp-crash-points=store), a recovery
 * version entered through a switch on the resume point, and a FASE table
 * registered by a constructor. Checked: frames (one per FASE, zeroed, kept);
 * where recovery resumes an interrupted FASE (SSAPP's Table 3: a read RISE
 * whose slots carry the buoy's torn bit is skipped, one interrupted before
 * its slots are written is re-executed with the slots invalidated first, a
 * write RISE is re-executed); an allocation RISE re-executed gets the block
 * it got before; an atomic RMW that took effect is not applied twice; a PM
 * lock the FASE held is held again while it resumes and released at its
 * end; a crash at every crash point of each FASE leaves it done exactly
 * once or not at all; a FASE this program lacks, or built with other
 * RISEs, is refused; misuse stops the program with its message.
 * Usage: test_ssapp [child POOL SCENARIO WHERE]
 */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "pmkit/abi.h"
#include "testutil.h"

struct root {
  uint64_t x, y, z; /* incr: y = x, x = x + 1, z = 2y */
  uint64_t counter; /* bump: one atomic add (tagged word) */
  uint64_t last;    /* bump: the value the add replaced */
  uint64_t obj;     /* push: the block it allocated */
  pmkit_mutex m;    /* locked: held over the FASE */
  uint64_t w;       /* locked: written under m */
  uint64_t g;       /* ghost, shape */
};

#define X0 41u
#define OBJ_SIZE 100000u /* a large run: no thread cache in the way */

#define ID_INCR 0x696e6372ull
#define ID_BUMP 0x62756d70ull
#define ID_PUSH 0x70757368ull
#define ID_LOCKED 0x6c6f636b6564ull
#define ID_GHOST 0x67686f7374ull /* registered only by the child */
#define ID_SHAPE 0x7368617065ull /* registered differently by each side */

#define TORN PMKIT_SSAPP_TORN
/* Frame words: 0 the buoy, 1 reserved (the program's base), then ours. */
enum { F_BUOY, F_BASE, F_R, F_FLIP, F_VAL, F_ARG };

static int crash_where; /* the child stops at crash_here(crash_where) */
static void crash_here(int where) {
  if (crash_where == where)
    _exit(PMKIT_CRASH_EXIT);
}

/* A store as the pass leaves it: a crash point before it, kept in order. */
static void st(uint64_t *w, uint64_t v) {
  __pmkit_crash_point();
  __atomic_store_n(w, v, __ATOMIC_RELAXED);
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static void rise_end(void) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  __pmkit_crash_point();
}
/* A read or RMW RISE's start: flip its torn bit, store the buoy, keep it. */
static uint64_t rise_torn(uint64_t *f, uint64_t rise) {
  __pmkit_crash_point();
  uint64_t t = (__atomic_load_n(&f[F_FLIP], __ATOMIC_RELAXED) ^ TORN) & TORN;
  st(&f[F_BUOY], rise | t);
  st(&f[F_FLIP], t);
  return t;
}
static void rise_plain(uint64_t *f, uint64_t rise) {
  __pmkit_crash_point();
  st(&f[F_BUOY], rise);
}

/* What the recovery versions saw. */
static struct {
  unsigned runs;
  uint64_t resume;
  uint64_t val_slot; /* the value slot on entry */
  int lock_held;     /* locked: m was held when it resumed */
} seen;

static void note_recovery(uint64_t *f, uint64_t resume) {
  seen.runs++;
  seen.resume = resume;
  seen.val_slot = f[F_VAL];
}

/* ---- incr(r): RISE 1 reads x, RISE 2 writes x and y, RISE 3 writes z -- */
static void incr_body(uint64_t *f, uint64_t resume) {
  struct root *r = (struct root *)(uintptr_t)f[F_R];
  switch (resume) {
  case 2:
    goto rise1;
  case 3: /* after RISE 1 */
  case 4:
    goto rise2;
  case 6:
    goto rise3;
  default:
    abort();
  }
rise1 : {
  uint64_t t = rise_torn(f, 1);
  uint64_t v = __atomic_load_n(&r->x, __ATOMIC_RELAXED);
  crash_here(1);
  st(&f[F_VAL], (v & 0xffffffffu) | t);
  crash_here(2);
  rise_end();
}
rise2 : {
  rise_plain(f, 2);
  uint64_t v = f[F_VAL] & 0xffffffffu;
  st(&r->x, v + 1);
  crash_here(3);
  st(&r->y, v);
  rise_end();
}
rise3:
  rise_plain(f, 3);
  st(&r->z, 2 * (f[F_VAL] & 0xffffffffu));
  rise_end();
  __pmkit_ssapp_exit();
}
static void incr(struct root *r) {
  uint64_t *f = __pmkit_ssapp_enter(ID_INCR, r);
  f[F_R] = (uint64_t)(uintptr_t)r;
  __pmkit_ssapp_check_ptr(r, 1);
  __pmkit_ssapp_begin();
  incr_body(f, 2);
}
static void incr_recover(uint64_t *f, uint64_t resume) {
  note_recovery(f, resume);
  incr_body(f, resume);
}

/* ---- bump(r): RISE 1 an atomic add (RMW), RISE 2 writes what it read -- */
static void bump_body(uint64_t *f, uint64_t resume) {
  struct root *r = (struct root *)(uintptr_t)f[F_R];
  switch (resume) {
  case 2:
    goto rise1;
  case 3:
  case 4:
    goto rise2;
  default:
    abort();
  }
rise1 : {
  uint64_t t = rise_torn(f, 1);
  uint64_t old = __pmkit_ssapp_rmw(&r->counter, PMKIT_SSAPP_RMW_ADD, 1, 0);
  crash_here(1);
  st(&f[F_VAL], (old & 0xffffffffu) | t);
  rise_end();
}
rise2:
  rise_plain(f, 2);
  st(&r->last, f[F_VAL] & 0xffffffffu);
  rise_end();
  __pmkit_ssapp_exit();
}
static void bump(struct root *r) {
  uint64_t *f = __pmkit_ssapp_enter(ID_BUMP, r);
  f[F_R] = (uint64_t)(uintptr_t)r;
  __pmkit_ssapp_check_ptr(r, 1);
  __pmkit_ssapp_begin();
  bump_body(f, 2);
}
static void bump_recover(uint64_t *f, uint64_t resume) {
  note_recovery(f, resume);
  bump_body(f, resume);
}

/* ---- push(r, v): RISE 1 allocates, RISE 2 fills and publishes ---------- */
static void push_body(uint64_t *f, uint64_t resume) {
  struct root *r = (struct root *)(uintptr_t)f[F_R];
  switch (resume) {
  case 2:
    goto rise1;
  case 4:
    goto rise2;
  default:
    abort();
  }
rise1:
  rise_plain(f, 1);
  if (__pmkit_ssapp_alloc(NULL, OBJ_SIZE, (void **)&f[F_VAL], 1))
    abort();
  crash_here(1);
  rise_end();
rise2 : {
  rise_plain(f, 2);
  uint64_t *o = (uint64_t *)(uintptr_t)f[F_VAL];
  st(&o[0], f[F_ARG]);
  st(&r->obj, (uint64_t)(uintptr_t)o);
  rise_end();
}
  __pmkit_ssapp_exit();
}
static void push(struct root *r, uint64_t v) {
  uint64_t *f = __pmkit_ssapp_enter(ID_PUSH, r);
  f[F_R] = (uint64_t)(uintptr_t)r;
  f[F_ARG] = v;
  __pmkit_ssapp_check_ptr(r, 1);
  __pmkit_ssapp_begin();
  push_body(f, 2);
}
static void push_recover(uint64_t *f, uint64_t resume) {
  note_recovery(f, resume);
  push_body(f, resume);
}

/* ---- locked(r): RISE 1 takes m, RISE 2 writes under it ----------------- */
static int recovering;
static void locked_body(uint64_t *f, uint64_t resume) {
  struct root *r = (struct root *)(uintptr_t)f[F_R];
  switch (resume) {
  case 2:
    goto rise1;
  case 4:
    goto rise2;
  default:
    abort();
  }
rise1:
  rise_plain(f, 1);
  __pmkit_ssapp_lock(&r->m, PMKIT_SSAPP_LOCK_MUTEX);
  rise_end();
rise2:
  rise_plain(f, 2);
  if (recovering)
    seen.lock_held = pmkit_mutex_trylock(&r->m) == PMKIT_E_BUSY;
  st(&r->w, 1);
  crash_here(1);
  rise_end();
  __pmkit_ssapp_exit();
}
static void locked(struct root *r) {
  uint64_t *f = __pmkit_ssapp_enter(ID_LOCKED, r);
  f[F_R] = (uint64_t)(uintptr_t)r;
  __pmkit_ssapp_check_ptr(r, 1);
  __pmkit_ssapp_begin();
  locked_body(f, 2);
  __pmkit_ssapp_unlock(&r->m, PMKIT_SSAPP_LOCK_MUTEX); /* after the FASE */
}
static void locked_recover(uint64_t *f, uint64_t resume) {
  note_recovery(f, resume);
  recovering = 1;
  locked_body(f, resume);
  recovering = 0;
}

/* ---- ghost / shape: one write RISE ------------------------------------- */
static void one_write_body(uint64_t *f, uint64_t resume) {
  struct root *r = (struct root *)(uintptr_t)f[F_R];
  if (resume != 2)
    abort();
  rise_plain(f, 1);
  st(&r->g, r->g + 1);
  crash_here(1);
  rise_end();
  __pmkit_ssapp_exit();
}
static void one_write(uint64_t id, struct root *r) {
  uint64_t *f = __pmkit_ssapp_enter(id, r);
  f[F_R] = (uint64_t)(uintptr_t)r;
  __pmkit_ssapp_begin();
  one_write_body(f, 2);
}
static void one_write_recover(uint64_t *f, uint64_t resume) {
  note_recovery(f, resume);
  one_write_body(f, resume);
}

/* ---- the FASE tables ---------------------------------------------------- */
static const uint32_t val_slot[] = {F_VAL * 8};
static const struct __pmkit_ssapp_rise incr_rises[] = {
    {PMKIT_RISE_READ, 0, 1, 0},
    {PMKIT_RISE_WRITE, 1, 0, 0},
    {PMKIT_RISE_WRITE, 1, 0, 0}};
static const struct __pmkit_ssapp_rise bump_rises[] = {
    {PMKIT_RISE_RMW, 0, 1, 0}, {PMKIT_RISE_WRITE, 1, 0, 0}};
static const struct __pmkit_ssapp_rise push_rises[] = {
    {PMKIT_RISE_ALLOC, 0, 0, 0}, {PMKIT_RISE_WRITE, 0, 0, 0}};
static const struct __pmkit_ssapp_rise locked_rises[] = {
    {PMKIT_RISE_CALL, 0, 0, 0}, {PMKIT_RISE_WRITE, 0, 0, 0}};
static const struct __pmkit_ssapp_rise write_rise[] = {
    {PMKIT_RISE_WRITE, 0, 0, 0}};
static const struct __pmkit_ssapp_rise call_rise[] = {
    {PMKIT_RISE_CALL, 0, 0, 0}}; /* another kind of RISE */

static const struct __pmkit_ssapp_fase fases[] = {
    {ID_INCR, "incr", incr_recover, 64, 3, incr_rises, val_slot, 0, 0, NULL},
    {ID_BUMP, "bump", bump_recover, 64, 2, bump_rises, val_slot, 0, 0, NULL},
    {ID_PUSH, "push", push_recover, 64, 2, push_rises, val_slot, 0, 0, NULL},
    {ID_LOCKED, "locked", locked_recover, 64, 2, locked_rises, val_slot, 0, 0,
     NULL},
};
static const struct __pmkit_ssapp_fase ghost_fase[] = {
    {ID_GHOST, "ghost", one_write_recover, 64, 1, write_rise, val_slot, 0, 0,
     NULL}};
static const struct __pmkit_ssapp_fase shape_child[] = {
    {ID_SHAPE, "shape", one_write_recover, 64, 1, write_rise, val_slot, 0, 0,
     NULL}};
static const struct __pmkit_ssapp_fase shape_parent[] = {
    {ID_SHAPE, "shape", one_write_recover, 64, 1, call_rise, val_slot, 0, 0,
     NULL}};

__attribute__((constructor)) static void register_fases(void) {
  __pmkit_ssapp_register(fases, sizeof fases / sizeof *fases);
}

/* ---- helpers ------------------------------------------------------------ */

static const char *path;

static void setup(void) {
  pmkit_pool *p;
  struct root *r;
  unlink(path);
  CHECK_OK(pmkit_pool_create(path, 8 << 20, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *r, (void **)&r));
  r->x = X0;
  CHECK_OK(pmkit_pool_close(p));
}

static pmkit_pool *open_root(struct root **r) {
  pmkit_pool *p;
  CHECK_OK(pmkit_pool_open(path, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof **r, (void **)r));
  return p;
}

static int run_child(const char *scenario, int where, const char *var,
                     const char *val) {
  char w[16];
  snprintf(w, sizeof w, "%d", where);
  return test_run_self(var, val,
                       (const char *[]){"child", path, scenario, w, NULL});
}

static int child(const char *pool, const char *scenario, int where) {
  pmkit_pool *p;
  struct root *r;
  crash_where = where;
  if (pmkit_pool_open(pool, NULL, &p) || pmkit_root(p, sizeof *r, (void **)&r))
    return 3;
  if (!strcmp(scenario, "incr"))
    incr(r);
  else if (!strcmp(scenario, "bump"))
    bump(r);
  else if (!strcmp(scenario, "push"))
    push(r, 77);
  else if (!strcmp(scenario, "locked"))
    locked(r);
  else if (!strcmp(scenario, "ghost")) {
    __pmkit_ssapp_register(ghost_fase, 1);
    one_write(ID_GHOST, r);
  } else if (!strcmp(scenario, "shape")) {
    __pmkit_ssapp_register(shape_child, 1);
    one_write(ID_SHAPE, r);
  } else
    return 4;
  return pmkit_pool_close(p) ? 3 : 0;
}

static void crash_mid_fase(const char *scenario, int where) {
  setup();
  int st = run_child(scenario, where, NULL, NULL);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
}

/* The frame of slot 0's FASE in flight (ssapp.c: ext word 3 of the
 * mode's four is its pool offset). */
static uint64_t *inflight_frame(pmkit_pool *p) {
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_adopt(p, 0, &c));
  uint64_t off = pmkit_ctx_ext(c)[PMKIT_EXT_SSAPP + 3];
  CHECK_OK(pmkit_ctx_release(c));
  CHECK(off != 0);
  return (uint64_t *)((char *)pmkit_pool_base(p) + off);
}

static pmkit_ctx_state slot0(pmkit_pool *p) {
  pmkit_ctx_state s;
  CHECK_OK(pmkit_ctx_peek(p, 0, &s));
  return s;
}

/* ---- cases -------------------------------------------------------------- */

/* A run without crashes: the effects, the frame (zeroed at first, one per
 * FASE, the same on the next call, buoy at the last RISE), an idle slot,
 * the tagged counter; ssapp mode set the eADR domain. */
static void frames_and_effects(void) {
  setup();
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(pmkit_domain() == PMKIT_DOMAIN_EADR);
  uint64_t *f = __pmkit_ssapp_enter(ID_INCR, r);
  for (unsigned i = 0; i < 8; i++)
    CHECK(f[i] == 0);
  f[F_R] = (uint64_t)(uintptr_t)r;
  __pmkit_ssapp_check_ptr(r, 1);
  __pmkit_ssapp_begin();
  pmkit_ctx *c;
  CHECK_OK(pmkit_ctx_get(p, &c));
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_ACTIVE);
  CHECK(pmkit_fase_tag(c) == ID_INCR);
  incr_body(f, 2);
  CHECK(pmkit_ctx_state_of(c) == PMKIT_CTX_IDLE);
  CHECK(r->x == X0 + 1 && r->y == X0 && r->z == 2 * X0);
  CHECK(f[F_BUOY] == 3);
  CHECK(f[F_VAL] == (X0 | TORN) && f[F_FLIP] == TORN);
  incr(r); /* the torn bit alternates */
  CHECK(r->x == X0 + 2 && f[F_VAL] == X0 + 1 && f[F_FLIP] == 0);
  /* The frame of the FASE in flight or last run: ext word 3 of the mode's
   * (ssapp.c). incr's is kept; bump gets one of its own. */
  uint64_t *ext = pmkit_ctx_ext(c);
  CHECK(ext[PMKIT_EXT_SSAPP + 3] == pmkit_off(p, f));
  bump(r);
  CHECK(ext[PMKIT_EXT_SSAPP + 3] != pmkit_off(p, f));
  bump(r);
  CHECK(pmkit_ssapp_value(r->counter) == 2 && r->last == 1);
  CHECK(r->counter >> 48 != 0); /* tagged by the slot and a number */
  push(r, 5);
  CHECK(pmkit_usable_size(p, (void *)(uintptr_t)r->obj) >= OBJ_SIZE);
  CHECK(((uint64_t *)(uintptr_t)r->obj)[0] == 5);
  locked(r);
  CHECK(r->w == 1);
  CHECK_OK(pmkit_mutex_trylock(&r->m)); /* released after the FASE */
  pmkit_mutex_unlock(&r->m);
  CHECK(pmkit_recover(p) == 0);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash in RISE 1 before its slot is written: it is re-executed (resume
 * 2) with its slot invalidated first. */
static void resume_read_rise_again(void) {
  crash_mid_fase("incr", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(slot0(p) == PMKIT_CTX_ACTIVE);
  uint64_t *f = inflight_frame(p);
  CHECK(f[F_BUOY] == (1 | TORN) && f[F_VAL] == 0);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.runs == 1 && seen.resume == 2);
  CHECK(seen.val_slot == PMKIT_SSAPP_INVALID);
  CHECK(r->x == X0 + 1 && r->y == X0 && r->z == 2 * X0);
  CHECK(slot0(p) == PMKIT_CTX_IDLE);
  CHECK(pmkit_recover(p) == 0 && seen.runs == 1);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash after RISE 1's slot: RISE 1 is skipped (resume 3), its value
 * used. */
static void resume_after_read_rise(void) {
  crash_mid_fase("incr", 2);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  uint64_t *f = inflight_frame(p);
  CHECK(f[F_BUOY] == (1 | TORN) && f[F_VAL] == (X0 | TORN));
  /* Were RISE 1 re-executed it would read this x: it must not. */
  r->x = 1000;
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.resume == 3 && seen.val_slot == (X0 | TORN));
  CHECK(r->x == X0 + 1 && r->y == X0 && r->z == 2 * X0);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash inside write RISE 2 (x written, y not): it is re-executed
 * (resume 4) from the slot's value, not from the x it already wrote. */
static void resume_write_rise(void) {
  crash_mid_fase("incr", 3);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->x == X0 + 1 && r->y == 0);
  CHECK(inflight_frame(p)[F_BUOY] == 2);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.resume == 4);
  CHECK(r->x == X0 + 1 && r->y == X0 && r->z == 2 * X0);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash after the RMW took effect, before its slot: recovery sees its tag
 * on the word, writes the slot from the value it replaced, and continues
 * after it (resume 3): the counter is added to once. */
static void rmw_not_twice(void) {
  crash_mid_fase("bump", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(pmkit_ssapp_value(r->counter) == 1);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.resume == 3);
  CHECK(pmkit_ssapp_value(r->counter) == 1 && r->last == 0);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash after the allocation, before the block is published: RISE 1 is
 * re-executed and gets the same block (the journal); nothing leaks. */
static void alloc_same_block(void) {
  crash_mid_fase("push", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  uint64_t *f = inflight_frame(p);
  uint64_t got = f[F_VAL];
  CHECK(got != 0 && r->obj == 0);
  CHECK(f[F_BUOY] == (1 | 1ull << 32)); /* RISE 1, journal entry 1 */
  pmkit_pool_info before, after;
  CHECK_OK(pmkit_pool_stat(p, &before));
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.resume == 2);
  CHECK(r->obj == got && ((uint64_t *)(uintptr_t)got)[0] == 77);
  CHECK_OK(pmkit_pool_stat(p, &after));
  CHECK(after.blocks_used == before.blocks_used);
  CHECK_OK(pmkit_pool_check(p));
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash holding a PM lock: recovery holds it again while the FASE
 * resumes, and releases it at its end. */
static void lock_held_again(void) {
  crash_mid_fase("locked", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->w == 1);
  memset(&seen, 0, sizeof seen);
  CHECK(pmkit_recover(p) == 1);
  CHECK(seen.resume == 4 && seen.lock_held == 1);
  CHECK(r->w == 1);
  CHECK_OK(pmkit_mutex_trylock(&r->m));
  pmkit_mutex_unlock(&r->m);
  CHECK_OK(pmkit_pool_close(p));
}

/* A FASE this program does not have, and one whose RISEs differ from the
 * crashed program's: recovery refuses both (PMKIT_E_STATE) and leaves them
 * in flight. */
static void refused(void) {
  crash_mid_fase("ghost", 1);
  struct root *r;
  pmkit_pool *p = open_root(&r);
  CHECK(r->g == 1);
  CHECK_RC(pmkit_recover(p), PMKIT_E_STATE);
  CHECK(strstr(pmkit_errormsg(), "not in this program"));
  CHECK(slot0(p) == PMKIT_CTX_ACTIVE && r->g == 1);
  CHECK_OK(pmkit_pool_close(p));

  crash_mid_fase("shape", 1);
  __pmkit_ssapp_register(shape_parent, 1);
  p = open_root(&r);
  CHECK_RC(pmkit_recover(p), PMKIT_E_STATE);
  CHECK(strstr(pmkit_errormsg(), "RISEs differ"));
  CHECK(slot0(p) == PMKIT_CTX_ACTIVE && r->g == 1);
  CHECK_OK(pmkit_pool_close(p));
}

/* A crash at every crash point of each FASE: done exactly once or not at
 * all, and a FASE found in flight is always completed. */
static void sweep(const char *scenario, unsigned *points_out,
                  unsigned *inflight_out) {
  char report[1100];
  snprintf(report, sizeof report, "%s.report", path);
  setup();
  int st = run_child(scenario, 0, "PMKIT_CRASH_REPORT", report);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  FILE *f = fopen(report, "r");
  unsigned long long points = 0;
  CHECK(f && fscanf(f, "%llu", &points) == 1);
  fclose(f);
  unlink(report);
  CHECK(points > 5);
  /* Where a run without a crash allocates push's block: the same in every
   * fresh pool (at its own base). */
  struct root *r;
  pmkit_pool *p = open_root(&r);
  uint64_t obj = pmkit_off(p, (void *)(uintptr_t)r->obj);
  CHECK_OK(pmkit_pool_close(p));
  unsigned inflight = 0;
  for (unsigned long long at = 1; at <= points; at++) {
    setup();
    char v[32];
    snprintf(v, sizeof v, "%llu", at);
    st = run_child(scenario, 0, "PMKIT_CRASH_AT", v);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == PMKIT_CRASH_EXIT);
    p = open_root(&r);
    pmkit_ctx_state s = slot0(p);
    int n = pmkit_recover(p);
    CHECK(n == (s == PMKIT_CTX_ACTIVE));
    CHECK(slot0(p) == PMKIT_CTX_IDLE);
    inflight += (unsigned)n;
    int done;
    if (!strcmp(scenario, "incr")) {
      done = r->x == X0 + 1;
      CHECK(done ? r->y == X0 && r->z == 2 * X0
                 : r->x == X0 && r->y == 0 && r->z == 0);
    } else if (!strcmp(scenario, "bump")) {
      done = pmkit_ssapp_value(r->counter) == 1;
      CHECK(done ? r->last == 0 : r->counter == 0 && r->last == 0);
    } else {
      done = r->obj != 0;
      CHECK(!done || pmkit_off(p, (void *)(uintptr_t)r->obj) == obj);
      CHECK(!done || ((uint64_t *)(uintptr_t)r->obj)[0] == 77);
    }
    if (!done)
      CHECK(s == PMKIT_CTX_IDLE); /* in flight: completed */
    CHECK_OK(pmkit_pool_check(p));
    CHECK_OK(pmkit_pool_close(p));
  }
  CHECK(inflight > 0);
  *points_out = (unsigned)points;
  *inflight_out = inflight;
}

static void every_crash_point(void) {
  static const char *const names[] = {"incr", "bump", "push"};
  for (unsigned i = 0; i < 3; i++) {
    unsigned points, inflight;
    sweep(names[i], &points, &inflight);
    printf("every_crash_point: %s: %u points, %u recovered in flight\n",
           names[i], points, inflight);
  }
}

/* Run fn in a child with its own pool and stderr captured: its wait
 * status and what it printed. */
static pmkit_pool *misuse_pool;
static struct root *misuse_root;
static void (*misuse_fn)(void);
static void misuse_child(void) {
  const char *own = test_pool_path("ssapp-misuse");
  if (pmkit_pool_create(own, 4 << 20, NULL, &misuse_pool) ||
      pmkit_root(misuse_pool, sizeof *misuse_root, (void **)&misuse_root))
    _exit(3);
  unlink(own);
  misuse_fn();
}
static int run_stopping(void (*fn)(void), char *out, size_t n) {
  misuse_fn = fn;
  return test_run_stopping(misuse_child, out, n);
}

static void nested(void) {
  uint64_t *f = __pmkit_ssapp_enter(ID_INCR, misuse_root);
  f[F_R] = (uint64_t)(uintptr_t)misuse_root;
  __pmkit_ssapp_begin();
  __pmkit_ssapp_enter(ID_BUMP, misuse_root);
}
static void volatile_arg(void) {
  static uint64_t dram;
  __pmkit_ssapp_enter(ID_INCR, misuse_root);
  __pmkit_ssapp_check_ptr(&dram, 2);
}
static void unregistered(void) { __pmkit_ssapp_enter(12345, misuse_root); }

/* Misuse stops the program (abort) with a message naming what. */
static void misuse_stops(void) {
  char out[1024];
  int st = run_stopping(nested, out, sizeof out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strstr(out, "pmkit ssapp: FASE incr: called inside another FASE"));
  st = run_stopping(volatile_arg, out, sizeof out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  CHECK(strstr(out, "cannot begin: argument 2 points to volatile memory"));
  st = run_stopping(unregistered, out, sizeof out);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
  /* named by its id, not by the thread's last FASE (once it was) */
  CHECK(strstr(out, "pmkit ssapp: FASE ?: id 0x3039 not registered"));
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "child"))
    return child(argv[2], argv[3], atoi(argv[4]));
  path = test_pool_path("ssapp");
  TEST_CASE(frames_and_effects);
  TEST_CASE(resume_read_rise_again);
  TEST_CASE(resume_after_read_rise);
  TEST_CASE(resume_write_rise);
  TEST_CASE(rmw_not_twice);
  TEST_CASE(alloc_same_block);
  TEST_CASE(lock_held_again);
  TEST_CASE(refused);
  TEST_CASE(every_crash_point);
  TEST_CASE(misuse_stops);
  unlink(path);
  return test_summary();
}
