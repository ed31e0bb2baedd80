# SPDX-License-Identifier: Apache-2.0
"""The `pmkit` command: exit statuses (0 ok, 1 check failed, 2 usage or environment), one-line
errors, help everywhere, pool create/info/check/gc on good and bad pools, and `pmkit cc`
compiling and linking a program that uses a pool."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def test_help_and_version(run):
    r = run("--help")
    assert r.returncode == 0 and "pool" in r.stdout and "demo" in r.stdout
    for sub in (["pool", "--help"], ["pool", "create", "--help"], ["demo", "--help"]):
        assert run(*sub).returncode == 0
    r = run("cc", "--help")
    assert r.returncode == 0 and "--mode" in r.stdout
    # each mode's options come from passes/modes.def; --whole-program is said once per mode
    # that has it, robust's as PMRobust's way
    text = " ".join(r.stdout.split())
    for mode in ("robust", "clobber", "ssapp", "arp"):
        assert f"{mode} mode (docs/modes/{mode}.md):" in r.stdout
    assert text.count("--whole-program analyse the linked program") == 3
    assert "(as PMRobust does)" in text and "(static archives of them work)" in text
    assert run("--version").stdout.startswith("pmkit ")


@pytest.mark.parametrize(
    "args, words",
    [
        (["frobnicate"], "invalid choice"),
        (["pool"], "needs an action"),
        (["pool", "create"], "required"),
        (["pool", "create", "/dev/shm/x", "--size", "lots"], "bad size"),
        (["pool", "create", "/dev/shm/x", "--size", str((1 << 64) + (8 << 20))], "too large"),
        (["cc", "--mode=bogus", "x.c"], "unknown mode"),
        (["cc", "--mode=wpp", "x.c"], "builds with 'pmkit wpp cc'"),
        (["cc", "--mode=arp", "--arp-lowering=tso", "x.c"], "unknown arp lowering"),
        (["cc", "--arp-lowering=scp", "x.c"], "needs --mode=arp"),
        (["cc", "--mode=ssapp", "--ssapp-fence=mfence", "x.c"], "unknown ssapp fence"),
        (["cc", "--mode=clobber", "--ssapp-allow=f", "x.c"], "need --mode=ssapp"),
        (["cc", "--mode=clobber", "--clobber-setting=redo", "x.c"], "unknown clobber setting"),
        (["cc", "--mode=robust", "--clobber-domain=adr", "x.c"], "need --mode=clobber"),
        (["cc", "--mode=clobber", "--clobber-allow=", "x.c"], "function names"),
        (["cc", "--report", "x.c"], "--report needs --mode=robust"),
        (["cc", "--mode=arp", "--whole-program", "x.c"], "needs --mode=robust, --mode=clobber or"),
        (
            ["cc", "--mode=clobber", "-mllvm", "-pmkit-robust-setting=opt", "x.c"],
            "-pmkit-robust-setting=opt is an option of --mode=robust, not of --mode=clobber",
        ),
        (
            [
                "cc",
                "--mode=robust",
                "--whole-program",
                "-Xclang",
                "-mllvm",
                "-Xclang",
                "-pmkit-robust-no-split",
                "x.c",
            ],
            "not through -Xclang",
        ),
        (["cc", "--mode=robust", "--robust-setting=fast", "x.c"], "unknown robust setting"),
        (["cc", "--mode=robust", "--pm-allocators=/nonexistent", "x.c"], "no such file"),
        (["cc", "--mode=robust", "--pm-allocators=/tmp", "x.c"], "a directory, not a file"),
        (["cc", "--mode=clobber", "--clobber-setting", "x.c"], "--clobber-setting needs a value"),
        (["cc", "--mode=robust", "--strip-existing=1", "x.c"], "takes no value"),
        (["cc", "--mode=robust", "--whole-program=1", "x.c"], "takes no value"),
        (["cc", "--mode=clobber", "--mode=robust", "x.c"], "--mode given twice"),
        (
            ["cc", "--mode=clobber", "--clobber-setting=clobber", "--clobber-setting=undo", "x.c"],
            "--clobber-setting given twice",
        ),
        (["cc", "--mode=clobber", "-mllvm", "-pmkit-mode=robust", "x.c"], "give the mode with"),
        (["cc"], "no input files"),
    ],
)
def test_usage_errors_exit_2_with_one_line(run, args, words):
    r = run(*args)
    assert r.returncode == 2
    assert words in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # argparse may add a usage line


def test_pool_lifecycle(run, shm):
    path = str(shm / "a.pool")
    r = run("pool", "create", path, "--size", "8M", "--layout", "test")
    assert r.returncode == 0, r.stderr
    assert "created" in r.stdout
    r = run("pool", "create", path)
    assert r.returncode == 2 and "PMKIT_E_EXIST" in r.stderr
    r = run("pool", "info", path, "--json")
    assert r.returncode == 0
    info = json.loads(r.stdout)
    assert info["size"] == 8 << 20 and info["layout"] == "test" and info["blocks_used"] == 0
    # Inspection does not count as a run: the generation stays.
    assert json.loads(run("pool", "info", path, "--json").stdout)["generation"] == 1
    r = run("pool", "info", path)
    assert "mapped at" in r.stdout and "thread slots" in r.stdout
    r = run("pool", "check", path)
    assert r.returncode == 0 and "consistent" in r.stdout
    r = run("pool", "gc", path)
    assert r.returncode == 0 and "0 reclaimed" in r.stdout


def test_pool_too_small_and_missing(run, shm):
    r = run("pool", "create", str(shm / "s.pool"), "--size", "64K")
    assert r.returncode == 2 and "PMKIT_E_TOOSMALL" in r.stderr
    assert not (shm / "s.pool").exists()
    r = run("pool", "check", str(shm / "missing.pool"))
    assert r.returncode == 2 and "PMKIT_E_NOENT" in r.stderr


def test_check_fails_on_bad_pools(run, shm):
    path = shm / "c.pool"
    assert run("pool", "create", str(path), "--size", "4M").returncode == 0
    data = bytearray(path.read_bytes())
    data[60] ^= 0xFF  # inside the checksummed header
    path.write_bytes(bytes(data))
    r = run("pool", "check", str(path))
    assert r.returncode == 1 and "PMKIT_E_CORRUPT" in r.stderr
    path.write_text("not a pool at all, just some text\n")
    r = run("pool", "check", str(path))
    assert r.returncode == 1 and "PMKIT_E_FOREIGN" in r.stderr
    r = run("pool", "info", str(path))  # not a failed check: the wrong file
    assert r.returncode == 2 and "PMKIT_E_FOREIGN" in r.stderr


PROGRAM = r"""
#include <stdio.h>
#include <string.h>
#include "pmkit/pmkit.h"

