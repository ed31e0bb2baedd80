# SPDX-License-Identifier: Apache-2.0
"""Pools that pmkit cannot trust (issue 23): `pmkit pool check` names what is wrong and what it
covered, `check --repair` rebuilds the allocator metadata from what a valid root reaches (after
a backup; `--dry-run` writes nothing) and refuses when the root itself is in doubt, and a kill
during gc leaves a consistent pool. The pools are made by a program that publishes a list of
blocks of many sizes (one large) from its root and can verify every one of them afterwards."""

from __future__ import annotations

import hashlib
import os
import signal
import struct
import subprocess
import time

import pytest
from conftest import ROOT, pmkit

ENV = dict(os.environ, PYTHONPATH=str(ROOT / "cli"))

LIST_C = r"""#include <pmkit/pmkit.h>
#include <string.h>
struct node { struct node *next; unsigned long n, size; unsigned char fill[]; };
struct root { struct node *head; };
int main(int c, char **v) {
  pmkit_pool *p;
  struct root *r;
  int nodes = c > 3 ? atoi(v[3]) : 300;
  if (pmkit_pool_open(v[1], 0, &p) || pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  if (v[2][0] == 'g') { /* gc, saying when it starts and ends */
    pmkit_gc_stats st;
    printf("start\n");
    fflush(stdout);
    if (pmkit_pool_gc(p, 0, &st))
      return 2;
    printf("done %llu\n", (unsigned long long)st.blocks_freed);
  } else if (v[2][0] == 'm') { /* make: publish `nodes` blocks, leak every fifth */
    for (int i = 0; i < nodes; i++) {
      unsigned long size = i == 7 ? 100000 : 32 + (i * 37) % (nodes > 1000 ? 200 : 3000);
      struct node *b;
      if (pmkit_alloc(p, size, (void **)&b))
        return 2;
      b->n = i, b->size = size;
      memset(b->fill, i & 0xff, size - sizeof *b);
      if (i % 5 == 4)
        continue;
      b->next = r->head;
      pmkit_persist(b, size);
      r->head = b;
      pmkit_persist(&r->head, 8);
    }
  } else { /* verify: every published block allocated and intact */
    int seen = 0;
    for (struct node *b = r->head; b; b = b->next, seen++) {
      if (pmkit_usable_size(p, b) < b->size)
        return 3;
      for (unsigned long k = 0; k < b->size - sizeof *b; k++)
        if (b->fill[k] != (b->n & 0xff))
          return 3;
    }
    if (seen != nodes - nodes / 5)
      return 3;
  }
  return pmkit_pool_close(p);
}
"""


@pytest.fixture(scope="module")
def listprog(tmp_path_factory):
    d = tmp_path_factory.mktemp("list")
    (d / "list.c").write_text("#include <stdio.h>\n#include <stdlib.h>\n" + LIST_C)
    r = pmkit("cc", str(d / "list.c"), "-o", str(d / "list"))
    assert r.returncode == 0, r.stderr
    return d / "list"


def made(run, shm, listprog, name: str, nodes: int = 300, size: str = "16M") -> str:
    pool = shm / name
    pool.unlink(missing_ok=True)
    assert run("pool", "create", str(pool), "--size", size).returncode == 0
    assert subprocess.run([str(listprog), str(pool), "make", str(nodes)]).returncode == 0
    assert subprocess.run([str(listprog), str(pool), "verify", str(nodes)]).returncode == 0
    return str(pool)


def header(pool: str) -> tuple[int, int, int]:
    """table_off, heap_off, nchunks of a pool (struct pmk_hdr)."""
    with open(pool, "rb") as f:
        h = f.read(136)
    return struct.unpack_from("<QQQ", h, 112)


def table(pool: str) -> list[int]:
    t_off, _, n = header(pool)
    with open(pool, "rb") as f:
        f.seek(t_off)
        return list(struct.unpack(f"<{n}I", f.read(4 * n)))


