# SPDX-License-Identifier: Apache-2.0
"""Man pages and shell completion for the pmkit command, generated from its one command tree
(pmkit.main.build_parser(full=True)) by argparse-manpage and shtab: a page per command
(pmkit.1, pmkit-explore.1, pmkit-pool-check.1, ...), bash and zsh completion. The build runs it
(target pmkit-cli-docs) and `make install` / the Debian package install its output.

    python scripts/cli_docs.py OUT_DIR
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import shtab
from argparse_manpage.manpage import Manpage
from pmkit import __version__
from pmkit.main import build_parser

EXIT_STATUS = (
    "0: success. 1: a check failed (an inconsistent pool, a crash image the checker rejected, "
    "a run of the suite that failed, a demo step that did not come out as expected). 2: a "
    "usage or environment error, with one line on stderr saying which."
)


def commands(ap: argparse.ArgumentParser):
    """Every parser of the tree, depth first, each with its one-line help as the short
    description of its page's NAME."""
    yield ap
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                sub.man_short_description = helps.get(name) or ""
                yield from commands(sub)


def man_page(ap: argparse.ArgumentParser) -> str:
    man = Manpage(ap)
    man.prog = ap.prog.replace(" ", "-")  # the page's title and name
    man.source = f"pmkit {__version__}"
    man.manual = "pmkit manual"
    text = str(man)
    return text + f'.SH "EXIT STATUS"\n{man.format_text(EXIT_STATUS)}\n'


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    args = ap.parse_args(argv)
    tree = build_parser(with_bench=True, full=True)
    tree.man_short_description = "crash consistency for persistent memory"
    man1 = args.out / "man" / "man1"
    man1.mkdir(parents=True, exist_ok=True)
    for old in man1.glob("pmkit*.1"):
        old.unlink()
    pages = 0
    for p in commands(tree):
        (man1 / f"{p.prog.replace(' ', '-')}.1").write_text(man_page(p))
        pages += 1
    comp = args.out / "completion"
    comp.mkdir(parents=True, exist_ok=True)
    # where the tree offers nothing, bash's own file-name completion (-o default)
    bash = shtab.complete(tree, shell="bash").replace(
        "complete -o filenames -F", "complete -o default -o filenames -F"
    )
    assert "-o default" in bash, "shtab's bash script changed: file names are no fallback"
    (comp / "pmkit.bash").write_text(bash)
    (comp / "_pmkit").write_text(shtab.complete(tree, shell="zsh"))
    print(f"cli_docs: {pages} man pages and bash/zsh completion in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
