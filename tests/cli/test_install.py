# SPDX-License-Identifier: Apache-2.0
"""After `cmake --install`, a user's CMake project finds pmkit with find_package(pmkit) and links
pmkit::pmkit, and a plain Makefile user gets the flags from pkg-config."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(user C)
find_package(pmkit 0.2 REQUIRED)
add_executable(user main.c)
target_link_libraries(user PRIVATE pmkit::pmkit)
"""

USER_MAIN = r"""#include <pmkit/pmkit.h>
#include <stdio.h>
int main(void) {
  printf("%s\n", pmkit_strerror(PMKIT_E_BUSY));
  return pmkit_in_pool(&main);
}
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not (ROOT / "build" / "build.ninja").exists():
        pytest.skip("no build tree")
    pre = tmp_path_factory.mktemp("prefix")
    subprocess.run(
        ["cmake", "--install", str(ROOT / "build"), "--prefix", str(pre)],
        check=True,
        capture_output=True,
    )
    return pre


def test_installed_layout(prefix):
    for rel in (
        "include/pmkit/pmkit.h",
        "include/pmkit/abi.h",
        "lib/cmake/pmkit/pmkitConfig.cmake",
        "lib/pkgconfig/pmkit.pc",
        "lib/libpmkit.a",
        "lib/pmkit/pmkit-passes.so",
    ):
        assert (prefix / rel).exists(), rel


def test_man_pages_and_completion(prefix):
    """A man page per command of pmkit's command tree, every option of it in the page, and
    bash completion that completes commands and options (the explorer's included), all
    installed from the one tree (zsh: test_zsh_completion)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    os.environ.setdefault("PMKIT_BUILD_DIR", str(ROOT / "build"))
    import cli_docs
    from pmkit.main import build_parser

    man1 = prefix / "share" / "man" / "man1"
    tree = list(cli_docs.commands(build_parser(full=True)))
    assert len(tree) > 15
    for p in tree:
        page = (man1 / f"{p.prog.replace(' ', '-')}.1").read_text()
        for a in p._actions:
            for opt in set(a.option_strings) - {"-h", "--help"}:
                assert opt.replace("-", "\\-") in page or opt in page, (p.prog, opt)
        assert '.SH "EXIT STATUS"' in page
    explore = (man1 / "pmkit-explore.1").read_text()
    assert "robustness" in explore and "require" in explore
    comp = prefix / "share" / "bash-completion" / "completions" / "pmkit"
    assert subprocess.run(["bash", "-n", str(comp)]).returncode == 0

    def complete(*words: str) -> list[str]:
        script = (
            f"source {comp}; COMP_WORDS=({' '.join(words)}); "
            f"COMP_CWORD={len(words) - 1}; _shtab_pmkit; echo \"${{COMPREPLY[@]}}\""
        )
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        return r.stdout.split()

    assert complete("pmkit", "po") == ["pool"]
    assert complete("pmkit", "explore", "--rob") == ["--robustness"]
    assert "--budget" in complete("pmkit", "explore", "--")
    # file names where a file goes (a pool, a trace)
    page = man1 / "pmkit-pool-info.1"
    assert complete("pmkit", "pool", "info", str(page)[:-4]) == [str(page)]
    assert complete("pmkit", "explore", "--trace", str(page)[:-4]) == [str(page)]
    assert (prefix / "share" / "zsh" / "vendor-completions" / "_pmkit").exists()


# Typed into an interactive zsh on a pseudo-terminal (zsh's zpty), with the installed _pmkit
# in its fpath: each line a text to type with a tab, then what the line must end up showing.
ZSH_SESSION = r"""
zmodload zsh/zpty
zpty z 'TERM=dumb zsh -f -i'
zpty -w z "PS1='> '; fpath=($1 \$fpath); autoload -U compinit; compinit -u -D; pmkit() {}"
out=
type() {  # type $1 and a tab, read until $2 shows (5 s at most)
  zpty -w -n z "$1"$'\t'
  for i in {1..50}; do
    zpty -r -t z chunk && out+=$chunk
    [[ ${out//$'\b'/} == *"$2"* ]] && return 0
    sleep 0.1
  done
  print -r -- "did not complete '$1' to '$2': ${out[-300,-1]}"
  return 1
}
type 'pmkit expl' 'pmkit explore ' && type '--requ' '--require-exhaustive ' &&
  zpty -w z $'\C-u' && type 'pmkit pool in' 'pool info ' && print ok
zpty -d z
"""


def test_zsh_completion(prefix, tmp_path):
    """The installed zsh completion completes commands and the explorer's options in a real
    interactive zsh (the completion file is generated from the same tree as bash's)."""
    script = tmp_path / "session.zsh"
    script.write_text(ZSH_SESSION)
    comp = prefix / "share" / "zsh" / "vendor-completions"
    r = subprocess.run(["zsh", "-f", str(script), str(comp)], capture_output=True, text=True,
                       timeout=60)  # fmt: skip
    assert r.stdout.strip().endswith("ok"), r.stdout[-500:] + r.stderr


def test_find_package(prefix, tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(USER_CMAKE)
    (tmp_path / "main.c").write_text(USER_MAIN)
    b = tmp_path / "b"
    subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(b), "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={prefix}"]
        + ["-DCMAKE_C_COMPILER=clang-16"],
        check=True,
        capture_output=True,
    )
    subprocess.run(["cmake", "--build", str(b)], check=True, capture_output=True)
    r = subprocess.run([str(b / "user")], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout == "PMKIT_E_BUSY\n"


@pytest.mark.skipif(not shutil.which("pkg-config"), reason="pkg-config not installed")
def test_pkg_config(prefix, tmp_path):
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "pmkit"], env=env, capture_output=True, text=True
    ).stdout.split()
    incs = [Path(f[2:]).resolve() for f in flags if f.startswith("-I")]
    assert (prefix / "include").resolve() in incs and "-lpmkit" in flags
    (tmp_path / "main.c").write_text(USER_MAIN)
    exe = tmp_path / "user"
    subprocess.run(
        ["clang-16", str(tmp_path / "main.c"), "-o", str(exe), *flags, f"-Wl,-rpath,{prefix}/lib"],
        check=True,
    )
    assert subprocess.run([str(exe)], capture_output=True, text=True).stdout == "PMKIT_E_BUSY\n"


