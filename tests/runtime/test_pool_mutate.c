/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_pool_mutate.c -- every tool refuses a pool it cannot trust. A base
 * pool holds the heapwalk workload (published blocks of all sizes, small and
 * large, plus unreachable leaks); each of ~440 mutations alters its metadata
 * (header, state page, context slots, crafted journals, chunk table, chunk
 * headers, bitmaps, zeroed ranges, truncation, extension), never the blocks'
 * contents. Each
 * mutated pool goes, as a fresh copy and in a child process with a time
 * limit, through:
 *   info    open for inspection, pmkit_pool_stat
 *   check   open for inspection, pmkit_pool_check; if it says consistent,
 *           the pool is then used (open, root, every published block
 *           verified, new blocks allocated): damage is a silent acceptance
 *   gc      open, pmkit_pool_gc; if it succeeds, every published block
 *           (reachable from the valid root) must still be there, intact
 *   open    open and pmkit_root, then the same use; damage counts against
 *           open (and against check too if check would have passed)
 *   verify  the same with PMKIT_POOL_VERIFY: no corrupt pool may pass
 *   repair  pmkit_pool_repair; if it succeeds, the full check must pass and
 *           the use must find every published block intact
 * The test fails on any crash, hang or silent acceptance, on gc or repair
 * losing a published block, and on damage after an open that pmkit_pool_check
 * would not have caught, and on any corrupt pool an open with
 * PMKIT_POOL_VERIFY accepts. A plain open validates in time proportional to
 * the chunk table: a cleared bitmap bit of a live block is invisible to it,
 * and only the full check (which walks what the root reaches, as
 * PMKIT_POOL_VERIFY does) sees it; the table printed at the end counts such
 * cases separately.
 * Usage: test_pool_mutate [-v]
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "../../runtime/core/internal.h"
#include "heapwalk.h"

#define POOL_SIZE (4u << 20)

enum { OP_INFO, OP_CHECK, OP_GC, OP_OPEN, OP_VERIFY, OP_REPAIR, NOPS };
static const char *op_name[NOPS] = {"info", "check",  "gc",
                                    "open", "verify", "repair"};

/* Child exit statuses. */
enum {
  R_ACCEPT = 0,   /* accepted; the use found nothing wrong */
  R_REFUSED = 10, /* the tool refused the pool (an error code) */
  R_FLAGGED = 11, /* check passed with suspects (pmkit_check_report) */
  R_CAUGHT = 12,  /* open accepted; pmkit_pool_check rejects it */
  R_DAMAGE = 20,  /* accepted, and the use found damage; check rejects */
  R_SILENT = 22,  /* accepted, damage, and check said consistent */
  R_LOST = 23,    /* gc or repair succeeded and a published block is gone */
  R_HARNESS = 30, /* the harness itself failed */
};

static unsigned char *base_img;
static size_t base_len;
static const char *work;
static int verbose;

/* A mutation: the image is the base with bytes [off, off + n) replaced by
 * `bytes`, `len` bytes long. Kept as a patch: the harness forks a child per
 * trial, and a parent holding every image would make each fork slow. */
struct mut {
  char what[96];
  unsigned char *img; /* while being made: the scratch image */
  size_t len, off, n;
  unsigned char *bytes;
};
static unsigned char *scratch; /* base_len + 64 KiB */

static void write_file(const char *path, const unsigned char *img, size_t len) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  CHECK(fd >= 0);
  CHECK(write(fd, img, len) == (ssize_t)len);
  close(fd);
}

/* Use the pool as a program would; R_ACCEPT or R_DAMAGE. */
static int use(pmkit_pool *p, struct hw_root *rt) {
  return hw_verify(p, rt) < 0 ? R_DAMAGE : R_ACCEPT;
}

static int open_use(const char *path, int check_said_ok, unsigned flags) {
  pmkit_pool *p;
  struct hw_root *rt;
  pmkit_pool_opts o = {.flags = flags};
  if (pmkit_pool_open(path, &o, &p))
    return check_said_ok ? R_ACCEPT : R_REFUSED;
  if (pmkit_root(p, sizeof *rt, (void **)&rt)) {
    pmkit_pool_close(p);
    return check_said_ok ? R_ACCEPT : R_REFUSED;
  }
  pmkit_check_report rep;
  int checked = pmkit_pool_check_report(p, 0, &rep) == 0 && !rep.suspects;
  int r = use(p, rt);
  pmkit_pool_close(p);
  if (r == R_DAMAGE)
    return check_said_ok || checked ? R_SILENT : R_DAMAGE;
  return checked ? R_ACCEPT : R_CAUGHT;
}

