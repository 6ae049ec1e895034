"""Notebook 07's speed claims, each measured with both sides in one run.

1. Data alone: the post's pipeline (a ``Dataset`` over a Python list whose
   ``__getitem__`` builds two tensors per window, stacked by a ``collate``
   function) against ours (windows cut from one tensor, one gather per batch).
   Goal: >= 20x more tokens per second.
2. End to end: one training step (forward, backward, Adam) per batch, with the
   same model fed by either pipeline. On a CPU the LSTM dominates, so the ratio
   is close to 1; on a GPU the post's pipeline starves the model.
3. Generation: 500 characters carrying the hidden state (one LSTM step per
   character) against re-feeding the growing text (``t`` steps for character
   ``t``), greedy and top-p. Goal: >= 10x. The one-character step is timed
   both through ``nn.LSTM`` and through ``CharLSTM.step`` (the LSTM equations
   written out), which avoids ``nn.LSTM``'s fixed cost per call.

Run:  python benchmarks/bench_war_and_peace.py [--device cuda] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import torch
from machine import cpu_name  # benchmarks/machine.py

from mllm_utils import chardata, charlstm, chartrain
from mllm_utils.generation import generate, generate_refeed


class PostDataset(torch.utils.data.Dataset):
    """The post's data set: every position starts a window; a tensor pair is built per sample."""

    def __init__(self, encoded: list[int], window_size: int = 64):
        self.encoded, self.window_size = encoded, window_size
        self.length = len(encoded) - window_size - 1

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        x = self.encoded[i : i + self.window_size]
        y = self.encoded[i + 1 : i + self.window_size + 1]
        return torch.tensor(x), torch.tensor(y)


def post_collate(samples):
    """Stack per-sample tensors into a batch (batch first, for our model)."""
    xs, ys = zip(*samples, strict=True)
    return torch.stack(xs), torch.stack(ys)


def post_batches(train_list, batch_size, seq_len):
    loader = torch.utils.data.DataLoader(
        PostDataset(train_list, seq_len), batch_size=batch_size, shuffle=True,
        collate_fn=post_collate, drop_last=True,
    )  # fmt: skip
    return iter(loader)


def our_batches(train, batch_size, seq_len, stride):
    return chardata.batches(train, batch_size, seq_len, stride=stride, drop_last=True)


def tokens_per_second(make_iter, n_batches, step=None, warmup=1):
    """Tokens per second over ``n_batches`` batches (after ``warmup``), running ``step`` on each."""
    it = make_iter()
    for _ in range(warmup):
        X, Y = next(it)
        if step:
            step(X, Y)
    tokens, start = 0, time.perf_counter()
    for _ in range(n_batches):
        X, Y = next(it)
        if step:
            step(X, Y)
        tokens += Y.numel()
    if tokens and X.device.type == "cuda":
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - start)


def machine(device) -> str:
    cpu = cpu_name()
    if hasattr(os, "getloadavg"):
        cpu += f" (load average {os.getloadavg()[0]:.1f}: other processes share the CPU)"
    text = (f"{platform.system()} {cpu}, {os.cpu_count()} CPU cores, torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads")  # fmt: skip
    if device.type == "cuda":
        text += f", GPU {torch.cuda.get_device_name(device)}"
    return text


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    parser.add_argument("--batch-size", type=int, default=1024, help="the post's: 1024")
    parser.add_argument("--data-batches", type=int, default=30)
    parser.add_argument("--train-batches", type=int, default=3)
    parser.add_argument("--gen-length", type=int, default=500)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    seq_len = chartrain.POST_SEQ_LEN
    itos, train, _ = chardata.prepare()
    train_list = train.tolist()  # the post keeps the encoded book as a JSON list
    print(f"Machine: {machine(device)}")
    print(f"Training text: {len(train):,} characters, batch {args.batch_size} x {seq_len}")

    print("\n1. Data alone (tokens/s)")
    post = tokens_per_second(lambda: post_batches(train_list, args.batch_size, seq_len), args.data_batches)
    ours1 = tokens_per_second(lambda: our_batches(train, args.batch_size, seq_len, 1), args.data_batches)
    ours = tokens_per_second(lambda: our_batches(train, args.batch_size, seq_len, None), args.data_batches)
    print(f"   post's Dataset + collate:          {post:14,.0f}")
    print(f"   ours, same windows (stride 1):     {ours1:14,.0f}   ({ours1 / post:.0f}x)")
    print(f"   ours, non-overlapping windows:     {ours:14,.0f}   ({ours / post:.0f}x)")

    print("\n2. End-to-end training, the post's model (tokens/s)")
    torch.manual_seed(0)
    model = charlstm.CharLSTM(len(itos), dropout=charlstm.POST_DROPOUT).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=charlstm.POST_LR)

    def step(X, Y):
        logits, _ = model(X.to(device, non_blocking=True))
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), Y.to(device).flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    n = args.train_batches
    post_e2e = tokens_per_second(lambda: post_batches(train_list, args.batch_size, seq_len), n, step)
    ours_e2e = tokens_per_second(lambda: our_batches(train, args.batch_size, seq_len, 1), n, step)
    print(f"   post's pipeline + model:           {post_e2e:14,.0f}")
    print(f"   our pipeline + model:              {ours_e2e:14,.0f}   ({ours_e2e / post_e2e:.2f}x)")
    pass_s = len(train) / ours_e2e
    print(f"   one pass over the novel: {pass_s / 60:.1f} min; the post's 7 epochs of overlapping "
          f"windows (~{7 * len(train) * seq_len / 1e9:.2f}B token-steps): "
          f"{7 * len(train) * seq_len / ours_e2e / 3600:.1f} h")  # fmt: skip

    print(f"\n3. Generation of {args.gen_length} characters")
    shipped = charlstm.shipped_checkpoint_path()
    if shipped.is_file():
        model, itos, _ = charlstm.load_model(map_location=device)
        print("   model: the shipped checkpoint")
    model.to(device).eval()
    prompt = chardata.encode(chardata.tokenize("She went away"), itos).tolist()
    loops = (
        ("re-feeding the growing text", generate_refeed, model),
        ("carrying the state, nn.LSTM per character", generate, LSTMEveryStep(model)),
        ("carrying the state, CharLSTM.step", generate, model),
    )
    for decoding, options in (("greedy", dict(greedy=True)), ("top-p 0.95, T 0.7", dict(top_p=0.95, temperature=0.7))):
        print(f"   {decoding}:")
        seconds, texts = [], []
        for name, fn, net in loops:
            start = time.perf_counter()
            texts.append(fn(net, prompt, args.gen_length, generator=torch.Generator().manual_seed(0), **options))
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
            print(f"     {name:43s}{seconds[-1]:6.2f} s   ({seconds[0] / seconds[-1]:.1f}x)")
        same = all(torch.equal(t.cpu(), texts[0].cpu()) for t in texts)
        print(f"     speed-up of carrying the state: {seconds[0] / seconds[-1]:.0f}x (same text: {same})")


class LSTMEveryStep(torch.nn.Module):
    """A CharLSTM that calls ``nn.LSTM`` even for one character (notebook 07's first version)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x, state=None):
        out, state = self.model.lstm(self.model.embedding(x), state)
        return self.model.head(out), state

if __name__ == "__main__":
    main()