# A user's program with no flush written: two counters in different cache lines, b never ahead
# of a. Robust mode orders the stores; without it, x86 may persist b before a.
USER_PM = r"""#include <pmkit/pmkit.h>
#include <stdio.h>
#include <string.h>
struct root { long a; char pad[120]; long b; };
int main(int argc, char **argv) {
  pmkit_pool *pool;
  struct root *r;
  int run = argc == 3 && !strcmp(argv[1], "run");
  if ((run ? pmkit_pool_create(argv[2], 2 << 20, NULL, &pool)
           : pmkit_pool_open(argv[2], NULL, &pool)) ||
      pmkit_root(pool, sizeof *r, (void **)&r))
    return 2;
  if (run) {
    pmkit_mark_begin("op"); /* crash points inside only: the pool's set-up is not ours */
    for (long i = 1; i <= 3; i++) {
      r->a = i;
      r->b = i;
    }
    pmkit_mark_end("op");
  } else if (r->b > r->a) {
    printf("b %ld is ahead of a %ld\n", r->b, r->a);
    return 1;
  }
  pmkit_pool_close(pool);
  return 0;
}
"""


@pytest.fixture(scope="module")
def moved(prefix, tmp_path_factory):
    """The installed prefix copied elsewhere: it must not depend on where it was installed,
    nor on the checkout (the command runs the system's python3 on its own package)."""
    dst = tmp_path_factory.mktemp("moved") / "pmkit"
    shutil.copytree(prefix, dst, symlinks=True)
    return dst