static int run_op(int op, const char *path) {
  pmkit_pool *p;
  pmkit_pool_opts ins = {.flags = PMKIT_POOL_INSPECT};
  pmkit_pool_info info;
  switch (op) {
  case OP_INFO:
    if (pmkit_pool_open(path, &ins, &p))
      return R_REFUSED;
    int r = pmkit_pool_stat(p, &info);
    pmkit_pool_close(p);
    return r ? R_REFUSED : R_ACCEPT;
  case OP_CHECK: {
    if (pmkit_pool_open(path, &ins, &p))
      return R_REFUSED;
    pmkit_check_report rep;
    r = pmkit_pool_check_report(p, 0, &rep);
    pmkit_pool_close(p);
    if (r)
      return R_REFUSED;
    return rep.suspects ? R_FLAGGED : open_use(path, 1, 0);
  }
  case OP_GC: {
    struct hw_root *rt;
    if (pmkit_pool_open(path, NULL, &p))
      return R_REFUSED;
    /* The published blocks allocated before gc must all be there after. */
    static uint64_t live[HW_SLOTS];
    int rooted = pmkit_root(p, sizeof *rt, (void **)&rt) == 0;
    for (unsigned i = 0; rooted && i < HW_SLOTS; i++)
      live[i] = rt->slot[i] && pmkit_usable_size(p, (void *)rt->slot[i])
                    ? rt->slot[i]
                    : 0;
    pmkit_gc_stats st;
    if (pmkit_pool_gc(p, 0, &st)) {
      pmkit_pool_close(p);
      return R_REFUSED;
    }
    r = rooted ? R_ACCEPT : R_LOST; /* gc ran on a pool with a bad root */
    for (unsigned i = 0; rooted && i < HW_SLOTS; i++)
      if (live[i] && !pmkit_usable_size(p, (void *)live[i]))
        r = R_LOST;
    pmkit_pool_close(p);
    return r;
  }
  case OP_OPEN:
    return open_use(path, 0, 0);
  case OP_VERIFY:
    return open_use(path, 0, PMKIT_POOL_VERIFY);
  case OP_REPAIR: {
    if (pmkit_pool_repair(path, 0, NULL, NULL, NULL))
      return R_REFUSED;
    struct hw_root *rt;
    if (pmkit_pool_open(path, NULL, &p) ||
        pmkit_root(p, sizeof *rt, (void **)&rt))
      return R_LOST;
    r = pmkit_pool_check(p) || use(p, rt) != R_ACCEPT ? R_LOST : R_ACCEPT;
    pmkit_pool_close(p);
    return r;
  }
  }
  return R_HARNESS;
}

/* Run one tool on a fresh copy of the mutated image in a child with a time
 * limit: its exit status, or -SIGNAL (SIGALRM: a hang). */
static int trial(const struct mut *m, int op) {
  char path[1024];
  snprintf(path, sizeof path, "%s/mutate.%d.pool", work, (int)getpid());
  memcpy(scratch, base_img, base_len);
  memcpy(scratch + m->off, m->bytes, m->n);
  write_file(path, scratch, m->len);
  fflush(NULL);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (!verbose) { /* the tools' messages are expected here */
      int null = open("/dev/null", O_WRONLY);
      dup2(null, 2);
    }
    alarm(20);
    _exit(run_op(op, path));
  }
  int status;
  CHECK(waitpid(pid, &status, 0) == pid);
  unlink(path);
  char bak[1100];
  snprintf(bak, sizeof bak, "%s.bak", path);
  unlink(bak);
  if (WIFSIGNALED(status))
    return -WTERMSIG(status);
  return WEXITSTATUS(status);
}

/* ---- the base pool and the mutations ------------------------------------ */

