"""What the crafted-state tests share (``test_hostile_state``, ``test_hostile_catalogs``): a
snapshot of a tree, to prove nothing outside a log's directory changed, and a victim
directory beside the log's, holding what an attacker would like blog to touch."""

from __future__ import annotations

import hashlib
import os
import stat

import blog


def snapshot(root: str) -> dict[str, tuple]:
    """Every entry under ``root``: its kind, mode, owner, and content's digest or link."""
    out: dict[str, tuple] = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what = os.readlink(p)
            else:
                what = ""
            out[os.path.relpath(p, root)] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode),
                                             st.st_uid, what)
    return out



def victims(root: str) -> tuple[str, str]:
    """A sibling directory of the log's, with a blog file and a plain file in it: what an
    attacker would like blog to append to, cut or delete."""
    outside = os.path.join(root, "outside")
    os.mkdir(outside)
    victim = os.path.join(outside, "victim.blog")
    log_to(victim, "victim", 50)
    with open(os.path.join(outside, "passwd"), "w") as f:
        f.write("root:x:0:0::/root:/bin/sh\n")
    return outside, victim



def log_to(path: str, word: str, n: int) -> None:
    """``n`` events ``"<word> <i>"`` written to the file ``path`` by a session of its own."""
    s = blog.Session(name=word)
    out = blog.FileOutputStream(path)
    for i in range(n):
        s.get_logger(word).info(word + " {}", i)
    s.consume(out)
    out.close()
