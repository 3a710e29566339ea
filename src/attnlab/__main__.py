"""``python -m attnlab`` (also what ``torchrun -m attnlab train ...`` runs)."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