def poke(pool: str, off: int, data: bytes) -> None:
    with open(pool, "r+b") as f:
        f.seek(off)
        f.write(data)


def digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_repair_restores_a_lost_table_entry(run, shm, listprog):
    """A zeroed table entry of a small chunk (the blocks in it would be handed out again): open
    and check refuse, the dry run says what it would change and writes nothing, the repair
    keeps a backup, and afterwards the pool passes the check and every published block is
    there; a second repair has nothing to do."""
    pool = made(run, shm, listprog, "lost-entry.pool")
    t = table(pool)
    small = next(i for i, e in enumerate(t) if 1 <= e <= 32)
    poke(pool, header(pool)[0] + 4 * small, b"\0\0\0\0")
    r = run("pool", "check", pool)
    assert r.returncode == 1, r
    assert f"chunk {small}: the table says free, but the chunk holds" in r.stderr, r.stderr
    assert subprocess.run([str(listprog), pool, "verify"]).returncode == 2  # open refuses

    before = digest(pool)
    r = run("pool", "check", "--repair", "--dry-run", pool)
    assert r.returncode == 0, r.stderr
    assert (
        f"chunk {small}: table entry 0 -> " in r.stdout and "dry run, nothing written" in r.stdout
    )
    assert digest(pool) == before and not (shm / "lost-entry.pool.bak").exists()

    r = run("pool", "check", "--repair", pool)
    assert r.returncode == 0, r.stderr
    assert "repaired (the pool before: " in r.stdout, r.stdout
    assert digest(pool + ".bak") == before
    assert table(pool)[small] == t[small]
    r = run("pool", "check", pool)
    assert r.returncode == 0 and "consistent" in r.stdout, r
    assert subprocess.run([str(listprog), pool, "verify"]).returncode == 0
    r = run("pool", "check", "--repair", pool)
    assert r.returncode == 0 and "nothing to repair" in r.stdout, r


def test_repair_frees_leaks_and_keeps_the_backup(run, shm, listprog):
    """Every fifth block leaks; a repair frees exactly those (as gc would), and never
    overwrites an existing backup."""
    pool = made(run, shm, listprog, "leaks.pool", nodes=100)
    r = run("pool", "check", "--repair", pool)
    assert r.returncode == 0, r.stderr
    assert "80 reachable blocks kept" not in r.stdout  # the root is a block too
    assert "81 reachable blocks kept, 0 of them marked allocated again, 20 unreachable" in (
        r.stdout
    ), r.stdout
    assert subprocess.run([str(listprog), pool, "verify", "100"]).returncode == 0
    # A new problem, an existing backup: refused before anything is written.
    t = table(pool)
    small = next(i for i, e in enumerate(t) if 1 <= e <= 32)
    poke(pool, header(pool)[0] + 4 * small, b"\0\0\0\0")
    before = digest(pool)
    r = run("pool", "check", "--repair", pool)
    assert r.returncode == 2 and "exists" in r.stderr and len(r.stderr.splitlines()) == 1, r
    assert digest(pool) == before
    r = run("pool", "check", "--repair", "--backup", str(shm / "other.bak"), pool)
    assert r.returncode == 0, r.stderr
    assert digest(str(shm / "other.bak")) == before


@pytest.mark.parametrize("what", ["root offset", "root size"])
def test_repair_refuses_an_untrusted_root(run, shm, listprog, what):
    """Root fields that fail their check word: the repair cannot tell what the pool's data is,
    so it refuses, writes nothing and leaves no backup."""
    pool = made(run, shm, listprog, "bad-root.pool")
    field = 4096 + (8 if what == "root offset" else 16)
    with open(pool, "rb") as f:
        f.seek(field)
        (v,) = struct.unpack("<Q", f.read(8))
    poke(pool, field, struct.pack("<Q", v + 64))
    before = digest(pool)
    for args in (["check"], ["check", "--repair"], ["check", "--repair", "--dry-run"], ["gc"]):
        r = run("pool", *args, pool)
        assert r.returncode == 1 and "check word" in r.stderr, (args, r)
        assert len(r.stderr.splitlines()) == 1, r.stderr
    assert digest(pool) == before and not (shm / "bad-root.pool.bak").exists()


