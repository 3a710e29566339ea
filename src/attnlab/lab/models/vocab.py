"""Vocabularies: tokens <-> ids, for words and for characters.

Id 0 is always ``<pad>`` and id 1 always ``<unk>``, so that ``nn.Embedding(padding_idx=0)`` and
the unknown-word strategy (word dropout to ``<unk>``) need no lookup. Further special tokens
(``<bos>``, ``<eos>`` for a decoder) follow, then the corpus tokens by decreasing frequency.

A vocabulary's :meth:`~Vocabulary.state_dict` is plain JSON (lists, strings, booleans), so a
checkpoint can store it beside the weights.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

__all__ = ["Vocabulary", "CharVocabulary", "PAD", "UNK", "PAD_ID", "UNK_ID"]

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1


class Vocabulary:
    """A word vocabulary: ``<pad>`` = 0, ``<unk>`` = 1, then ``specials``, then tokens.

    Args:
        tokens: the corpus tokens, in id order (no duplicates, no specials).
        lowercase: whether tokens are lowercased before lookup (and were when built).
        specials: extra reserved tokens after ``<pad>`` and ``<unk>`` (e.g. ``"<bos>"``).

    Use :meth:`build` to count a corpus.
    """

    kind: ClassVar[str] = "word"

    def __init__(
        self,
        tokens: Iterable[str] = (),
        *,
        lowercase: bool = False,
        specials: Sequence[str] = (),
    ) -> None:
        self.lowercase = lowercase
        self.specials = tuple(specials)
        self._itos: list[str] = [PAD, UNK, *self.specials]
        self._stoi: dict[str, int] = {}
        for i, t in enumerate(self._itos):
            if t in self._stoi:
                raise ValueError(f"special token {t!r} is given twice")
            self._stoi[t] = i
        for t in tokens:
            if t in self._stoi:
                raise ValueError(f"token {t!r} is given twice (or clashes with a special token)")
            self._stoi[t] = len(self._itos)
            self._itos.append(t)

    @classmethod
    def build(
        cls,
        sequences: Iterable[Iterable[str]],
        *,
        min_count: int = 1,
        max_size: int | None = None,
        lowercase: bool = False,
        specials: Sequence[str] = (),
    ) -> Vocabulary:
        """Count ``sequences`` (e.g. the training sentences) and keep the frequent tokens.

        Args:
            sequences: token lists.
            min_count: keep tokens seen at least this often; rarer ones become ``<unk>``.
            max_size: at most this many entries in total, special tokens included.
            lowercase: lowercase tokens before counting and lookup.
            specials: extra reserved tokens after ``<pad>`` and ``<unk>``.

        Ties in frequency are broken alphabetically, so the ids are deterministic.
        """
        if min_count < 1:
            raise ValueError(f"min_count must be >= 1, got {min_count}")
        reserved = 2 + len(specials)
        if max_size is not None and max_size < reserved:
            raise ValueError(f"max_size={max_size} leaves no room for the {reserved} specials")
        counts = Counter(cls._units(sequences, lowercase))
        for s in (PAD, UNK, *specials):
            counts.pop(s, None)
        kept = sorted(
            (t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t)
        )
        if max_size is not None:
            kept = kept[: max_size - reserved]
        return cls(kept, lowercase=lowercase, specials=specials)

    @staticmethod
    def _units(sequences: Iterable[Iterable[str]], lowercase: bool) -> Iterable[str]:
        """What :meth:`build` counts: here the (normalised) tokens themselves."""
        for seq in sequences:
            for t in seq:
                yield t.lower() if lowercase else t

    # ---- lookup -----------------------------------------------------------------------------
    pad_id: ClassVar[int] = PAD_ID
    unk_id: ClassVar[int] = UNK_ID

    def normalize(self, token: str) -> str:
        return token.lower() if self.lowercase else token

    def index(self, token: str) -> int:
        """The id of ``token``; ``<unk>`` (1) for a token outside the vocabulary."""
        return self._stoi.get(self.normalize(token), UNK_ID)

    def encode(self, tokens: Iterable[str]) -> list[int]:
        """Ids of ``tokens``; unknown ones map to ``<unk>`` (1)."""
        return [self.index(t) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Tokens of ``ids``."""
        return [self._itos[i] for i in ids]

    def token(self, i: int) -> str:
        return self._itos[i]

    @property
    def num_reserved(self) -> int:
        """Ids before the first corpus token: ``<pad>``, ``<unk>`` and the specials."""
        return 2 + len(self.specials)

    @property
    def tokens(self) -> list[str]:
        """All entries in id order, specials first."""
        return list(self._itos)

    def __len__(self) -> int:
        return len(self._itos)

    def __contains__(self, token: object) -> bool:
        return isinstance(token, str) and self.normalize(token) in self._stoi

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={len(self)}, lowercase={self.lowercase})"

    # ---- serialisation ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """A JSON-friendly description; :meth:`from_state_dict` rebuilds the same vocabulary."""
        n = self.num_reserved
        return {
            "kind": self.kind,
            "lowercase": self.lowercase,
            "specials": list(self.specials),
            "tokens": self._itos[n:],
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Vocabulary:
        if state.get("kind", cls.kind) != cls.kind:
            raise ValueError(
                f"this is a {state['kind']!r} vocabulary; load it with the matching class, "
                f"not {cls.__name__}"
            )
        return cls(
            state["tokens"], lowercase=bool(state["lowercase"]), specials=state.get("specials", ())
        )

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.state_dict() == self.state_dict()

    __hash__ = None  # mutable-looking container semantics; compare by content


class CharVocabulary(Vocabulary):
    """Characters of words, for character-level features of unseen words.

    Ids: ``<pad>`` = 0, ``<unk>`` = 1, ``<w>`` = 2 and ``</w>`` = 3 (begin / end of word), then
    characters by frequency. :meth:`encode_word` wraps every word in the boundary markers, so a
    convolution over characters can tell a suffix (``-ing``, ``-ly``) from the same letters
    inside a word. Case is kept by default: capitals signal proper nouns.
    """

    kind: ClassVar[str] = "char"
    BOW, EOW = "<w>", "</w>"

    def __init__(
        self, tokens: Iterable[str] = (), *, lowercase: bool = False, specials: Sequence[str] = ()
    ) -> None:
        specials = tuple(specials)
        if specials[:2] != (self.BOW, self.EOW):
            specials = (self.BOW, self.EOW, *specials)
        super().__init__(tokens, lowercase=lowercase, specials=specials)

    @staticmethod
    def _units(sequences: Iterable[Iterable[str]], lowercase: bool) -> Iterable[str]:
        for seq in sequences:
            for t in seq:
                yield from t.lower() if lowercase else t

    def encode_word(self, word: str, *, max_chars: int | None = None) -> list[int]:
        """Ids of ``<w> c_1 ... c_k </w>``; unknown characters map to ``<unk>``.

        A word longer than ``max_chars`` (markers included) keeps its first and last
        characters, where the morphology (prefixes, suffixes) is.
        """
        ids = [self._stoi[self.BOW], *(self.index(c) for c in word), self._stoi[self.EOW]]
        if max_chars is not None and len(ids) > max_chars:
            if max_chars < 2:
                raise ValueError(f"max_chars must be >= 2 (the word markers), got {max_chars}")
            head = max_chars // 2
            ids = ids[:head] + ids[len(ids) - (max_chars - head) :]
        return ids

    def encode(  # type: ignore[override]  # one id list per token
        self, tokens: Iterable[str], *, max_chars: int | None = None
    ) -> list[list[int]]:
        """Character ids of each token: one list per token (see :meth:`encode_word`)."""
        return [self.encode_word(t, max_chars=max_chars) for t in tokens]
