"""Matching the golden's TF1 variable names to the TF2 port's variables. No TensorFlow here.

Automatic matching, in order:
1. the same name once normalized: ":0" and a partition's "/part_<n>" dropped, `weights` ->
   `kernel`, `biases` and `bias_weights` -> `bias`, `embedding_weights` -> `embeddings`;
2. a unique match by suffix, on scope paths and on flattened names (`a/b/conv1` and
   `b_conv1`): a Keras model prefixes its own name (`my_model/dense/kernel`), a port
   may flatten slim's scopes into layer names; then the same with a "_<n>" that TF added
   to the port variable's own name dropped (`w/ExponentialMovingAverage_1`), and with one
   Keras variable name dropped from the port's (a layer named after a TF1 variable:
   `word_embeddings/embeddings` for TF1's `word_embeddings`);
3. the longest common tail of name words (scopes split at `/` and `_`), when it is
   unique both ways and longer than the variable's role: Keras wrapper layers and
   flattened scopes (`block1/unit_1/conv1/weights` vs
   `block1_unit_1_conv1_block/block1_unit_1_conv1/kernel`) keep the words at the end;
4. what is left, by order within each (variable role, shape) group.
An explicit mapping overrides: a dict {golden name: TF2 name or variable}, a list of
(regex, replacement) rules turning golden names into TF2 names, or a callable. A dict entry
or a rule whose target is None says the port has no counterpart: the golden variable (a
framework's bookkeeping: step counters, validation results, summaries' moving averages) is
left out of the replay and the comparison, and listed as such.

The golden's optimizer state in Keras terms (slots by role, the step counter) is slots.py's.
"""

from __future__ import annotations

import collections
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

# TF1 names of a variable's role -> Keras': slim's weights and biases, feature columns' linear
# weights, bias and embedding tables, and the short names of other libraries.
_ROLES = {"weights": "kernel", "biases": "bias", "bias_weights": "bias", "embedding_weights": "embeddings",
          "w": "kernel", "W": "kernel", "b": "bias"}  # Sonnet's and tflearn's w/W and b
# Each automatic rule's name (Mapping.how), said in words where a user must check a pairing.
_HOW = {"name": "the same name", "suffix": "one name ends the other", "suffix, uniquified": "one name ends the "
        "other, TF's _<n> dropped", "words": "the same last words", "shared words": "the most words in common",
        "order": "left over with this role and shape on both sides, paired in order: check it"}


def explain(how: str) -> str:
    """Why a pair was made, in words (the rule's name where it has none)."""
    return _HOW.get(how, how)


PARTITION = re.compile(r"^(?P<var>.+)/part_(?P<index>\d+):0$")


@functools.lru_cache(maxsize=1 << 16)  # asked of every pair of names: a model may have thousands
def _parts(name: str) -> Tuple[str, ...]:
    name = name[:-2] if name.endswith(":0") else name
    parts = [p for p in name.split("/") if p]
    if len(parts) > 1 and re.match(r"^part_\d+$", parts[-1]):
        parts.pop()  # a partitioned variable's partition (several are converted before matching)
    if parts:
        parts[-1] = _ROLES.get(parts[-1], parts[-1])
    return tuple(parts)


def parts(name: str) -> Tuple[str, ...]:
    """A variable name's scopes, ":0" and a partition dropped, its last one's role in Keras' word
    (weights -> kernel): what two names are compared by."""
    return _parts(name)


def _deduplicated(parts: Tuple[str, ...]) -> Tuple[str, ...]:
    """The port's name without the "_<n>" TF appends to a variable created again under a name
    in use (an EMA's shadow "w/ExponentialMovingAverage_1" in a process that made one before);
    tried only after the names as they are."""
    return parts[:-1] + (re.sub(r"_\d+$", "", parts[-1]),) if parts else parts


def _suffix(a: Sequence[str], b: Sequence[str]) -> bool:
    """Is the shorter a suffix of the longer, by whole scopes or by whole flattened words?"""
    short, long = (a, b) if len(a) <= len(b) else (b, a)
    if long[len(long) - len(short):] == short:
        return True
    flat_short, flat_long = "_".join(short), "_".join(long)
    return flat_long == flat_short or flat_long.endswith("_" + flat_short)