PMKIT_FASE static int bump(unsigned long *n) { return (int)++*n; }

int main(int argc, char **argv) {
  pmkit_pool *p;
  int r = pmkit_pool_open(argv[1], NULL, &p);
  if (r == PMKIT_E_NOENT) r = pmkit_pool_create(argv[1], 4 << 20, NULL, &p);
  if (r) { fprintf(stderr, "%s\n", pmkit_errormsg()); return 1; }
  unsigned long *n;
  if (pmkit_root(p, sizeof *n, (void **)&n)) return 1;
  printf("run %d\n", bump(n));
  pmkit_persist(n, sizeof *n);
  return pmkit_pool_close(p);
}
"""


def test_cc_builds_a_pool_program(run, shm, tmp_path):
    src = tmp_path / "count.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "count"
    r = run("cc", "-O1", "-Wall", "-Werror", str(src), "-o", str(exe))
    assert r.returncode == 0, r.stderr
    pool = str(shm / "count.pool")
    outs = [subprocess.run([str(exe), pool], capture_output=True, text=True) for _ in range(3)]
    assert [o.stdout for o in outs] == ["run 1\n", "run 2\n", "run 3\n"]
    # -c does not link; the dry run shows the plugin and the mode.
    r = run("cc", "--pmkit-dry-run", "-c", str(src))
    assert "-fpass-plugin=" in r.stdout and "-pmkit-mode=none" in r.stdout
    assert "-lpmkit" not in r.stdout


def test_cc_robust_mode_reports_what_it_inserts(run, shm, tmp_path):
    """The same program with its flushes and fences stripped and re-derived by robust mode still
    runs, and --report names the store lines it flushed."""
    src = tmp_path / "count.c"
    src.write_text(PROGRAM)
    exe = tmp_path / "count-robust"
    r = run("cc", "--mode=robust", "--strip-existing", "--report", "-O1", str(src), "-o", str(exe))
    assert r.returncode == 0, r.stderr
    assert "pmkit-robust: " in r.stderr and "count.c:" in r.stderr and "+ sfence" in r.stderr
    pool = str(shm / "count-robust.pool")
    outs = [subprocess.run([str(exe), pool], capture_output=True, text=True) for _ in range(2)]
    assert [o.stdout for o in outs] == ["run 1\n", "run 2\n"]
    r = run("cc", "--pmkit-dry-run", "--mode=robust", "--robust-setting=base", "-c", str(src))
    assert "-pmkit-robust-setting=base" in r.stdout and "-pmkit-mode=robust" in r.stdout


@pytest.mark.parametrize("setting", ["opt", "flit"])
def test_cc_robust_settings_build_and_run(run, shm, tmp_path, setting):
    """The opt and flit settings build the stripped program, which runs and resumes; the report
    gives the reason of each fence ("sfence before: ... while ... is not yet fenced")."""
    src = tmp_path / "count.c"
    src.write_text(PROGRAM)
    exe = tmp_path / f"count-{setting}"
    r = run(
        "cc", "--mode=robust", f"--robust-setting={setting}", "--strip-existing", "--report",
        "-O1", str(src), "-o", str(exe),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "sfence before: " in r.stderr and "is not yet fenced" in r.stderr, r.stderr
    assert "write-back after: store to PM" in r.stderr
    pool = str(shm / f"count-{setting}.pool")
    outs = [subprocess.run([str(exe), pool], capture_output=True, text=True) for _ in range(2)]
    assert [o.stdout for o in outs] == ["run 1\n", "run 2\n"]


MAIN_C = """#include <pmkit/pmkit.h>
#include <stdlib.h>
long fill(long *scratch, long *pm);
int main(int argc, char **argv) {
  pmkit_pool *p;
  long *r;
  if (argc != 2 || pmkit_pool_create(argv[1], 8 << 20, NULL, &p) ||
      pmkit_root(p, 64, (void **)&r))
    return 2;
  long v = fill(calloc(8, sizeof(long)), r);
  pmkit_pool_close(p);
  return v == 42 ? 0 : 1;
}
"""

FILL_C = """long fill(long *scratch, long *pm) {
  scratch[0] = 41;
  pm[0] = scratch[0] + 1;
  return pm[0];
}
"""


def test_cc_robust_whole_program_sees_across_files(run, shm, tmp_path):
    """One file at a time, fill()'s parameters may be PM, so both its stores are flushed; with
    --whole-program the analysis sees that scratch is calloc memory and flushes only the PM
    store. Both programs run."""
    (tmp_path / "main.c").write_text(MAIN_C)
    (tmp_path / "fill.c").write_text(FILL_C)
    srcs = [str(tmp_path / "main.c"), str(tmp_path / "fill.c")]
    reports = {}
    for how in ("per-file", "whole"):
        exe = tmp_path / how
        extra = ["--whole-program"] if how == "whole" else []
        r = run("cc", "--mode=robust", "--report", *extra, "-O2", *srcs, "-o", str(exe))
        assert r.returncode == 0, r.stderr
        reports[how] = [ln for ln in r.stderr.splitlines() if "fill.c:" in ln]
        done = subprocess.run([str(exe), str(shm / f"{how}.pool")])
        assert done.returncode == 0
    assert any("fill.c:2:" in ln for ln in reports["per-file"])
    assert not any("fill.c:2:" in ln for ln in reports["whole"])
    assert any("fill.c:3:" in ln and "pmkit_root" in ln for ln in reports["whole"])
    # The same build in steps, as make would run it: bitcode objects, one in a static
    # archive, and a link step that runs the pass on the merged program.
    wp = ["cc", "--mode=robust", "--whole-program"]
    objs = [str(tmp_path / "main.o"), str(tmp_path / "fill.o")]
    for src, obj in zip(srcs, objs, strict=True):
        r = run(*wp, "-O2", "-c", src, "-o", obj)
        assert r.returncode == 0 and r.stderr == "", r.stderr
    lib = str(tmp_path / "libfill.a")
    subprocess.run(["llvm-ar-16", "rcs", lib, objs[1]], check=True)
    r = run(*wp, "--report", objs[0], lib, "-o", str(tmp_path / "steps"))
    assert r.returncode == 0, r.stderr
    assert [ln for ln in r.stderr.splitlines() if "fill.c:" in ln] == reports["whole"]
    assert subprocess.run([str(tmp_path / "steps"), str(shm / "steps.pool")]).returncode == 0
    # Linked by pmkit cc without --whole-program: a usage error naming the object.
    r = run("cc", "--mode=robust", objs[0], objs[1], "-o", str(tmp_path / "x"))
    assert r.returncode == 2 and "link with --whole-program too" in r.stderr, r.stderr
    # Linked without the pmkit passes, the objects refuse to become a program.
    plain = subprocess.run(
        ["clang-16", "-flto", "-fuse-ld=lld", *objs, "-o", str(tmp_path / "plain")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert plain.returncode != 0, plain.stderr
    assert "undefined symbol: __pmkit_link_with_pmkit_cc_whole_program" in plain.stderr
    # Objects and link must agree on the mode and options.
    r = run(*wp, "--robust-setting=opt", objs[0], lib, "-o", str(tmp_path / "x"))
    assert r.returncode == 0, r.stderr
    clob = str(tmp_path / "fill-clobber.o")
    assert run("cc", "--mode=clobber", "--whole-program", "-c", srcs[1], "-o", clob).returncode == 0
    r = run(*wp, objs[0], clob, "-o", str(tmp_path / "x"))
    assert r.returncode != 0
    assert (
        "fill.c was compiled with -pmkit-mode=clobber but the link step has -pmkit-mode=robust"
        in r.stderr
    ), r.stderr
    opt = str(tmp_path / "main-opt.o")
    r = run(*wp, "--robust-setting=opt", "-c", srcs[0], "-o", opt)
    assert r.returncode == 0, r.stderr
    r = run(*wp, opt, objs[1], "-o", str(tmp_path / "x"))
    assert r.returncode != 0
    assert (
        "main.c was compiled with -pmkit-robust-setting=opt but " in r.stderr
        and "fill.c was not" in r.stderr
    ), r.stderr


PACKED_C = """#include <pmkit/pmkit.h>
struct __attribute__((packed)) rec { int a; long v; };
void set(struct rec *r, long v) { r->v = v; }
int main(int argc, char **argv) {
  pmkit_pool *p;
  struct rec *r;
  if (pmkit_pool_create(argv[1], 2 << 20, 0, &p) || pmkit_root(p, sizeof *r, (void **)&r))
    return 2;
  set(r, 5);
  return pmkit_pool_close(p);
}
"""


@pytest.mark.parametrize("shape", ["per-file", "whole-program"])
def test_cc_passes_every_pmkit_option_on(run, tmp_path, shape):
    """A -mllvm -pmkit-* option given to pmkit cc reaches the pass in both build shapes: the
    robust pass splits the packed 8-byte store (the report says so) unless told
    -pmkit-robust-no-split. An option the passes do not know is an error in both."""
    src = tmp_path / "packed.c"
    src.write_text(PACKED_C)
    shape_args = ["--whole-program"] if shape == "whole-program" else []
    base = ["cc", "--mode=robust", "--report", *shape_args, "-O1", str(src), "-o"]
    split = run(*base, str(tmp_path / "a"))
    assert split.returncode == 0, split.stderr
    assert "packed.c:3: split the 8-byte store aligned to 1" in split.stderr, split.stderr
    kept = run(*base, str(tmp_path / "b"), "-mllvm", "-pmkit-robust-no-split")
    assert kept.returncode == 0, kept.stderr
    assert "split the" not in kept.stderr, kept.stderr
    bad = run(*base, str(tmp_path / "c"), "-mllvm", "-pmkit-no-such-option")
    assert bad.returncode != 0 and "Unknown command line argument '-pmkit-no-such-option'" in (
        bad.stderr
    ), bad.stderr


C_ONLY = """int class = 1; /* a C identifier, a C++ keyword */
int main(void) { return class - 1; }
"""


def test_cc_friction(run, tmp_path):
    """`pmkit c++` compiles a .c file as C unless -x c++ asks for C++ (in either build
    shape); a command that only links gets no pass options, so clang does not warn that they
    went unused."""
    src = tmp_path / "k.c"
    src.write_text(C_ONLY)
    for shape in ([], ["--mode=robust", "--whole-program"]):
        r = run("c++", *shape, str(src), "-o", str(tmp_path / "k"))
        assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
        assert subprocess.run([str(tmp_path / "k")]).returncode == 0
    r = run("c++", "-x", "c++", str(src), "-o", str(tmp_path / "k2"))
    assert r.returncode != 0 and "class" in r.stderr, r.stderr
    obj = tmp_path / "k.o"
    assert run("cc", "--mode=robust", "-c", str(src), "-o", str(obj)).returncode == 0
    for extra in ([], ["--trace"]):
        r = run("cc", "--mode=robust", *extra, str(obj), "-o", str(tmp_path / "k3"))
        assert r.returncode == 0 and r.stderr == "", r.stderr


STEP_C = """#include <pmkit/pmkit.h>
struct s { long v; };
static PMKIT_FASE void step(struct s *p, long v) { p->v += v; }
void run_{x}(struct s *p) {{ step(p, 1); }}
"""


@pytest.mark.parametrize("mode", ["clobber", "ssapp"])
def test_whole_program_refuses_two_fases_of_one_name(run, tmp_path, mode):
    """Two static FASEs named step in two files: a whole-program link renames one (step.N),
    whose id then followed the order of the link, so a rebuilt program recovered one with the
    other's logged arguments. The link refuses them, naming both."""
    srcs = []
    for x in ("a", "b"):
        f = tmp_path / f"{x}.c"
        f.write_text(STEP_C.replace("{x}", x).replace("{{", "{").replace("}}", "}"))
        srcs.append(str(f))
    main = tmp_path / "m.c"
    main.write_text("struct s; void run_a(struct s *); void run_b(struct s *);\n"
                    "int main(void) { return 0; }\n")  # fmt: skip
    r = run("cc", f"--mode={mode}", "--whole-program", "-O2", str(main), *srcs,
            "-o", str(tmp_path / "w"))  # fmt: skip
    assert r.returncode != 0
    assert "FASEs step (" in r.stderr and "a.c:3) and step (" in r.stderr, r.stderr
    assert "b.c:3) have the same id" in r.stderr, r.stderr


