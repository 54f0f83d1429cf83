"""Chapter 6's heavy analyses with the BLAS default (every core) against one BLAS thread per call (what the
package now does for them, through ``threadpoolctl``), interleaved, on the chapter's models; with the machine's load
printed next to every timing. The values are checked equal (to 1e-12) between the two settings.

    python benchmarks/bench_chapter6_threads.py [--repeats 3]

It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import qkgeometry as qg
    from qkgeometry.analyses import nulls, rotary, spectrum

    minilm, smol = qg.load_qk("offline:minilm-l6"), qg.load_qk("offline:smollm2-135m")
    head_a, head_b = (t.numpy() for t in minilm.layer(2).factors(5))
    a3, b3 = (t.numpy() for t in smol.layer(3).factors(0))
    deltas = -np.unique(np.concatenate([np.arange(0, 301, 25), [1.0, 4.0, 16.0, 64.0, 256.0]]))
    cases = {
        "rotation_null_samples (5000)": (nulls.rotation_null_samples, (head_a, head_b, 5000), {"seed": 1}),
        "rotation_z_scores (MiniLM, both)": (nulls.rotation_z_scores, (minilm,), {"per": "both"}),
        "spectrum_table (MiniLM, head)": (spectrum.spectrum_table, (minilm,), {"per": "head"}),
        "positive_share_rotation_null x12 (200)": (
            lambda a, b, n: [spectrum.positive_share_rotation_null(a, b, n, seed=i) for i in range(12)],
            (a3, b3, 200), {}),
        "offset_scores (SmolLM2 layer 3, both)": (rotary.offset_scores, (smol, deltas), {"per": "both",
                                                                                       "layers": [3]}),
    }
    times = {(k, m): [] for k in cases for m in ("default", "1 thread")}
    loads = []
    for _ in range(args.repeats):
        for name, (fn, a, kw) in cases.items():
            plain = getattr(fn, "__wrapped__", None)
            if plain is None:  # the lambda: time its inner calls undecorated through the spectrum module
                plain = lambda a, b, n: [spectrum.positive_share_rotation_null.__wrapped__(a, b, n, seed=i)  # noqa: E731
                                         for i in range(12)]
            for mode, f in (("default", plain), ("1 thread", fn)):
                t0 = time.perf_counter()
                out = f(*a, **kw)
                times[(name, mode)].append(time.perf_counter() - t0)
                if mode == "default":
                    ref = out
            got = out
            if hasattr(ref, "select_dtypes"):
                ref, got = ref.select_dtypes("number").to_numpy(float), got.select_dtypes("number").to_numpy(float)
            np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(ref, dtype=float), atol=1e-12,
                                       rtol=0, equal_nan=True)
        loads.append(os.getloadavg()[0])
    print(f"chapter 6 analyses, median of {args.repeats} interleaved rounds; {os.cpu_count()} CPUs; load "
          f"{min(loads):.1f}-{max(loads):.1f}")
    print(f"   {'analysis':<42} {'BLAS default':>13} {'1 thread':>10} {'speed-up':>9}")
    total = {"default": 0.0, "1 thread": 0.0}
    for name in cases:
        d, o = statistics.median(times[(name, "default")]), statistics.median(times[(name, "1 thread")])
        total["default"] += d
        total["1 thread"] += o
        print(f"   {name:<42} {d:12.2f}s {o:9.2f}s {d / o:8.1f}x")
    print(f"   {'total':<42} {total['default']:12.2f}s {total['1 thread']:9.2f}s "
          f"{total['default'] / total['1 thread']:8.1f}x")


if __name__ == "__main__":
    main()
