"""A var_map proposed for what the automatic matching left: each golden variable paired, where
one port variable stands out, by shape and shared name words (a transposed shape proposes
tracekit.tf2.transpose), or mapped to None where nothing of its shape is left; each line says
why. Nothing here is applied: the proposal is printed for a person to check and paste
(`tracekit map`, and the error of a replay whose variables do not match). No TensorFlow here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from .varmap import _ROLES, words

Shape = Tuple[int, ...]
def role(name: str) -> str:
    last = (name[:-2] if name.endswith(":0") else name).rsplit("/", 1)[-1]
    return _ROLES.get(last, last)


@dataclass(frozen=True)
class Line:
    """One proposed entry: the golden variable, the port variable (None: not ported), whether it
    is transposed, and why."""

    golden: str
    port: Optional[str]
    transposed: bool
    why: str

    undecided: Tuple[str, ...] = ()  # port variables it may be, where one does not stand out

    def render(self) -> str:
        """A line of the dict; an undecided one commented out, its choices named."""
        if self.undecided:
            return '        # "%s": one of %s,  # %s' % (self.golden, ", ".join('"%s"' % p for p in self.undecided),
                                                       self.why)
        if self.port is None:
            value = "None"
        elif self.transposed:
            value = 'tracekit.tf2.transpose("%s", "%s")' % (self.golden, self.port)
        else:
            value = '"%s"' % self.port
        return '        "%s": %s,  # %s' % (self.golden, value, self.why)


# The names Keras gives a model it is not told to name: "sequential", "sequential_1", ... Keras 3
# puts them in front of every variable's path and counts them per process, so a test's model
# is "sequential_1" where it runs second.
_AUTO_MODEL = re.compile(r"^(sequential|functional|model)(_\d+)?/")


def stable(name: str, names: Sequence[str]) -> str:
    """`name` without a model name Keras made up, where what is left still names one variable
    (a var_map entry matches a variable's path by its end)."""
    rest = _AUTO_MODEL.sub("", name)
    if rest == name:
        return name
    ends = [n for n in names if n == rest or n.endswith("/" + rest)]
    return rest if ends == [name] else name


def followers(port: Sequence[Tuple[str, Shape]]) -> List[str]:
    """Port variables named after another one (`kernel/adam_m` after `kernel`): a hand-written
    optimizer's state, which pairs with its variable's slots once that variable is paired."""
    bases = {_bare(name) for name, _ in port}
    return [name for name, _ in port if any(_bare(name).startswith(base + "/") for base in bases)]


def _bare(name: str) -> str:
    return name[:-2] if name.endswith(":0") else name


def propose(golden: Sequence[Tuple[str, Shape]], port: Sequence[Tuple[str, Shape]]) -> List[Line]:
    """Lines for the golden variables left unmatched, against the port variables left unmatched
    (those that follow another are left to follow it)."""
    following = set(followers(port))
    left = {name: shape for name, shape in port if name not in following}
    lines: List[Line] = []
    todo = list(golden)
    for transposed in (False, True):
        rest = []
        for name, shape in todo:
            found = _best(name, shape, golden, left, transposed)
            if found is None:
                rest.append((name, shape))
                continue
            cand, why = found
            lines.append(Line(name, cand, transposed, why))
            del left[cand]
        todo = rest
    for name, shape in todo:
        same = [p for p, s in left.items() if tuple(s) in (tuple(shape), tuple(shape)[::-1])]
        if same:
            lines.append(Line(name, None, False, "undecided: %d port variables have its shape %s or its transpose"
                              % (len(same), tuple(shape)), tuple(sorted(same))))
        else:
            lines.append(Line(name, None, False, "no port variable of shape %s is left: the port lacks it?"
                              % (tuple(shape),)))
    return lines


def _best(name: str, shape: Shape, golden: Sequence[Tuple[str, Shape]], left: Dict[str, Shape],
          transposed: bool) -> Optional[Tuple[str, str]]:
    want = tuple(shape)[::-1] if transposed else tuple(shape)
    if transposed and (len(want) != 2 or want[0] == want[1]):
        return None
    cands = [p for p, s in left.items() if tuple(s) == want]
    if not cands:
        return None
    mine = words(name)
    scored = sorted(((len(mine & words(p)), p) for p in cands), reverse=True)
    top = scored[0][0]
    winners = [p for n, p in scored if n == top]
    how = "transposed: golden %s, port %s" % (tuple(shape), want) if transposed else "same shape %s" % (want,)
    if top and len(winners) == 1:
        rivals = [g for g, s in golden if g != name and tuple(s) == tuple(shape)
                  and len(words(g) & words(winners[0])) >= top]
        if not rivals:
            return winners[0], "%s, shares %s" % (how, ", ".join(sorted(mine & words(winners[0]))))
    same_role = [p for p in cands if role(p) == role(name)]
    others = [g for g, s in golden if g != name and tuple(s) == tuple(shape)]
    if len(cands) == 1 and not others:
        return cands[0], "%s: the only one left on both sides" % how
    if len(same_role) == 1 and not [g for g in others if role(g) == role(name)]:
        return same_role[0], "%s, the only %s of it on both sides" % (how, role(name))
    return None


def proposed(golden: Sequence[Tuple[str, Shape]], port: Sequence[Tuple[str, Shape]]) -> List[str]:
    """The var_map to paste, as the lines of an error or of `tracekit map` ([] if nothing is left)."""
    lines = [Line(l.golden, stable(l.port, [n for n, _ in port]) if l.port else l.port, l.transposed, l.why,
                  l.undecided) for l in propose(golden, port)]
    if not lines:
        return []
    taken = {line.port for line in lines} | set(followers(port))
    rest = ["        # only in the port: %s %s: pair it above, or leave it out of variables=" % (name, tuple(shape))
            for name, shape in port if name not in taken]
    return (["a var_map to start from (the variables paired automatically are not in it; check each line):",
             "    var_map = {"] + [line.render() for line in lines] + rest + ["    }"])