class _Lookup:
    """Candidates by their names' flattened tails: those whose name may be a suffix of a given
    one, or it of theirs (what _suffix accepts), without testing every candidate."""

    def __init__(self, cands: Sequence[Candidate], parts: Any, exact: bool = False) -> None:
        self._exact = exact
        self._by_flat: Dict[str, List[Candidate]] = collections.defaultdict(list)
        self._by_tail: Dict[str, List[Candidate]] = collections.defaultdict(list)
        for cand in cands:
            flat = "_".join(parts(cand))
            self._by_flat[flat].append(cand)
            if not exact:
                for tail in _tails(flat):
                    self._by_tail[tail].append(cand)

    def near(self, parts: Sequence[str]) -> List[Candidate]:
        flat = "_".join(parts)
        if self._exact:
            return list(self._by_flat.get(flat, ()))
        found = list(self._by_tail.get(flat, ()))  # names it is a tail of
        for tail in _tails(flat):  # names that are a tail of it
            found.extend(self._by_flat.get(tail, ()))
        return list({id(c): c for c in found}.values())


def _tails(flat: str) -> List[str]:
    """A flattened name and its tails after each "_": what a name it ends ends with."""
    words = flat.split("_")
    return ["_".join(words[i:]) for i in range(len(words))]


def _words(parts: List[str]) -> List[str]:
    return [w for p in parts for w in p.split("_") if w]


def _common_tail(a: List[str], b: List[str]) -> int:
    n = 0
    while n < len(a) and n < len(b) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


@dataclass(frozen=True, eq=False)
class Candidate:
    """A TF2 variable on offer: its name, shape, and the object itself."""

    name: str
    shape: Tuple[int, ...]
    obj: Any


@dataclass
class Mapping:
    """Golden variable name -> Candidate, and what did not match."""

    pairs: Dict[str, Candidate] = field(default_factory=dict)  # in the golden's order
    how: Dict[str, str] = field(default_factory=dict)  # golden name -> which rule matched it
    unmatched_golden: List[Tuple[str, Tuple[int, ...]]] = field(default_factory=list)
    unmatched_tf2: List[Candidate] = field(default_factory=list)
    shape_mismatch: List[Tuple[str, Tuple[int, ...], Candidate]] = field(default_factory=list)
    left_out: List[str] = field(default_factory=list)  # golden variables the explicit mapping says are not ported
    undecided: List[Tuple[str, Tuple[int, ...]]] = field(default_factory=list)  # left by match(rules=...) to others

    @property
    def ok(self) -> bool:
        return not (self.unmatched_golden or self.unmatched_tf2 or self.shape_mismatch)


def _ending(target: str, tf2: Sequence[Candidate]) -> Optional[Candidate]:
    """The one candidate whose path ends in `target` at a scope boundary (a var_map names
    "embed/embeddings" for Keras 3's "sequential_1/embed/embeddings"); None if none or several."""
    found = [c for c in tf2 if c.name.endswith(("/" + target, "/" + target + ":0"))]
    return found[0] if len(found) == 1 else None