ALLOW_C = """#include <pmkit/pmkit.h>
void ext_a(void);
void ext_b(void);
struct s { long v; };
PMKIT_FASE void bump(struct s *p) { ext_a(); p->v += 1; ext_b(); }
int main(void) { return 0; }
"""


def test_whole_program_option_edges(run, tmp_path):
    """Found by a review: list options given twice, or in another order at the link, are one
    list; --trace given to the compile steps only is an error that says what to do, not a
    pile of undefined symbols; a bad option value names the option; --report on some objects
    only is not a conflict; an -flto object of a build without --whole-program is not taken
    for a whole-program object."""
    src, ext = tmp_path / "allow.c", tmp_path / "ext.c"
    src.write_text(ALLOW_C)
    ext.write_text("void ext_a(void) {}\nvoid ext_b(void) {}\n")
    native = str(tmp_path / "ext.o")
    subprocess.run(["clang-16", "-c", str(ext), "-o", native], check=True)
    wp = ["cc", "--mode=clobber", "--whole-program"]
    obj = str(tmp_path / "allow.o")
    r = run(*wp, "--clobber-allow=ext_a", "--clobber-allow=ext_b", "-c", str(src), "-o", obj)
    assert r.returncode == 0, r.stderr
    r = run(*wp, "--clobber-allow=ext_b,ext_a", obj, native, "-o", str(tmp_path / "x"))
    assert r.returncode == 0, r.stderr
    traced = str(tmp_path / "traced.o")
    allow = "--clobber-allow=ext_a,ext_b"
    assert run(*wp, allow, "--trace", "-c", str(src), "-o", traced).returncode == 0
    r = run(*wp, allow, traced, native, "-o", str(tmp_path / "x"))
    assert r.returncode != 0
    assert "was compiled with --trace: give --trace to the link step too" in r.stderr, r.stderr
    r = run(*wp, allow, "-mllvm", "-pmkit-clobber-setting=bogus", "-c", str(src), "-o", obj)
    assert r.returncode != 0
    assert "bad option '-pmkit-clobber-setting=bogus'" in r.stderr, r.stderr
    reported = str(tmp_path / "reported.o")
    assert run(*wp, allow, "--report", "-c", str(src), "-o", reported).returncode == 0
    assert run(*wp, allow, "-c", str(ext), "-o", str(tmp_path / "ext-wp.o")).returncode == 0
    r = run(*wp, allow, reported, str(tmp_path / "ext-wp.o"), "-o", str(tmp_path / "x"))
    assert r.returncode == 0 and "pmkit-clobber: bump" in r.stderr, r.stderr
    thin = str(tmp_path / "thin.o")
    assert run("cc", "--mode=robust", "-flto=thin", "-c", str(ext), "-o", thin).returncode == 0
    r = run("cc", "--mode=robust", "-flto=thin", "-fuse-ld=lld", "-shared", thin,
            "-o", str(tmp_path / "libthin.so"))  # fmt: skip
    assert r.returncode == 0 and "compiled with --whole-program" not in r.stderr, r.stderr