def test_check_warns_of_lost_allocation_bits(run, shm, listprog):
    """Cleared bitmap bits of published blocks pass the metadata checks (open cannot walk the
    heap); the full check warns of reachable pointers to free blocks, and a repair marks them
    allocated again."""
    import re

    pool = made(run, shm, listprog, "lost-bit.pool")
    _, heap, n = header(pool)
    with open(pool, "rb") as f:
        f.seek(4096 + 8)
        (root,) = struct.unpack("<Q", f.read(8))
    t = table(pool)  # the first word of a small chunk's bitmap, not the root's chunk
    i = next(i for i, e in enumerate(t) if 1 <= e <= 32 and heap + (i << 16) > root)
    poke(pool, heap + (i << 16) + 64, b"\0" * 8)
    r = run("pool", "check", pool)
    assert r.returncode == 0 and "consistent" in r.stdout, r
    m = re.search(r"warning: (\d+) reachable words? points? to (?:a )?free blocks?", r.stderr)
    assert m and int(m.group(1)) >= 1, r.stderr
    # PMKIT_POOL_VERIFY makes every open run that check and refuse the pool (info opens it too).
    assert run("pool", "info", pool).returncode == 0
    r = run("pool", "info", pool, env={"PMKIT_POOL_VERIFY": "1"})
    assert r.returncode == 1 and "PMKIT_E_CORRUPT" in r.stderr, r
    assert re.search(
        rf"{pool}: {m.group(1)} reachable words? points? to (?:a )?free blocks?", r.stderr
    )
    verify = [str(listprog), pool, "verify"]
    assert subprocess.run(verify, env=dict(os.environ, PMKIT_POOL_VERIFY="1")).returncode == 2
    r = run("pool", "check", "--repair", pool)
    assert r.returncode == 0, r.stderr
    assert re.search(
        rf"chunk {i} .*: 0 unreachable blocks freed, [1-9]\d* reachable block", r.stdout
    )
    r = run("pool", "check", pool)
    assert r.returncode == 0 and "warning" not in r.stderr, r
    assert subprocess.run(verify, env=dict(os.environ, PMKIT_POOL_VERIFY="1")).returncode == 0