def match(golden: Sequence[Tuple[str, Tuple[int, ...]]], tf2: Sequence[Candidate], explicit: Any = "auto",
          rules: str = "all") -> Mapping:
    """Pair golden (name, shape) with TF2 candidates: the explicit mapping, then the automatic
    rules (module docstring). rules="explicit" applies the explicit mapping only; "names" also
    the rules by name (1-3), never pairing by order, which only a model's variables may."""
    result = Mapping()
    left = list(tf2)
    by_name = {c.name: c for c in tf2}
    by_obj = {id(c.obj): c for c in tf2}
    todo: List[Tuple[str, Tuple[int, ...]]] = []

    taken: set = set()  # ids of the candidates paired so far

    def take(name: str, shape: Tuple[int, ...], cand: Candidate, how: str) -> None:
        left.remove(cand)
        taken.add(id(cand))
        if tuple(shape) != cand.shape:
            result.shape_mismatch.append((name, tuple(shape), cand))
        else:
            result.pairs[name] = cand
            result.how[name] = how

    for name, shape in golden:
        target = explicit_target(explicit, name)
        if target is NOT_PORTED:
            result.left_out.append(name)
            continue
        if target is None:
            todo.append((name, shape))
            continue
        cand = by_obj.get(id(target)) or by_name.get(target) or by_name.get(str(target) + ":0") or \
            _ending(str(target), tf2)
        if cand is None or cand not in left:
            result.unmatched_golden.append((name, tuple(shape)))
        else:
            take(name, shape, cand, "explicit")
    if rules == "explicit":
        result.undecided = [(n, tuple(s)) for n, s in todo]
        result.unmatched_tf2 = left
        return result
    # Each rule looks its candidates up (a port may have thousands of variables), then tests them.
    named_rules = (
        ("name", _Lookup(left, lambda c: _parts(c.name), exact=True), lambda g, c: _parts(g) == _parts(c.name)),
        ("suffix", _Lookup(left, lambda c: _parts(c.name)), lambda g, c: _suffix(_parts(g), _parts(c.name))),
        ("suffix, uniquified", _Lookup(left, lambda c: _deduplicated(_parts(c.name))),
         lambda g, c: _suffix(_parts(g), _deduplicated(_parts(c.name)))))
    for how, lookup, test in named_rules:
        rest = []
        for name, shape in todo:
            found = [c for c in lookup.near(_parts(name)) if id(c) not in taken and test(name, c)]
            if len(found) == 1:
                take(name, shape, found[0], how)
            else:
                rest.append((name, shape))
        todo = rest
    todo = _match_by_role_dropped(todo, left, taken, take)
    todo = _match_by_words(todo, left, take)
    todo = _match_by_tokens(todo, left, take)
    if rules == "names":
        result.undecided = [(n, tuple(s)) for n, s in todo]
        result.unmatched_tf2 = left
        return result
    groups: collections.OrderedDict = collections.OrderedDict()
    for name, shape in todo:
        groups.setdefault((tuple(_parts(name)[-1:]), tuple(shape)), []).append((name, shape))
    for (role, shape), names in groups.items():
        cands = [c for c in left if tuple(_parts(c.name)[-1:]) == role and c.shape == shape]
        if len(cands) == len(names):
            for (name, gshape), cand in zip(names, cands):
                take(name, gshape, cand, "order")
        else:
            result.unmatched_golden.extend((n, tuple(s)) for n, s in names)
    result.unmatched_tf2 = left
    return result


# The names Keras gives a layer's variables: a port that names its layer after a TF1 variable
# (an Embedding "word_embeddings" for TF1's get_variable("word_embeddings")) adds one of them.
_KERAS_ROLES = frozenset(["kernel", "bias", "embeddings", "gamma", "beta", "moving_mean", "moving_variance",
                          "recurrent_kernel", "depthwise_kernel", "pointwise_kernel"])


def _match_by_role_dropped(todo: List[Tuple[str, Tuple[int, ...]]], left: List[Candidate], taken: set,
                           take: Any) -> List[Tuple[str, Tuple[int, ...]]]:
    """Pair a golden variable with the one port variable whose name, with one Keras variable
    name dropped from it (`.../word_embeddings/embeddings`, `.../word_embeddings/embeddings/adam_m`),
    is the golden's or ends like it; returns the golden variables left over."""
    variants = [Candidate(v, c.shape, c) for c in left for v in _without_role(_parts(c.name))]
    if not variants:
        return todo
    lookup = _Lookup(variants, lambda c: tuple(c.name.split("/")))
    rest = []
    for name, shape in todo:
        found = {id(v.obj): v.obj for v in lookup.near(_parts(name))
                 if id(v.obj) not in taken and _suffix(_parts(name), tuple(v.name.split("/")))}
        if len(found) == 1:
            take(name, shape, next(iter(found.values())), "Keras variable name dropped")
        else:
            rest.append((name, shape))
    return rest


def _without_role(parts: Tuple[str, ...]) -> List[str]:
    return ["/".join(parts[:i] + parts[i + 1:]) for i in range(1, len(parts)) if parts[i] in _KERAS_ROLES]


