"""Float64 values that carry a bound on how far a float kernel's own arithmetic can be from them:
the update rules (update_rules.py) are written over these, so that recomputing an update says
both its value and the round-off a faithful kernel may have. Every operation is charged ROUNDING
ulps of its result (APPROXIMATE for sqrt, rsqrt, pow and exp); a correctly rounded operation
errs by half an ulp. Numpy only, Python 3.7 syntax."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

ROUNDING = 1.0  # ulps of its result one rounded operation is charged (it errs by at most 0.5)
APPROXIMATE = 4.0  # sqrt, rsqrt, pow, exp: Eigen's vectorized float versions are not correctly rounded


class Bounded:
    """A value in float64 (`val`) and how far from it the kernel's own result can be (`err`,
    absolute, elementwise); `ulp` is the eps of the dtype the kernel computes in."""

    __slots__ = ("val", "err", "ulp")

    def __init__(self, val: Any, err: Any, ulp: float) -> None:
        self.val = np.asarray(val, dtype=np.float64)
        self.err = np.asarray(err, dtype=np.float64)
        self.ulp = ulp

    def _of(self, other: Any) -> "Bounded":
        return other if isinstance(other, Bounded) else Bounded(other, 0.0, self.ulp)

    def _rounded(self, val: Any, err: Any, charge: float = ROUNDING) -> "Bounded":
        return Bounded(val, err + charge * self.ulp * np.abs(val), self.ulp)

    def __add__(self, other: Any) -> "Bounded":
        b = self._of(other)
        return self._rounded(self.val + b.val, self.err + b.err)

    def __radd__(self, other: Any) -> "Bounded":
        return self._of(other) + self

    def __sub__(self, other: Any) -> "Bounded":
        b = self._of(other)
        return self._rounded(self.val - b.val, self.err + b.err)

    def __rsub__(self, other: Any) -> "Bounded":
        return self._of(other) - self

    def __neg__(self) -> "Bounded":
        return Bounded(-self.val, self.err, self.ulp)

    def __mul__(self, other: Any) -> "Bounded":
        b = self._of(other)
        return self._rounded(self.val * b.val,
                             np.abs(self.val) * b.err + np.abs(b.val) * self.err + self.err * b.err)

    def __rmul__(self, other: Any) -> "Bounded":
        return self._of(other) * self

    def __truediv__(self, other: Any) -> "Bounded":
        b = self._of(other)
        q = self.val / b.val
        room = np.abs(b.val) - b.err  # a divisor whose error can reach zero bounds nothing
        return self._rounded(q, np.where(room > 0, (self.err + np.abs(q) * b.err) / np.where(room > 0, room, 1.0),
                                         np.inf))

    def __rtruediv__(self, other: Any) -> "Bounded":
        return self._of(other) / self

    def square(self) -> "Bounded":
        return self._rounded(self.val * self.val, 2 * np.abs(self.val) * self.err + self.err * self.err)

    def abs(self) -> "Bounded":
        return Bounded(np.abs(self.val), self.err, self.ulp)

    def sign(self) -> "Bounded":
        # exact, except where the value's error reaches zero: then any sign is possible
        unsure = (np.abs(self.val) <= self.err) & (self.err > 0)
        return Bounded(np.sign(self.val), np.where(unsure, 2.0, 0.0), self.ulp)

    def _monotone(self, f: Callable[[Any], Any], domain_from_zero: bool = False) -> "Bounded":
        """f of the value, f monotone on the value's interval: its ends bound the error (an
        interval reaching below zero is cut there, for a function defined from zero on)."""
        r = f(self.val)
        lo = f(np.maximum(self.val - self.err, 0.0) if domain_from_zero else self.val - self.err)
        err = np.maximum(np.abs(f(self.val + self.err) - r), np.abs(r - lo))
        return self._rounded(r, np.where(np.isnan(err), np.inf, err), APPROXIMATE)

    def sqrt(self) -> "Bounded":
        return self._monotone(np.sqrt, True)

    def rsqrt(self) -> "Bounded":
        return self._monotone(lambda x: 1.0 / np.sqrt(x), True)

    def exp(self) -> "Bounded":
        return self._monotone(np.exp)

    def norm(self) -> "Bounded":
        """The 2-norm of all elements, sqrt(sum(x * x)): every square and every addition of the
        sum charged as rounded (an n-term sum errs by at most n - 1 roundings of its running total)."""
        squares = self.square()
        total = float(np.sum(squares.val))
        err = float(np.sum(squares.err)) + max(squares.val.size - 1, 0) * ROUNDING * self.ulp * total
        return Bounded(total, err, self.ulp).sqrt()

    def pow(self, power: "Bounded") -> "Bounded":
        p = float(power.val)  # FTRL's -lr_power: a graph constant, exact
        return self._monotone(lambda x: np.power(x, p), True)


def maximum(a: Bounded, b: Any) -> Bounded:
    """Eigen's cwiseMax: exact, and no further from the kernel's than its farther argument."""
    b = a._of(b)
    return Bounded(np.maximum(a.val, b.val), np.maximum(a.err, b.err), a.ulp)


def where(mask: Any, then: Bounded, otherwise: Bounded) -> Bounded:
    """`then` where the (exact) mask holds, else `otherwise`: a sparse update's rows."""
    return Bounded(np.where(mask, then.val, otherwise.val), np.where(mask, then.err, otherwise.err), then.ulp)


def select(value: Bounded, above: Any, then: Bounded, otherwise: Any) -> Bounded:
    """`then` where value > above, else `otherwise` (Eigen's select on an exact comparison);
    where the value's error reaches the threshold either branch may be the kernel's."""
    above, otherwise = value._of(above), value._of(otherwise)
    margin = value.val - above.val
    chosen = Bounded(np.where(margin > 0, then.val, otherwise.val), np.where(margin > 0, then.err, otherwise.err),
                     value.ulp)
    unsure = np.abs(margin) <= value.err + above.err
    chosen.err = np.where(unsure, np.maximum(then.err, otherwise.err) + np.abs(then.val - otherwise.val), chosen.err)
    return chosen
