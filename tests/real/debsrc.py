# SPDX-License-Identifier: Apache-2.0
"""Debian source packages for the real-program tests, fetched at test time.

`apt-get source` runs with an apt configuration of the project's own (deb-src lines for
Debian 12 and its updates, signed by Debian's archive key, lists and downloads under the
cache folder), so the machine's apt configuration is neither read for sources nor changed.
apt verifies what it fetches (the signed Release file, then each file's hash) and
dpkg-source unpacks it with Debian's patches applied. The cache folder (`.cache/debsrc`
in the checkout, ignored by git; PMKIT_REAL_CACHE moves it) keeps each unpacked tree, so
a second run fetches nothing. No third-party source is ever committed.

    python tests/real/debsrc.py PACKAGE VERSION [BINARY]   # prints the unpacked tree
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SUITES = [
    ("http://deb.debian.org/debian", "bookworm"),
    ("http://deb.debian.org/debian", "bookworm-updates"),
    ("http://deb.debian.org/debian-security", "bookworm-security"),
]
LISTS_MAX_AGE = 24 * 3600  # seconds before the source lists are fetched again


class SourceError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("PMKIT_REAL_CACHE") or ROOT / ".cache" / "debsrc")


@contextmanager
def _locked(cache: Path):
    """One fetch at a time per cache (two test runs may share it)."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _apt_env(cache: Path, kind: str = "deb-src") -> dict[str, str]:
    """Write the project's apt configuration under cache/apt (source packages, kind deb-src)
    or cache/apt-deb (binary packages, kind deb, amd64 only); return the environment that
    makes apt-get use it (APT_CONFIG)."""
    apt = cache / ("apt" if kind == "deb-src" else "apt-deb")
    for d in ("lists/partial", "archives/partial", "sources.list.d", "preferences.d"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    lines = [f"{kind} [signed-by={KEYRING}] {uri} {suite} main\n" for uri, suite in SUITES]
    (apt / "sources.list").write_text("".join(lines))
    conf = {
        "Dir::Etc::SourceList": apt / "sources.list",
        "Dir::Etc::SourceParts": apt / "sources.list.d",
        "Dir::Etc::Preferences": apt / "preferences",
        "Dir::Etc::PreferencesParts": apt / "preferences.d",
        "Dir::State::Lists": apt / "lists",
        "Dir::Cache": apt / "cache",
        "Dir::Cache::archives": apt / "archives",
        # the files are the caller's (no switch to the _apt user, which could not write here)
        "APT::Sandbox::User": "root" if os.geteuid() == 0 else os.environ.get("USER", ""),
        "Debug::NoLocking": "true",  # apt's own locks are on the system's folders
        "APT::Architectures": "amd64",
        "Acquire::Languages": "none",
    }
    (apt / "apt.conf").write_text("".join(f'{k} "{v}";\n' for k, v in conf.items()))
    return dict(os.environ, APT_CONFIG=str(apt / "apt.conf"), LC_ALL="C")


def _run(cmd: list[str], env: dict, cwd: Path | None = None) -> str:
    r = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SourceError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr.strip()[-2000:]}")
    return r.stdout


def _update(cache: Path, env: dict) -> None:
    stamp = Path(env["APT_CONFIG"]).parent / "lists" / ".updated"
    if stamp.exists() and time.time() - stamp.stat().st_mtime < LISTS_MAX_AGE:
        return
    if not shutil.which("dpkg-source"):
        raise SourceError("dpkg-source not found: install the Debian package dpkg-dev")
    _run(["apt-get", "-q", "update"], env)
    stamp.touch()


def versions(package: str, env: dict) -> list[str]:
    """The versions of a source package the configured suites offer, newest first."""
    out = _run(["apt-cache", "showsrc", "--only-source", package], env)
    vs = [ln.split(":", 1)[1].strip() for ln in out.splitlines() if ln.startswith("Version:")]

    def newer(a: str, b: str) -> bool:
        return subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0

    ordered: list[str] = []
    for v in dict.fromkeys(vs):
        i = 0
        while i < len(ordered) and not newer(v, ordered[i]):
            i += 1
        ordered.insert(i, v)
    return ordered


