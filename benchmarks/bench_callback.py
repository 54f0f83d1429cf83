"""What scoring while training costs: the training step of a ~100M-parameter model against one live scoring of
the same model (:class:`qkgeometry.integrations.LiveScorer`, what ``ScoreCallback`` runs every N steps), measured
round-robin in one run, and the overhead at an interval: ``score / (every × step)``.

Model: GPT-2 small's shapes (12 layers, d = 768, 12 heads, vocabulary 50,257: 124M parameters), or ``--small``
(a ~30M GPT-2, 6 layers, d = 512). One round = ``--steps`` AdamW steps (batch ``--batch`` × ``--length`` tokens,
random ids, causal-LM loss) then one scoring (per layer, its rows written to an SQLite trajectory store). Timings
are medians over ``--rounds`` rounds, with the 1-minute load average, because this machine is shared.

    python benchmarks/bench_callback.py [--rounds 3] [--steps 2] [--batch 4] [--length 128] [--every 100 500]
                                        [--per layer|head] [--small]

It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="training steps timed per round")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--every", type=int, nargs="+", default=[100, 500], help="intervals to report")
    parser.add_argument("--per", choices=("layer", "head"), default="layer")
    parser.add_argument("--small", action="store_true", help="a ~30M-parameter GPT-2 instead of 124M")
    args = parser.parse_args()

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from qkgeometry.integrations import LiveScorer

    torch.manual_seed(0)
    sizes = dict(n_embd=512, n_layer=6, n_head=8) if args.small else dict(n_embd=768, n_layer=12, n_head=12)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=50257, n_positions=args.length, **sizes)).train()
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)

    def train_step() -> None:
        ids = torch.randint(0, 50257, (args.batch, args.length), generator=gen)
        loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    with tempfile.TemporaryDirectory() as tmp:
        scorer = LiveScorer(Path(tmp) / "live.sqlite", every=1, per=args.per)
        train_step()  # warm-up: allocator, optimizer state, first store
        scorer.score(model, 0, run="bench")
        steps, scores = [], []
        for r in range(args.rounds):
            for _ in range(args.steps):
                t = time.perf_counter()
                train_step()
                steps.append(time.perf_counter() - t)
            t = time.perf_counter()
            scorer.score(model, r + 1, run="bench")
            scores.append(time.perf_counter() - t)
    step, score = statistics.median(steps), statistics.median(scores)
    print(f"model: GPT-2, {sizes['n_layer']} layers, d = {sizes['n_embd']}, {sizes['n_head']} heads, "
          f"{n_params / 1e6:.0f}M parameters; batch {args.batch} x {args.length} tokens; torch threads "
          f"{torch.get_num_threads()}; load average {os.getloadavg()[0]:.2f}")
    print(f"training step: median {step:.3f} s over {len(steps)} steps; live scoring (per {args.per}, rows "
          f"stored): median {score:.3f} s over {len(scores)}")
    print(f"one scoring = {score / step:.3f} training steps")
    for every in args.every:
        print(f"overhead at every={every}: {score / (every * step):.2%} of training time")


if __name__ == "__main__":
    main()
