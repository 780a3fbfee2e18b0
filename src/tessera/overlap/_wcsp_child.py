"""Child process of :func:`tessera.overlap.wcsp._run_child`: model on stdin, answer on stdout.

ToulBar2 keeps process-global options and prints from C++; running it here keeps both away from
the caller. Whatever the solver prints is sent to stderr so stdout carries only the answer.
"""

from __future__ import annotations

import os
import pickle
import sys

from tessera.overlap.wcsp import solve_model


def main() -> None:
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    model = pickle.load(sys.stdin.buffer)
    pickle.dump(solve_model(model, int(os.environ["TESSERA_WCSP_SECONDS"])), out)
    out.close()


if __name__ == "__main__":
    main()