def choose(pin: str, offered: list[str]) -> str:
    """The pinned version if Debian still offers it; otherwise the newest update of the same
    upstream version and Debian revision (a pin of 2.1.12-stable-8+deb12u1 takes
    2.1.12-stable-8+deb12u2): an old stable update leaves the archive when a new one comes."""
    if pin in offered:
        return pin
    base = pin.split("+deb12u")[0]
    same = [v for v in offered if v == base or v.startswith(base + "+deb12u")]
    if same:
        return same[0]
    raise SourceError(f"Debian 12 no longer offers a version of {pin} (offered: {offered})")


def fetch(package: str, pin: str, log=print, binary: str | None = None) -> tuple[Path, str]:
    """The unpacked source tree of package at the pinned version (see choose), fetched and
    verified by apt on first use, then taken from the cache. Returns (tree, version).

    Some source packages are not served whole by every mirror (uthash's second upstream
    tarball and Debian's patch tarball answer 404 on the machines this runs on). For a
    package whose binary package is its sources (a header-only library), `binary` names that
    package: when the source cannot be fetched, Debian's build of it is taken instead
    (`apt-get download` through the same configuration, binary lists, then `dpkg-deb -x`),
    the tree is its unpacked contents, and the version is the binary package's."""
    if binary is not None and sorted(cache_dir().glob(f"deb/{binary}_{pin}*/.complete")):
        return _fetch_binary(binary, pin)  # taken before (the cache)
    try:
        return _fetch_source(package, pin, log)
    except SourceError as e:
        if binary is None or "404" not in str(e):
            raise
        log(
            f"  {package} {pin}: the source package is not served whole here (404); taking "
            f"Debian's binary package {binary}"
        )
        return _fetch_binary(binary, pin)


def _fetch_binary(package: str, pin: str) -> tuple[Path, str]:
    """Debian's binary package `package` of the source version `pin` (or a binary rebuild of
    it, pin+bN), unpacked: (tree, version)."""
    cache = cache_dir()
    with _locked(cache):
        done = sorted(cache.glob(f"deb/{package}_{pin}*/.complete"))
        if done:
            return Path(done[-1].read_text().strip()), done[-1].parent.name.split("_", 1)[1]
        env = _apt_env(cache, "deb")
        _update(cache, env)
        out = _run(["apt-cache", "madison", package], env)
        offered = [ln.split("|")[1].strip() for ln in out.splitlines() if "|" in ln]
        same = [v for v in offered if v == pin or v.startswith(pin + "+b")]
        if not same:
            raise SourceError(f"Debian 12 offers no binary {package} of {pin} ({offered})")
        version = same[0]
        dest = cache / "deb" / f"{package}_{version}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        _run(["apt-get", "-q", "download", f"{package}={version}"], env, cwd=dest)
        debs = list(dest.glob("*.deb"))
        if len(debs) != 1:
            raise SourceError(f"apt-get download {package}={version} left {len(debs)} files")
        _run(["dpkg-deb", "-x", str(debs[0]), str(dest / "tree")], env)
        (dest / ".complete").write_text(str(dest / "tree"))
        return dest / "tree", version


def _fetch_source(package: str, pin: str, log) -> tuple[Path, str]:
    cache = cache_dir()
    with _locked(cache):
        exact = cache / "src" / f"{package}_{pin}" / ".complete"
        done = [exact] if exact.exists() else []
        done += sorted(cache.glob(f"src/{package}_{pin.split('+deb12u')[0]}*/.complete"))
        if done:
            return Path(done[0].read_text().strip()), done[0].parent.name.split("_", 1)[1]
        env = _apt_env(cache)
        _update(cache, env)
        version = choose(pin, versions(package, env))
        if version != pin:
            log(f"  {package}: pinned {pin}, Debian 12 now ships {version}")
        dest = cache / "src" / f"{package}_{version}"
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        _run(["apt-get", "-q", "source", f"{package}={version}"], env, cwd=dest)
        trees = [p for p in dest.iterdir() if p.is_dir()]
        if len(trees) != 1:
            raise SourceError(f"apt-get source {package}={version} unpacked {len(trees)} trees")
        (dest / ".complete").write_text(str(trees[0]))
        return trees[0], version


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    try:
        tree, version = fetch(*sys.argv[1:3], lambda m: print(m, file=sys.stderr), *sys.argv[3:])
    except SourceError as e:
        print(f"debsrc: {e}", file=sys.stderr)
        return 1
    print(tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