def _installed(moved: Path, *args: str, cwd: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("PMKIT_BUILD_DIR", "PYTHONPATH")}
    env["PATH"] = f"{moved / 'bin'}:/usr/bin:/bin"
    return subprocess.run(
        [str(moved / "bin" / "pmkit"), *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def test_installed_command_runs_from_the_prefix_alone(moved, tmp_path):
    r = _installed(moved, "--help", cwd=tmp_path)
    assert r.returncode == 0 and "usage: pmkit" in r.stdout, r.stderr
    assert (moved / "bin" / "pmkit").is_symlink()
    r = _installed(moved, "cc", "--mode=robust", "--trace", "--pmkit-dry-run", "c.c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert str(ROOT) not in r.stdout and str(moved / "lib" / "pmkit") in r.stdout, r.stdout
    if shutil.which("musl-gcc"):
        (tmp_path / "w.c").write_text("int main(void) { return 0; }\n")
        r = _installed(moved, "wpp", "cc", "w.c", "-o", "w", cwd=tmp_path)
        assert r.returncode == 0 and (tmp_path / "w").exists(), r.stderr


def test_installed_robust_build_is_explored(moved, tmp_path):
    """From the moved prefix alone: the user's program built in robust mode with tracing is
    explored clean under x86; the same built without the mode fails for the counters."""
    (tmp_path / "c.c").write_text(USER_PM)
    verdicts = {}
    for name, mode in (("robust", ["--mode=robust"]), ("plain", [])):
        exe = tmp_path / name
        b = _installed(moved, "cc", *mode, "--trace", "-O1", "c.c", "-o", str(exe), cwd=tmp_path)
        assert b.returncode == 0, b.stderr
        r = _installed(
            moved, "explore", "--no-progress", "--model", "x86", "--mark", "op", "--json",
            f"{name}.json",
            "--check", f"{exe} check {{pool}}", "--", str(exe), "run", "p.pool", cwd=tmp_path,
        )  # fmt: skip
        (tmp_path / "p.pool").unlink(missing_ok=True)
        rep = json.loads((tmp_path / f"{name}.json").read_text())
        verdicts[name] = (r.returncode, rep["result"])
        if name == "plain":
            assert "is ahead of a" in r.stdout, r.stdout
    assert verdicts == {"robust": (0, "ok"), "plain": (1, "failed")}, verdicts


USER_MODES_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(user C)
find_package(pmkit 0.2 REQUIRED)
foreach(t robust_opt robust_traced plain_traced clobber_eadr whole ssapp_compiler)
  add_executable(${t} c.c)
endforeach()
pmkit_mode_target(ssapp_compiler MODE ssapp SETTING compiler)
pmkit_mode_target(robust_opt MODE robust SETTING opt)
pmkit_mode_target(robust_traced MODE robust TRACE)
pmkit_trace_target(plain_traced)
pmkit_mode_target(clobber_eadr MODE clobber OPTIONS --clobber-domain=eadr)
pmkit_mode_target(whole MODE robust WHOLE_PROGRAM)
"""


def test_cmake_mode_targets(moved, tmp_path):
    """A user's CMake project builds a target in each way the package offers
    (pmkit_mode_target with a setting, with TRACE, with WHOLE_PROGRAM, with options;
    pmkit_trace_target), from the moved prefix; the traced robust target explores clean and
    the traced plain one fails; a wrong option stops the configure, naming it."""
    (tmp_path / "CMakeLists.txt").write_text(USER_MODES_CMAKE)
    (tmp_path / "c.c").write_text(USER_PM)
    env = {k: v for k, v in os.environ.items() if k not in ("PMKIT_BUILD_DIR", "PYTHONPATH")}
    b = tmp_path / "b"
    cfg = subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(b), "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={moved}",
         "-DCMAKE_C_COMPILER=clang-16"], capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    bld = subprocess.run(
        ["cmake", "--build", str(b), "-v"], capture_output=True, text=True, env=env
    )
    assert bld.returncode == 0, bld.stdout[-3000:] + bld.stderr
    for flags in ("--mode=robust --robust-setting=opt", "--mode=robust --whole-program",
                  "--mode=clobber --clobber-domain=eadr", "--mode=robust --trace",
                  "--mode=ssapp --ssapp-fence=compiler"):  # fmt: skip
        assert f"pmkit cc {flags} --as-launcher" in bld.stdout, flags
    verdicts = {}
    for name in ("robust_traced", "plain_traced"):
        exe = b / name
        r = _installed(
            moved, "explore", "--no-progress", "--mark", "op", "--json", f"{name}.json",
            "--check", f"{exe} check {{pool}}", "--", str(exe), "run", "p.pool", cwd=tmp_path,
        )  # fmt: skip
        (tmp_path / "p.pool").unlink(missing_ok=True)
        rep = json.loads((tmp_path / f"{name}.json").read_text())
        verdicts[name] = (r.returncode, rep["result"])
    assert verdicts == {"robust_traced": (0, "ok"), "plain_traced": (1, "failed")}, verdicts
    # a wrong setting or option stops the configure, naming it: pmkit's own options and
    # clang's (a dry run let `--ssapp-setting=compiler` and `--frob` through to the build)
    for k, (line, named) in enumerate((
        ("MODE robust SETTING fast", "fast"),
        ("MODE ssapp SETTING sometimes", "sometimes"),
        ("MODE clobber OPTIONS --frob", "--frob"),
    )):  # fmt: skip
        (tmp_path / "CMakeLists.txt").write_text(
            USER_MODES_CMAKE + f"pmkit_mode_target(plain_traced {line})\n"
        )
        cfg = subprocess.run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / f"b{k + 2}"),
                              f"-DCMAKE_PREFIX_PATH={moved}"], capture_output=True, text=True,
                             env=env)  # fmt: skip
        assert cfg.returncode != 0 and named in cfg.stderr, (line, cfg.stderr)
        assert ";" not in cfg.stderr.split("pmkit_mode_target(plain_traced)")[-1].split(":")[0]


@pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="dpkg-deb not installed")
def test_debian_package(tmp_path):
    """`cpack -G DEB` makes a package of the same install: its dependencies name the
    compiler and python it runs, and its contents, unpacked anywhere, work as a prefix."""
    if not (ROOT / "build" / "build.ninja").exists():
        pytest.skip("no build tree")
    r = subprocess.run(["cpack", "-G", "DEB", "-B", str(tmp_path)], cwd=ROOT / "build",
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    (deb,) = tmp_path.glob("pmkit_*_amd64.deb")
    info = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True)
    for dep in ("python3 (>= 3.11)", "clang-16", "lld-16"):
        assert dep in info.stdout, info.stdout
    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    usr = root / "usr"
    for rel in ("bin/pmkit", "lib/pmkit/pmkit-passes.so", "lib/cmake/pmkit/pmkitConfig.cmake",
                "share/pmkit/pmkit-paths.json", "share/pmkit/python/pmkit/main.py",
                "share/man/man1/pmkit-explore.1",
                "share/bash-completion/completions/pmkit"):  # fmt: skip
        assert (usr / rel).exists(), rel
    (tmp_path / "c.c").write_text(USER_PM)
    r = _installed(usr, "cc", "--mode=robust", "--pmkit-dry-run", "c.c", cwd=tmp_path)
    assert r.returncode == 0 and str(usr / "lib" / "pmkit" / "pmkit-passes.so") in r.stdout, r