ROOTED_C = """#include <pmkit/pmkit.h>
int main(int c, char **v) {
  pmkit_pool *p;
  void *r, *b;
  if (pmkit_pool_open(v[1], 0, &p) || pmkit_root(p, 64, &r) || pmkit_alloc(p, 64, &b))
    return 2;
  *(void **)r = b;
  pmkit_persist(r, 8);
  return pmkit_pool_close(p);
}
"""


def test_pool_gc_refuses_a_pool_check_rejects(run, shm, tmp_path):
    """gc frees what it cannot reach: with the root offset in the state page pointing into
    the root block instead of at it, it would have found nothing reachable and freed every
    live block. It runs the full check first and refuses, freeing nothing."""
    import struct

    pool = shm / "gc-refuse.pool"
    pool.unlink(missing_ok=True)
    assert run("pool", "create", str(pool), "--size", "8M").returncode == 0
    src = tmp_path / "rooted.c"
    src.write_text(ROOTED_C)
    assert run("cc", str(src), "-o", str(tmp_path / "rooted")).returncode == 0
    assert subprocess.run([str(tmp_path / "rooted"), str(pool)]).returncode == 0
    with open(pool, "r+b") as f:  # the state page: run_gen, root_off, root_size at 4096
        f.seek(4096 + 8)
        (off,) = struct.unpack("<Q", f.read(8))
        f.seek(4096 + 8)
        f.write(struct.pack("<Q", off + 8))
    assert run("pool", "check", str(pool)).returncode == 1
    r = run("pool", "gc", str(pool))  # open refuses it: the offset fails the state's check word
    assert r.returncode == 1 and "do not match their check word" in r.stderr, r.stderr
    with open(pool, "r+b") as f:
        f.seek(4096 + 8)
        f.write(struct.pack("<Q", off))
    r = run("pool", "info", str(pool))
    assert "allocated: 2 blocks" in r.stdout, r.stdout


def test_pool_create_killed_leaves_nothing(run, shm):
    """A pool is built as an unnamed file and named once complete: `kill -9` at any moment of
    `pmkit pool create` leaves either no file or a whole pool, never a PATH.pmkit-new.PID."""
    import signal
    import time

    pool = shm / "killed-create.pool"
    for delay in (0.02, 0.05, 0.1, 0.2, 0.4):
        pool.unlink(missing_ok=True)
        p = subprocess.Popen(
            [sys.executable, "-m", "pmkit", "pool", "create", str(pool), "--size", "1G"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(delay)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not list(shm.glob("killed-create.pool.pmkit-new.*")), delay
        if pool.exists():
            assert run("pool", "check", str(pool)).returncode == 0
    pool.unlink(missing_ok=True)
