"""What scoring while training costs: for a small GPT-2 and a GPT-2-small-sized one (124M parameters), the
training step against one live scoring in memory, the same scoring with its rows appended to a trajectory store,
and the callback's own work on a step it does not score, all measured round-robin in one run; then

* the store's share: (scoring with the store − scoring in memory) / scoring in memory;
* the callback's overhead at ``every`` = N: (one stored scoring + (N − 1) unscored steps' callback work) /
  (N training steps).

Model sizes: ``small`` is a GPT-2 of 6 layers, d = 512, 8 heads (~30M parameters with GPT-2's vocabulary);
``gpt2`` has GPT-2 small's shapes (12 layers, d = 768, 12 heads, vocabulary 50,257: 124M parameters). A training
step is one AdamW step on ``--batch`` × ``--length`` random token ids (causal-LM loss). Timings are medians over
``--rounds`` rounds, printed with the 1-minute load average, because this machine is shared.

    python benchmarks/bench_callback.py [--rounds 3] [--steps 2] [--batch 4] [--length 128] [--every 20 100]
                                        [--per layer|head] [--models small gpt2]

It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

SIZES = {"small": dict(n_embd=512, n_layer=6, n_head=8), "gpt2": dict(n_embd=768, n_layer=12, n_head=12)}


def bench(name: str, args: argparse.Namespace) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from qkgeometry.integrations import LiveScorer, ScoreCallback

    torch.manual_seed(0)
    sizes = SIZES[name]
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

    def timed(work) -> float:
        t = time.perf_counter()
        work()
        return time.perf_counter() - t

    with tempfile.TemporaryDirectory() as tmp:
        memory = LiveScorer(every=1, per=args.per)
        stored = LiveScorer(Path(tmp) / "live.sqlite", every=1, per=args.per)
        callback = ScoreCallback(every=10**9, per=args.per)  # a step it does not score: its hook's own work
        state = SimpleNamespace(global_step=1, max_steps=10**9, is_world_process_zero=True)
        control = SimpleNamespace(should_log=False)
        train_step()  # warm-up: allocator, optimizer state, the store and its connection
        memory.score(model, 0)
        stored.score(model, 0)
        steps, in_memory, with_store, hook = [], [], [], []
        for r in range(1, args.rounds + 1):
            for _ in range(args.steps):
                steps.append(timed(train_step))
            in_memory.append(timed(lambda r=r: memory.score(model, r)))
            with_store.append(timed(lambda r=r: stored.score(model, r)))
            hook.append(min(timed(lambda: callback.on_step_end(None, state, control, model=model))
                            for _ in range(100)))
        stored.close()
    step, score, store, unscored = (statistics.median(v) for v in (steps, in_memory, with_store, hook))
    print(f"model {name}: GPT-2, {sizes['n_layer']} layers, d = {sizes['n_embd']}, {sizes['n_head']} heads, "
          f"{n_params / 1e6:.0f}M parameters; batch {args.batch} x {args.length} tokens; torch threads "
          f"{torch.get_num_threads()}; load average {os.getloadavg()[0]:.2f}")
    print(f"  training step {step:.3f} s (median of {len(steps)}); scoring per {args.per}: in memory "
          f"{score * 1e3:.1f} ms, with the store {store * 1e3:.1f} ms (medians of {len(in_memory)}); callback on "
          f"an unscored step {unscored * 1e6:.1f} us")
    print(f"  the store's share: {(store - score) / score:+.0%} of the in-memory scoring time")
    for every in args.every:
        overhead = (store + (every - 1) * unscored) / (every * step)
        print(f"  callback overhead at every={every}: {overhead:.2%} of training time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2, help="training steps timed per round")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--every", type=int, nargs="+", default=[20, 100], help="intervals to report")
    parser.add_argument("--per", choices=("layer", "head"), default="layer")
    parser.add_argument("--models", nargs="+", choices=tuple(SIZES), default=list(SIZES))
    args = parser.parse_args()
    for name in args.models:
        bench(name, args)


if __name__ == "__main__":
    main()
