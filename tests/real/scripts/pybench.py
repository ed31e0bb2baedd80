# SPDX-License-Identifier: Apache-2.0
"""pybench.py -- benchmark-style Python workloads in one process, for the real-program tier:
Debian's CPython 3.11 under WPP, power-failed at random moments, must print exactly what an
uninterrupted run prints (stdout), and each workload's time goes to stderr (the time under
WPP against native). The workloads are the kinds a Python benchmark suite measures, written
here: an n-body simulation, fannkuch, a spectral norm, n-queens, JSON and pickle round trips,
regular expressions, float objects, generators, Decimal arithmetic, string and dict work,
and a bounded cycle of garbage-collected objects. Each prints a checksum per round; nothing
printed depends on hash seeds, addresses or time.

    python3 pybench.py [ROUNDS]
"""

import sys
import time


def nbody(steps):
    pi, days = 3.141592653589793, 365.24
    mass = 4 * pi * pi
    bodies = [
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], mass],
        [[4.84, -1.16, -0.10], [0.606, 2.81, -0.025], 9.54e-4 * mass],
        [[8.34, 4.12, -0.40], [-1.01, 1.82, 0.008], 2.86e-4 * mass],
        [[12.89, -15.11, -0.22], [1.08, 0.868, -0.010], 4.36e-5 * mass],
        [[15.38, -25.92, 0.18], [0.979, 0.594, -0.035], 5.15e-5 * mass],
    ]
    for b in bodies[1:]:
        b[1] = [v * days for v in b[1]]
    pairs = [(bodies[i], bodies[j]) for i in range(5) for j in range(i + 1, 5)]
    dt = 0.01
    for _ in range(steps):
        for (p1, v1, m1), (p2, v2, m2) in pairs:
            dx, dy, dz = p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2]
            mag = dt * (dx * dx + dy * dy + dz * dz) ** -1.5
            b1, b2 = m1 * mag, m2 * mag
            v1[0] -= dx * b2
            v1[1] -= dy * b2
            v1[2] -= dz * b2
            v2[0] += dx * b1
            v2[1] += dy * b1
            v2[2] += dz * b1
        for p, v, _m in bodies:
            p[0] += dt * v[0]
            p[1] += dt * v[1]
            p[2] += dt * v[2]
    e = 0.0
    for (p1, _v1, m1), (p2, _v2, m2) in pairs:
        dx, dy, dz = p1[0] - p2[0], p1[1] - p2[1], p1[2] - p2[2]
        e -= m1 * m2 / (dx * dx + dy * dy + dz * dz) ** 0.5
    for _p, v, m in bodies:
        e += m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) / 2
    return f"{e:.9f}"


def fannkuch(n):
    perm1 = list(range(n))
    count = [0] * n
    maxflips = checksum = 0
    r, sign = n, 1
    while True:
        while r != 1:
            count[r - 1] = r
            r -= 1
        perm = perm1[:]
        flips = 0
        k = perm[0]
        while k:
            perm[: k + 1] = perm[k::-1]
            flips += 1
            k = perm[0]
        maxflips = max(maxflips, flips)
        checksum += flips if sign == 1 else -flips
        sign = -sign
        while True:
            if r == n:
                return f"{checksum} {maxflips}"
            p0 = perm1[0]
            perm1[:r] = perm1[1 : r + 1]
            perm1[r] = p0
            count[r] -= 1
            if count[r] > 0:
                break
            r += 1