static void make_base(void) {
  char path[1024];
  snprintf(path, sizeof path, "%s/mutate-base.%d.pool", work, (int)getpid());
  unlink(path);
  pmkit_pool *p;
  struct hw_root *rt;
  CHECK_OK(pmkit_pool_create(path, POOL_SIZE, NULL, &p));
  CHECK_OK(pmkit_root(p, sizeof *rt, (void **)&rt));
  uint64_t rng = 42;
  for (uint64_t k = 0; k < 700; k++)
    CHECK_OK(hw_step(p, rt, &rng, 0, 96, k));
  /* Unreachable leaks for gc and repair to find: small and large. */
  void *leak;
  for (int i = 0; i < 20; i++)
    CHECK_OK(pmkit_alloc(p, 24 + (size_t)i * 100, &leak));
  CHECK_OK(pmkit_alloc(p, 70000, &leak));
  CHECK_OK(pmkit_alloc(p, 30000, &leak));
  pmkit_fence();
  pmkit_pool_info info;
  CHECK_OK(pmkit_pool_stat(p, &info));
  CHECK(info.chunks_large > 0 && info.chunks_small > 3);
  CHECK(hw_check(p, rt) > 20);
  CHECK_OK(pmkit_pool_close(p));
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0);
  base_len = POOL_SIZE;
  base_img = malloc(base_len);
  CHECK(base_img && read(fd, base_img, base_len) == (ssize_t)base_len);
  close(fd);
  unlink(path);
}

static struct mut *muts;
static size_t nmuts, capmuts;

static struct mut *new_mut(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
/* Turn the mutation being made into its patch. */
static void end_mut(void) {
  if (!nmuts || !muts[nmuts - 1].img)
    return;
  struct mut *m = &muts[nmuts - 1];
  size_t lo = 0, hi = m->len > base_len ? m->len : base_len;
  size_t top = m->len < base_len ? m->len : base_len;
  while (lo < top && m->img[lo] == base_img[lo])
    lo++;
  if (m->len <= base_len)
    while (hi > lo && hi <= top && m->img[hi - 1] == base_img[hi - 1])
      hi--;
  if (lo == top && m->len <= base_len)
    hi = lo; /* unchanged bytes (a truncation) */
  m->off = lo;
  m->n = hi - lo;
  m->bytes = malloc(m->n ? m->n : 1);
  CHECK(m->bytes);
  memcpy(m->bytes, m->img + lo, m->n);
  memcpy(m->img, base_img, base_len);
  memset(m->img + base_len, 0, 65536);
  m->img = NULL;
}

static struct mut *new_mut(const char *fmt, ...) {
  end_mut();
  if (nmuts == capmuts) {
    capmuts = capmuts ? capmuts * 2 : 512;
    muts = realloc(muts, capmuts * sizeof *muts);
    CHECK(muts);
  }
  struct mut *m = &muts[nmuts++];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->what, sizeof m->what, fmt, ap);
  va_end(ap);
  m->len = base_len;
  m->img = scratch;
  return m;
}

static void flip(const char *region, size_t lo, size_t hi, uint64_t *rng,
                 int n) {
  for (int k = 0; k < n; k++) {
    size_t at = lo + test_rand(rng) % (hi - lo);
    unsigned bit = (unsigned)(test_rand(rng) % 8);
    struct mut *m = new_mut("%s: flip bit %u of byte %#zx", region, bit, at);
    m->img[at] ^= (unsigned char)(1u << bit);
  }
}

static void zero(const char *region, size_t at, size_t len) {
  struct mut *m = new_mut("%s: zero %zu bytes at %#zx", region, len, at);
  memset(m->img + at, 0, len);
}

