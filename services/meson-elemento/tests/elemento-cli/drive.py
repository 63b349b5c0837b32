#!/usr/bin/env python3
"""Runs one elemento-cli command on a pseudo-terminal, as a person would.

usage: drive.py ELEMENTO_PY [--line PROMPT TEXT | --secret PROMPT TEXT]... -- ARG...

--line waits for PROMPT in the output, then types TEXT and Enter (for
input()). --secret does the same for pwinput, which reads one key at a time
in raw mode and flushes what was typed before it switched: each key is typed
once the previous one was echoed (as a mask) and the terminal is raw again
(its termios state, read on the master side), never by timing. Prints what the command printed; exits with its exit code
(124 if it ran over 120 s)."""

import os
import pty
import select
import sys
import termios
import time

DEADLINE = time.monotonic() + 120


class Timeout(Exception):
    pass


class Term:
    def __init__(self, fd):
        self.fd = fd
        self.out = b""
        self.eof = False

    def pump(self, wait=0.05):
        if time.monotonic() > DEADLINE:
            raise Timeout()
        ready, _, _ = select.select([self.fd], [], [], wait)
        if ready:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:
                chunk = b""
            if chunk:
                self.out += chunk
            else:
                self.eof = True

    def wait_for(self, text, start):
        while text not in self.out[start:]:
            if self.eof:
                return None
            self.pump()
        return self.out.index(text, start) + len(text)

    def raw(self):
        return not termios.tcgetattr(self.fd)[3] & termios.ICANON

    def wait_raw(self):
        while not self.raw():
            if self.eof:
                return False
            self.pump(0.01)
        return True


def main(argv):
    elemento, rest = argv[0], argv[1:]
    steps = []
    while rest and rest[0] in ("--line", "--secret"):
        steps.append((rest[0], rest[1].encode(), rest[2].encode()))
        rest = rest[3:]
    if not rest or rest[0] != "--":
        sys.exit(__doc__)
    python = os.path.join(os.path.dirname(elemento), "python3")
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(python, [python, elemento] + rest[1:])
    term = Term(fd)
    try:
        seen = 0
        for kind, prompt, text in steps:
            seen = term.wait_for(prompt, seen)
            if seen is None:
                break
            if kind == "--line":
                os.write(fd, text + b"\r")
                continue
            for key in list(text) + [ord("\r")]:
                if not term.wait_raw():
                    break
                before = len(term.out)
                os.write(fd, bytes([key]))
                # Read once pwinput echoed its mask (raw mode echoes
                # nothing itself): the terminal has left raw mode by then.
                while len(term.out) == before and not term.eof:
                    term.pump(0.01)
        while not term.eof:
            term.pump()
    except Timeout:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        sys.stdout.write(term.out.decode(errors="replace"))
        return 124
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(term.out.decode(errors="replace"))
    sys.stdout.flush()
    return os.waitstatus_to_exitcode(status) & 0xFF


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