def test_gc_killed_leaves_a_consistent_pool(run, shm, listprog):
    """`kill -9` during gc (at 5 points spread over a gc that frees 10000 of 50000 blocks)
    leaves a pool that passes the check with every published block intact; a gc after it
    frees what the killed one did not."""
    n = 50000
    pool = made(run, shm, listprog, "killed-gc.pool", nodes=n, size="64M")
    orig = shm / "killed-gc-orig.pool"

    def fresh() -> None:  # the pool as made, its leaks not yet collected
        subprocess.run(["cp", "--sparse=always", orig, pool], check=True)

    subprocess.run(["cp", "--sparse=always", pool, orig], check=True)
    t0 = time.monotonic()  # how long a whole gc takes here
    r = subprocess.run([str(listprog), pool, "gc"], capture_output=True, text=True)
    whole = time.monotonic() - t0
    assert r.returncode == 0 and r.stdout.split() == ["start", "done", str(n // 5)], r.stdout
    landed = 0
    for k in range(5):
        fresh()
        p = subprocess.Popen([str(listprog), pool, "gc"], stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline() == "start\n"
        time.sleep(whole * k / 6)
        p.send_signal(signal.SIGKILL)
        out = p.communicate()[0]
        landed += "done" not in out
        r = run("pool", "check", pool)
        assert r.returncode == 0 and "warning" not in r.stderr, (k, r)
        assert subprocess.run([str(listprog), pool, "verify", str(n)]).returncode == 0, k
    assert landed >= 2, landed  # kills that came before gc finished
    orig.unlink()


def root_word(off: int, size: int) -> int:
    """pmk_root_word (runtime/core/internal.h): the state page's check of the root fields."""
    m = (1 << 64) - 1
    h = ((off ^ 0x6A09E667F3BCC908) * 0x9E3779B97F4A7C15 & m) ^ size
    h = ((h ^ h >> 31) * 0xBF58476D1CE4E5B9) & m
    return (h ^ h >> 29) | 1


def test_repair_refuses_a_root_that_is_not_allocated(run, shm, listprog):
    """A state page whose fields agree with their check word but name a free block (a state
    page copied from another pool): every tool refuses; the repair too, before it marks
    blocks allocated, so nothing is freed."""
    pool = made(run, shm, listprog, "other-root.pool")
    with open(pool, "rb") as f:
        f.seek(4096 + 8)
        off, size = struct.unpack("<QQ", f.read(16))
    _, heap, _ = header(pool)
    free = max(i for i, e in enumerate(table(pool)) if e == 0)
    fake = heap + (free << 16) + 1024  # where a block would start in a free chunk
    poke(pool, 4096 + 8, struct.pack("<QQQ", fake, size, root_word(fake, size)))
    before = digest(pool)
    for args in (["check"], ["check", "--repair"], ["gc"]):
        r = run("pool", *args, pool)
        assert r.returncode == 1 and "not an allocated block" in r.stderr, (args, r)
    assert digest(pool) == before and not (shm / "other-root.pool.bak").exists()


@pytest.mark.parametrize("what", ["run length", "small class"])
def test_repair_refuses_conflicting_evidence(run, shm, listprog, what):
    """A table entry and its chunk's header that disagree, both plausible (a large block's
    head entry made shorter; a small chunk's header copied from a chunk of another class):
    there is no telling which is right, so open refuses and so does the repair."""
    pool = made(run, shm, listprog, "conflict.pool")
    t_off, heap, _ = header(pool)
    t = table(pool)
    if what == "run length":
        i = next(i for i, e in enumerate(t) if e & 0x80000000 and e & 0x3FFFFFFF > 1)
        poke(pool, t_off + 4 * i, struct.pack("<I", 0x80000001))
    else:
        a, b = [i for i, e in enumerate(t) if 1 <= e <= 32 and e != t[0]][:2]
        b = next(i for i, e in enumerate(t) if 1 <= e <= 32 and e != t[a])
        with open(pool, "rb") as f:
            f.seek(heap + (a << 16))
            hdr = f.read(1024)
        poke(pool, heap + (b << 16), hdr)
    before = digest(pool)
    assert run("pool", "check", pool).returncode == 1
    r = run("pool", "check", "--repair", pool)
    assert r.returncode == 1 and "cannot tell which" in r.stderr, r
    assert digest(pool) == before


def test_gc_keeps_what_a_lost_bit_hides(run, shm, listprog):
    """A list node whose allocation bit is lost: gc still follows it, so the rest of the list
    stays allocated; it frees only the 60 leaks and warns. A repair then restores the bit."""
    pool = made(run, shm, listprog, "gc-lost-bit.pool")
    _, heap, _ = header(pool)
    with open(pool, "rb") as f:
        f.seek(4096 + 8)
        (root,) = struct.unpack("<Q", f.read(8))
    t = table(pool)
    i = next(i for i, e in enumerate(t) if 1 <= e <= 32 and heap + (i << 16) > root)
    poke(pool, heap + (i << 16) + 64, b"\0" * 8)
    r = run("pool", "gc", pool)
    assert r.returncode == 0 and "warning:" in r.stderr, r
    freed = int(r.stdout.split(", ")[1].split()[0])
    assert freed <= 60, r.stdout  # at most the leaks (some lost their bits with the word)
    assert run("pool", "check", "--repair", pool).returncode == 0
    assert subprocess.run([str(listprog), pool, "verify"]).returncode == 0