static void make_mutations(void) {
  const struct pmk_hdr *h = (const struct pmk_hdr *)base_img;
  uint64_t rng = 7;
  size_t tab = h->table_off, heap = h->heap_off;
  uint32_t nch = (uint32_t)h->nchunks;
  const uint32_t *table = (const uint32_t *)(base_img + tab);

  /* Header (checksummed) and state page. */
  flip("header", 0, sizeof(struct pmk_hdr), &rng, 30);
  for (unsigned w = 0; w < 4; w++) {
    zero("state page word", PMK_STATE_OFF + w * 8, 8);
    zero("state page word, low half", PMK_STATE_OFF + w * 8, 4);
    struct mut *m = new_mut("state page word %u: +8", w);
    ((uint64_t *)(m->img + PMK_STATE_OFF))[w] += 8;
  }
  flip("state page", PMK_STATE_OFF, PMK_STATE_OFF + 32, &rng, 20);
  zero("state page", PMK_STATE_OFF, 4096);

  /* Context slots: state, tag, seq, reserved, the journal. */
  for (unsigned s = 0; s < 3; s++) {
    size_t c = PMK_CTX_OFF + (size_t)s * PMK_CTX_SIZE;
    flip("context words", c, c + 32, &rng, 8);
    flip("context journal", c + offsetof(struct pmk_ctx_pm, journal),
         c + PMK_CTX_SIZE, &rng, 3);
    zero("context slot", c, PMK_CTX_SIZE);
  }

  /* Chunk table: each used entry zeroed (4 bytes), altered, flipped. */
  int used = 0;
  for (uint32_t id = 0; id < nch; id++) {
    if (!table[id])
      continue;
    used++;
    zero("chunk table entry", tab + id * 4, 4);
    struct mut *m = new_mut("chunk table entry %u: %#x -> %#x", id, table[id],
                            table[id] + 1);
    ((uint32_t *)(m->img + tab))[id] = table[id] + 1;
    flip("chunk table entry", tab + id * 4, tab + id * 4 + 4, &rng, 1);
  }
  CHECK(used > 5);
  for (int k = 0; k < 12; k++) { /* free entries given a value */
    uint32_t id = (uint32_t)(test_rand(&rng) % nch);
    if (table[id])
      continue;
    static const uint32_t vals[] = {
        1, 5, PMK_T_CONT, PMK_T_HEAD | 1, PMK_T_HEAD | 2, 0xdeadbeef};
    uint32_t v = vals[k % 6];
    struct mut *m = new_mut("free chunk table entry %u -> %#x", id, v);
    ((uint32_t *)(m->img + tab))[id] = v;
  }
  zero("chunk table", tab, (size_t)nch * 4);

  /* Crafted by someone who knows the checks: an active section whose
   * journal names a run over live chunks (open must not write it), and a
   * run generation one open away from its limit. */
  for (uint32_t id = 0; id + 3 <= nch; id += 7) {
    struct mut *m =
        new_mut("context 5: journal names a 3-chunk run at chunk %u", id);
    struct pmk_ctx_pm *c =
        (struct pmk_ctx_pm *)(m->img + PMK_CTX_OFF + 5 * PMK_CTX_SIZE);
    uint64_t e = (heap + ((uint64_t)id << PMK_CHUNK_SHIFT) + PMK_LARGE_HDR) |
                 3ull << PMK_J_LEN_SHIFT;
    c->tag = 77;
    c->seq = 9;
    c->state = pmk_active_word(c->tag, c->seq);
    c->journal[0].e = e;
    c->journal[0].check = pmk_journal_check(e, 0, c->seq);
  }
  {
    struct mut *m = new_mut("state page: run generation 2^62 - 1");
    ((struct pmk_state *)(m->img + PMK_STATE_OFF))->run_gen = PMK_GEN_LIMIT - 1;
  }

  /* Chunk headers and bitmaps of used chunks. */
  for (uint32_t id = 0; id < nch; id++) {
    uint32_t e = table[id];
    size_t c = heap + ((size_t)id << PMK_CHUNK_SHIFT);
    if (e == 0 || e == PMK_T_CONT)
      continue;
    flip("chunk header", c, c + 8, &rng, 2);
    if (e & PMK_T_HEAD) {
      zero("large chunk header", c, PMK_LARGE_HDR);
      continue;
    }
    zero("small chunk header", c, PMK_CHUNK_HDR);
    const struct pmk_chunk *ch = (const struct pmk_chunk *)(base_img + c);
    uint32_t nb = ch->nblocks;
    int set = 0, clear = 0;
    for (uint32_t i = 0; i < nb && (set < 2 || clear < 1); i++) {
      int bit = (ch->bitmap[i >> 6] >> (i & 63)) & 1;
      if ((bit && set >= 2) || (!bit && clear >= 1))
        continue;
      set += bit;
      clear += !bit;
      struct mut *m =
          new_mut("chunk %u bitmap bit %u: %d -> %d", id, i, bit, !bit);
      ((struct pmk_chunk *)(m->img + c))->bitmap[i >> 6] ^= 1ull << (i & 63);
    }
    struct mut *m = new_mut("chunk %u: bitmap tail bit %u cleared", id, nb);
    ((struct pmk_chunk *)(m->img + c))->bitmap[nb >> 6] &= ~(1ull << (nb & 63));
    zero("bitmap word", c + offsetof(struct pmk_chunk, bitmap), 8);
  }

  /* Truncated and extended files. */
  for (int k = 0; k < 20; k++) {
    struct mut *m = new_mut("truncated");
    m->len = k < 10 ? (size_t)k * 997 : base_len - (size_t)(k - 9) * 4096;
    snprintf(m->what, sizeof m->what, "truncated to %zu bytes", m->len);
  }
  for (int k = 0; k < 20; k++) {
    struct mut *m = new_mut("extended");
    size_t add = 1 + (size_t)k * 3001;
    memset(m->img + base_len, k & 1 ? 0 : 0x5a, add);
    m->len = base_len + add;
    snprintf(m->what, sizeof m->what, "%zu bytes appended", add);
  }
}

