"""Compare two traces tensor by tensor, bit for bit; exit 1 on the first difference.

    python tools/same_tensors.py A.h5 B.h5
"""

import sys

import numpy as np

import tracekit


def main(a_path, b_path):
    with tracekit.open(a_path) as a, tracekit.open(b_path) as b:
        if len(a) != len(b):
            print("%s has %d steps, %s has %d" % (a_path, len(a), b_path, len(b)))
            return 1
        count = 0
        for sa, sb in zip([a.initial] + list(a), [b.initial] + list(b)):
            if list(sa) != list(sb):
                print("step %d holds other tensors" % sa.index)
                return 1
            for key in sa:
                va, vb = sa[key], sb[key]
                same = va.tobytes() == vb.tobytes() if isinstance(va, np.ndarray) else repr(va) == repr(vb)
                if not same:
                    print("step %d, %s differs" % (sa.index, key))
                    return 1
                count += 1
    print("identical: %d tensors in %d steps" % (count, len(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