def spectral_norm(n):
    def a(i, j):
        return 1.0 / ((i + j) * (i + j + 1) // 2 + i + 1)

    def times(u, transpose):
        if transpose:
            return [sum(a(j, i) * u[j] for j in range(n)) for i in range(n)]
        return [sum(a(i, j) * u[j] for j in range(n)) for i in range(n)]

    u = [1.0] * n
    for _ in range(6):
        v = times(times(u, False), True)
        u = times(times(v, False), True)
    vbv = sum(x * y for x, y in zip(u, v, strict=True))
    vv = sum(x * x for x in v)
    return f"{(vbv / vv) ** 0.5:.9f}"


def nqueens(n):
    def place(row, cols, d1, d2):
        if row == n:
            return 1
        total = 0
        for c in range(n):
            if c not in cols and row + c not in d1 and row - c not in d2:
                total += place(row + 1, cols | {c}, d1 | {row + c}, d2 | {row - c})
        return total

    return str(place(0, frozenset(), frozenset(), frozenset()))


def lcg(seed):
    s = seed
    while True:
        s = (s * 1103515245 + 12345) % 2147483648
        yield s


def json_roundtrip(n):
    import json

    g = lcg(7)
    doc = [
        {
            "id": i,
            "name": f"item{next(g) % 1000}",
            "tags": [next(g) % 97 for _ in range(5)],
            "price": (next(g) % 100000) / 100,
            "nested": {"a": [1, 2, {"b": None, "c": True}]},
        }
        for i in range(n)
    ]
    total = 0
    for _ in range(8):
        text = json.dumps(doc, sort_keys=True)
        doc = json.loads(text)
        total += len(text)
    return f"{total} {sum(d['tags'][2] for d in doc)}"


def pickle_roundtrip(n):
    import pickle

    g = lcg(11)
    data = {f"k{i}": (i, [next(g) % 1000 for _ in range(8)], str(i) * 3) for i in range(n)}
    size = 0
    for proto in (2, 3, 4, 5) * 3:
        blob = pickle.dumps(data, protocol=proto)
        data = pickle.loads(blob)
        size += len(blob)
    return f"{size} {sum(v[1][3] for v in data.values())}"


def regex(n):
    import re

    words = ["alpha", "beta42", "gamma-ray", "delta_9", "x@example.org", "2026-11-27", "ERROR"]
    g = lcg(3)
    text = " ".join(words[next(g) % len(words)] for _ in range(n))
    pats = [r"\b[a-z]+\d+\b", r"[\w.]+@[\w.]+", r"\d{4}-\d{2}-\d{2}", r"(?i)error|delta", r"-\w+"]
    counts = [len(re.findall(p, text)) for p in pats]
    swapped = re.sub(r"(\w+)@(\w+)", r"\2 at \1", text)
    return f"{counts} {len(swapped)}"


class Point:
    __slots__ = ("x", "y", "z")

    def __init__(self, i):
        import math

        self.x = math.sin(i)
        self.y = math.cos(i) * 3
        self.z = (self.x * self.x) / 2

    def normalize(self):
        norm = (self.x * self.x + self.y * self.y + self.z * self.z) ** 0.5
        self.x /= norm
        self.y /= norm
        self.z /= norm


def floats(n):
    points = [Point(i) for i in range(n)]
    for p in points:
        p.normalize()
    mx = max(p.x for p in points)
    my = max(p.y for p in points)
    mz = max(p.z for p in points)
    return f"{mx:.9f} {my:.9f} {mz:.9f}"


def generators(n):
    def tree(depth):
        if depth:
            yield from tree(depth - 1)
            yield depth
            yield from tree(depth - 1)

    def pipeline(k):
        squares = (x * x for x in range(k))
        odd = (x for x in squares if x % 2)
        return sum(odd)

    return f"{sum(tree(n))} {pipeline(n * 20000)}"


def decimal_pi(digits):
    from decimal import Decimal, getcontext

    getcontext().prec = digits + 5

    # Machin's formula
    def arctan_inv(x):
        x = Decimal(x)
        total = term = 1 / x
        x2, k, sign = x * x, 1, -1
        while True:
            term /= x2
            delta = term / (2 * k + 1)
            if delta == 0:
                return total
            total += sign * delta
            sign, k = -sign, k + 1

    pi = 4 * (4 * arctan_inv(5) - arctan_inv(239))
    return str(pi)[: digits + 2][-20:]


def words(n):
    g = lcg(5)
    syll = ["ka", "ri", "to", "me", "su", "no", "ha", "lu"]
    counts = {}
    for _ in range(n):
        w = "".join(syll[next(g) % 8] for _ in range(1 + next(g) % 3))
        counts[w] = counts.get(w, 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    return f"{len(counts)} {top}"


def cycles(n):
    import gc

    class Node:
        def __init__(self, v):
            self.v, self.peer = v, None

    kept = 0
    for r in range(n):
        a = [Node(i) for i in range(200)]
        for x, y in zip(a, a[1:] + a[:1], strict=True):
            x.peer = y
        kept += a[r % 200].peer.v
        del a
        if r % 50 == 0:
            gc.collect()
    return str(kept)


WORKLOADS = [
    ("nbody", nbody, 100000),
    ("fannkuch", fannkuch, 9),
    ("spectral_norm", spectral_norm, 250),
    ("nqueens", nqueens, 11),
    ("json", json_roundtrip, 6000),
    ("pickle", pickle_roundtrip, 12000),
    ("regex", regex, 150000),
    ("float", floats, 300000),
    ("generators", generators, 18),
    ("decimal", decimal_pi, 300),
    ("words", words, 300000),
    ("gc_cycles", cycles, 3000),
]


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    for r in range(rounds):
        for name, fn, arg in WORKLOADS:
            t0 = time.perf_counter()
            result = fn(arg)
            took = time.perf_counter() - t0
            print(f"round {r} {name}: {result}", flush=True)
            print(f"time {name} {took:.6f}", file=sys.stderr, flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