/* The base pool and ~440 mutations of it. */
static void make_pools(void) {
  make_base();
  scratch = malloc(base_len + 65536);
  CHECK(scratch);
  memcpy(scratch, base_img, base_len);
  make_mutations();
  end_mut();
  CHECK(nmuts >= 300);
}

/* The base pool passes every tool: the harness can tell success. */
static void base_passes(void) {
  struct mut *base = new_mut("none");
  end_mut();
  nmuts--;
  for (int op = 0; op < NOPS; op++)
    CHECK(trial(base, op) == R_ACCEPT);
}

/* Every mutated pool through every tool: no crash, hang, silent
 * acceptance, lost block, or damage after an open that check accepts. */
static void every_mutation(void) {
  unsigned count[NOPS][32] = {{0}};
  int bad = 0;
  for (size_t i = 0; i < nmuts; i++) {
    struct mut *m = &muts[i];
    int res[NOPS];
    for (int op = 0; op < NOPS; op++) {
      int r = res[op] = trial(m, op);
      const char *why = NULL;
      if (r < 0)
        why = r == -SIGALRM ? "hang" : "crash";
      else if (r == R_SILENT)
        why = "silent acceptance: damage after a check said consistent";
      else if (op == OP_VERIFY && (r == R_DAMAGE || r == R_CAUGHT))
        why = "open with PMKIT_POOL_VERIFY accepted a corrupt pool";
      else if (r == R_LOST)
        why = "a published block was lost";
      else if (r == R_HARNESS ||
               (r != R_ACCEPT && r != R_REFUSED && r != R_FLAGGED &&
                r != R_CAUGHT && r != R_DAMAGE))
        why = "unexpected status";
      if (why) {
        bad++;
        fprintf(stderr, "pool_mutate: %s: %s: %s (status %d)\n", m->what,
                op_name[op], why, r);
      }
      count[op][r < 0 ? 31 : r % 31]++;
    }
    if (verbose)
      printf("%-60s info %d check %d gc %d open %d verify %d repair %d\n",
             m->what, res[0], res[1], res[2], res[3], res[4], res[5]);
    /* Damage after open is acceptable only where check sees it. */
    if (res[OP_OPEN] == R_DAMAGE && res[OP_CHECK] != R_REFUSED &&
        res[OP_CHECK] != R_FLAGGED) {
      bad++;
      fprintf(stderr, "pool_mutate: %s: open damaged data check accepts\n",
              m->what);
    }
  }
  printf("pool_mutate: %zu mutated pools, each through %d tools (every "
         "mutation run, none sampled)\n",
         nmuts, NOPS);
  printf("  tool    refused  suspects  accepted  then-check-fails  "
         "damage-check-sees  crash/hang\n");
  for (int op = 0; op < NOPS; op++)
    printf("  %-7s %7u  %8u  %8u  %16u  %17u  %10u\n", op_name[op],
           count[op][R_REFUSED], count[op][R_FLAGGED], count[op][R_ACCEPT],
           count[op][R_CAUGHT], count[op][R_DAMAGE], count[op][31]);
  if (bad)
    printf("pool_mutate: %d failures\n", bad);
  CHECK(bad == 0);
}

int main(int argc, char **argv) {
  verbose = argc > 1 && !strcmp(argv[1], "-v");
  work = getenv("PMKIT_TEST_DIR");
  if (!work || !*work)
    work = "/dev/shm";
  mkdir(work, 0755);
  TEST_CASE(make_pools);
  TEST_CASE(base_passes);
  TEST_CASE(every_mutation);
  return test_summary();
}