def _match_by_words(todo: List[Tuple[str, Tuple[int, ...]]], left: List[Candidate],
                    take: Any) -> List[Tuple[str, Tuple[int, ...]]]:
    """Pair golden and TF2 variables (same shape) whose name words share the longest tail,
    where each is the other's only best match; returns the golden variables left over."""
    cand_words = {id(c): _words(_parts(c.name)) for c in left}

    def tail(name: str, cand: Candidate) -> int:
        mine, role = _words(_parts(name)), len(_words(_parts(name)[-1:]))
        n = _common_tail(mine, cand_words[id(cand)])
        return n if n > role else 0
    return _match_mutual(todo, left, take, tail, "words")


# Words of a variable's name that say nothing of which variable it is.
_GENERIC = frozenset(["part", "weights", "kernel", "bias", "biases", "embeddings", "embedding", "w", "b", "var",
                      "variable", "model", "layer", "dense", "0", "1"])


@functools.lru_cache(maxsize=1 << 16)
def words(name: str) -> frozenset:
    """A name's distinctive words: split at "/", "_" and digits' edges, lower case, the generic ones dropped."""
    name = name[:-2] if name.endswith(":0") else name
    found = {w.lower() for w in re.split(r"[/_:.\-]+", name) if w}
    return frozenset(w for w in found if w not in _GENERIC and not w.isdigit() and not re.fullmatch(r"part\d+", w))


def _match_by_tokens(todo: List[Tuple[str, Tuple[int, ...]]], left: List[Candidate],
                     take: Any) -> List[Tuple[str, Tuple[int, ...]]]:
    """Pair a golden variable and a port variable of the same shape that share more distinctive
    name words (words: `city` in `linear/linear_model/city/weights` and
    `wide_deep/linear_city/embeddings`) than any other pairing of either; returns the rest."""
    return _match_mutual(todo, left, take, lambda name, cand: len(words(name) & words(cand.name)), "shared words")


def _match_mutual(todo: List[Tuple[str, Tuple[int, ...]]], left: List[Candidate], take: Any,
                  score: Callable[[str, Candidate], int], how: str) -> List[Tuple[str, Tuple[int, ...]]]:
    """Pair each golden variable with the TF2 variable of its shape that scores highest with it,
    where each is the other's only best (a score of 0 pairs nothing); returns the rest."""
    by_shape: Dict[Tuple[int, ...], List[Candidate]] = collections.defaultdict(list)
    for c in left:
        by_shape[c.shape].append(c)
    by_golden: Dict[str, List[Tuple[int, int]]] = collections.defaultdict(list)
    by_cand: Dict[int, List[Tuple[str, int]]] = collections.defaultdict(list)
    for name, shape in todo:
        for c in by_shape.get(tuple(shape), ()):
            n = score(name, c)
            if n:
                by_golden[name].append((id(c), n))
                by_cand[id(c)].append((name, n))
    by_id = {id(c): c for c in left}
    chosen = []
    for name, shape in todo:
        cand_id = _unique_best(by_golden[name])
        if cand_id is not None and _unique_best(by_cand[cand_id]) == name:
            chosen.append((name, shape, by_id[cand_id]))
    for name, shape, cand in chosen:
        take(name, shape, cand, how)
    done = {name for name, _, _ in chosen}
    return [(name, shape) for name, shape in todo if name not in done]


def _unique_best(pairs: List[Tuple[Any, int]]) -> Optional[Any]:
    """The key of the highest score, if no other has it."""
    top = max((n for _, n in pairs), default=0)
    winners = [key for key, n in pairs if n == top]
    return winners[0] if top and len(winners) == 1 else None


NOT_PORTED = object()  # what explicit_target returns for a golden variable mapped to None


def explicit_target(explicit: Any, name: str) -> Any:
    """The explicit mapping's target for a golden name: a TF2 name or variable, NOT_PORTED, or
    None (left to the automatic rules)."""
    if explicit in (None, "auto"):
        return None
    if callable(explicit) and not isinstance(explicit, dict):
        return explicit(name)
    if isinstance(explicit, dict):
        if name in explicit and explicit[name] is None:
            return NOT_PORTED
        return explicit.get(name)
    for pattern, replacement in explicit:  # [(regex, replacement), ...]
        if re.search(pattern, name):
            return NOT_PORTED if replacement is None else re.sub(pattern, replacement, name)
    return None
