"""``python -m attnlab`` (also what ``torchrun -m attnlab train ...`` runs)."""

from .lab.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
