r"""Metrics of grapheme-to-phoneme conversion against one or more reference pronunciations.

* **Phone error rate** (PER): :math:`\sum_w d(\hat y_w, r_w) / \sum_w |r_w|`, the Levenshtein
  distance (substitutions, insertions, deletions) of each output to its *best* reference
  :math:`r_w` (the one at the smallest distance; on a tie, the shorter, then the first), over
  the total length of those references.
* **Word error rate** (WER): the fraction of words whose output equals none of the references.
* **Length accuracy**: the fraction of words whose output has as many phones as one of the
  references: the output length the model decides; beside it, the same for the length of the
  spelling (a model that emitted one phone per letter).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["G2PScore", "best_reference", "edit_distance"]


def edit_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Levenshtein distance between two sequences (unit costs), in ``O(len(a) * len(b))``."""
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        previous = current
    return previous[-1]


def best_reference(output: Sequence[str], references: Sequence[Sequence[str]]) -> tuple[int, int]:
    """``(errors, reference_length)`` of ``output`` against its closest reference.

    Raises:
        ValueError: no reference.
    """
    if not references:
        raise ValueError("best_reference needs at least one reference pronunciation, got none")
    return min((edit_distance(output, ref), len(ref)) for ref in references)


@dataclass
class G2PScore:
    """Running PER / WER counts; :meth:`add` one word at a time."""

    words: int = 0
    word_errors: int = 0
    phone_errors: int = 0
    phones: int = 0
    length_hits: int = 0
    letters_length_hits: int = 0

    def add(
        self, output: Sequence[str], references: Sequence[Sequence[str]], letters: int = -1
    ) -> None:
        """Count one word's ``output`` against its ``references`` (``letters``: the length of
        its spelling, for :attr:`letters_length_accuracy`)."""
        errors, length = best_reference(output, references)
        self.words += 1
        self.word_errors += errors > 0
        self.phone_errors += errors
        self.phones += length
        lengths = {len(ref) for ref in references}
        self.length_hits += len(output) in lengths
        self.letters_length_hits += letters in lengths

    @property
    def length_accuracy(self) -> float:
        """The fraction of words output with a reference's number of phones."""
        return self.length_hits / max(self.words, 1)

    @property
    def letters_length_accuracy(self) -> float:
        """The same for one phone per letter (the words added with their ``letters``)."""
        return self.letters_length_hits / max(self.words, 1)

    @property
    def per(self) -> float:
        """Phone error rate (0 when nothing was counted)."""
        return self.phone_errors / max(self.phones, 1)

    @property
    def wer(self) -> float:
        """Word error rate (0 when nothing was counted)."""
        return self.word_errors / max(self.words, 1)
