#!/usr/bin/env python3
# Trains the project's own small Qwen3.5 (the qwen35 geometry where it matters to the kernels:
# attention head dim 256 with partial rotary, DeltaNet key/value head dims 128, H_v = 2 H_k, full
# attention every 4th layer; 12.6M parameters, 8k vocabulary) on the corpus of
# scripts/model/corpus.sh, within one run of the GPU machine (scripts/model/device_train.sh), and
# writes to OUT:
#   model/            the Hugging Face folder `deltallm convert` reads (config, safetensors shards
#                     under 16 MB, tokenizer.json, tokenizer_config.json), the best held-out step
#   loss.png, loss.csv  the training and held-out loss curves
#   samples.txt, samples.json  greedy continuations of the config's prompts (ids and text)
#   reference/        transformers' float32 numbers on held-out text for the engine's tests:
#                     metrics.json (perplexity as llama-perplexity scores it), per-position
#                     log-probabilities of the targets and top logits of the first windows
# Training stops on the held-out loss (no gain in `patience` evaluations) or at the time budget.
#
#   train.py --config train_config.json --data build/corpus --out OUT
#   train.py ... --stand-in --max-steps 3     a tiny stand-in model instead of transformers'
#                                             (checks the data pipeline and the loop on a CPU)
import argparse
import contextlib
import json
import math
import os
import shutil
import struct
import sys
import time
import zlib

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


def load_ids(path):
    return torch.from_numpy(np.fromfile(path, dtype="<u2").astype(np.int64))


def batches(ids, seq_len, batch_size, gen):
    """Random windows of seq_len + 1 tokens (inputs and shifted targets), forever."""
    n = ids.numel() - seq_len - 1
    while True:
        starts = torch.randint(0, n, (batch_size,), generator=gen)
        w = torch.stack([ids[s:s + seq_len + 1] for s in starts.tolist()])
        yield w[:, :-1], w[:, 1:]


def build_model(mc, stand_in):
    if stand_in:
        class StandIn(torch.nn.Module):
            """Embedding, one MLP, tied head: only for checking the loop without transformers."""

            def __init__(self):
                super().__init__()
                self.emb = torch.nn.Embedding(mc["vocab_size"], 64)
                self.mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.SiLU(),
                                               torch.nn.Linear(128, 64))

            def forward(self, input_ids):
                h = self.emb(input_ids)
                h = h + self.mlp(h)
                return type("Out", (), {"logits": h @ self.emb.weight.T})()

        return StandIn()
    import transformers as tf
    from transformers.models.qwen3_5 import modeling_qwen3_5 as mq
    n = mc["num_hidden_layers"]
    k = mc["full_attention_interval"]
    layer_types = ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
    rot_pairs = int(mc["head_dim"] * mc["partial_rotary_factor"]) // 2
    third = -(-rot_pairs // 3)  # Qwen3.5's split of the pairs: 11, 11, 10 of 32
    section = [third, third, rot_pairs - 2 * third]
    cfg = tf.Qwen3_5TextConfig(
        vocab_size=mc["vocab_size"], hidden_size=mc["hidden_size"],
        intermediate_size=mc["intermediate_size"], num_hidden_layers=n,
        num_attention_heads=mc["num_attention_heads"],
        num_key_value_heads=mc["num_key_value_heads"], head_dim=mc["head_dim"],
        linear_num_key_heads=mc["linear_num_key_heads"],
        linear_num_value_heads=mc["linear_num_value_heads"],
        linear_key_head_dim=mc["linear_key_head_dim"],
        linear_value_head_dim=mc["linear_value_head_dim"],
        linear_conv_kernel_dim=mc["linear_conv_kernel_dim"], layer_types=layer_types,
        rms_norm_eps=mc["rms_norm_eps"],
        tie_word_embeddings=mc["tie_word_embeddings"],
        max_position_embeddings=mc["max_position_embeddings"], bos_token_id=None,
        eos_token_id=mc["vocab_size"] - 7, pad_token_id=mc["vocab_size"] - 9,
        rope_parameters={"rope_type": "default", "rope_theta": mc["rope_theta"],
                         "partial_rotary_factor": mc["partial_rotary_factor"],
                         "mrope_section": section, "mrope_interleaved": True})
    return mq.Qwen3_5ForCausalLM(cfg)


def amp(device, dtype):
    """bf16 autocast on the GPU; plain float32 elsewhere."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


@torch.no_grad()
def held_out_loss(model, ids, seq_len, n_windows, device, dtype):
    """Mean loss over fixed, evenly spaced held-out windows (the same at every evaluation)."""
    model.eval()
    step = max(1, (ids.numel() - seq_len - 1) // n_windows)
    total, count = 0.0, 0
    for i in range(n_windows):
        w = ids[i * step:i * step + seq_len + 1].to(device)
        with amp(device, dtype):
            logits = model(input_ids=w[None, :-1]).logits.float()
        total += F.cross_entropy(logits[0], w[1:], reduction="sum").item()
        count += seq_len
    model.train()
    return total / count


@torch.no_grad()
def reference(model, text_ids, rc, device, out_dir):
    """float32 numbers on held-out text, scored as `deltallm perplexity -c ctx --chunks N`
    scores it (N = ppl_max_windows, bounding the device time)."""
    model.float().eval()
    c = rc["ctx"]
    n_chunk = min(text_ids.numel() // c, rc["ppl_max_windows"])
    nll = nll2 = 0.0
    count = 0
    logprobs, top_ids, top_logits = [], [], []
    for k in range(n_chunk):
        w = text_ids[k * c:(k + 1) * c].to(device)
        logits = model(input_ids=w[None]).logits[0].float()
        lp = torch.log_softmax(logits.double(), dim=-1)
        tgt = lp[:-1].gather(1, w[1:, None])[:, 0]  # log p(token i+1 | ..i)
        scored = -tgt[c // 2:]
        nll += scored.sum().item()
        nll2 += (scored * scored).sum().item()
        count += scored.numel()
        if k < rc["windows"]:
            logprobs.append(tgt.float().cpu().numpy())
            v, i = logits.topk(rc["top_k"], dim=-1)
            top_ids.append(i.int().cpu().numpy())
            top_logits.append(v.cpu().numpy())
    mean = nll / count
    ppl = math.exp(mean)
    err = math.sqrt(max(nll2 / count - mean * mean, 0) / (count - 1)) * ppl
    os.makedirs(out_dir, exist_ok=True)
    np.save(os.path.join(out_dir, "target_logprobs.npy"), np.stack(logprobs))
    np.save(os.path.join(out_dir, "top_ids.npy"), np.stack(top_ids))
    np.save(os.path.join(out_dir, "top_logits.npy"), np.stack(top_logits))
    np.save(os.path.join(out_dir, "window_ids.npy"),
            text_ids[:rc["windows"] * c].view(rc["windows"], c).int().numpy())
    return {"ctx": c, "windows": n_chunk, "scored_tokens": count, "ppl": ppl, "ppl_error": err}


def png_plot(path, series, width=800, height=480):
    """A line chart as a PNG, without plotting libraries: series = [(points, (r, g, b))]."""
    img = [[(255, 255, 255)] * width for _ in range(height)]
    xs = [x for pts, _ in series for x, _ in pts]
    ys = [y for pts, _ in series for _, y in pts]
    if not xs:
        return
    x0, x1 = min(xs), max(xs) or 1
    y0, y1 = min(ys), max(ys)
    pad = 30

    def to_px(x, y):
        px = pad + (x - x0) / max(x1 - x0, 1e-9) * (width - 2 * pad)
        py = height - pad - (y - y0) / max(y1 - y0, 1e-9) * (height - 2 * pad)
        return int(px), int(py)

    for i in range(pad, width - pad):  # axes
        img[height - pad][i] = (0, 0, 0)
    for j in range(pad, height - pad):
        img[j][pad] = (0, 0, 0)
    for pts, col in series:
        for (xa, ya), (xb, yb) in zip(pts, pts[1:]):
            (pa, qa), (pb, qb) = to_px(xa, ya), to_px(xb, yb)
            n = max(abs(pb - pa), abs(qb - qa), 1)
            for t in range(n + 1):
                px, py = pa + (pb - pa) * t // n, qa + (qb - qa) * t // n
                for dy in (0, 1):
                    if 0 <= py + dy < height and 0 <= px < width:
                        img[py + dy][px] = col
    raw = b"".join(b"\0" + bytes(v for p in row for v in p) for row in img)

    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data +
                struct.pack(">I", zlib.crc32(tag + data) & 0xffffffff))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 9)))
        f.write(chunk(b"IEND", b""))


def plot_losses(path, curve, held_curve):
    """matplotlib where it is installed; else png_plot (training blue, held-out red)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        png_plot(path, [(curve, (40, 90, 200)), (held_curve, (220, 60, 30))])
        return
    fig, ax = plt.subplots(figsize=(8, 4.8))
    ax.plot(*zip(*curve), label="training batch", color="tab:blue", linewidth=0.8)
    if held_curve:
        ax.plot(*zip(*held_curve), "o-", label="held out", color="tab:red")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(HERE, "train_config.json"))
    ap.add_argument("--data", required=True, help="train.u16, heldout.u16, heldout_text.u16")
    ap.add_argument("--out", required=True)
    ap.add_argument("--stand-in", action="store_true")
    ap.add_argument("--max-steps", type=int, default=0)
    a = ap.parse_args()
    cfg = json.load(open(a.config))
    mc, tc, rc = cfg["model"], cfg["train"], cfg["reference"]
    t_start = time.time()
    torch.manual_seed(tc["seed"])
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True

    train_ids = load_ids(os.path.join(a.data, "train.u16"))
    held_ids = load_ids(os.path.join(a.data, "heldout.u16"))
    text_ids = load_ids(os.path.join(a.data, "heldout_text.u16"))
    assert int(train_ids.max()) < mc["vocab_size"], "token ids beyond the vocabulary"
    print("train: %d training tokens, %d held out, device %s" %
          (train_ids.numel(), held_ids.numel(), device), flush=True)

    model = build_model(mc, a.stand_in).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    print("train: %.2fM parameters" % (n_params / 1e6), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": tc["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=tc["lr"], betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(tc["seed"])
    data = batches(train_ids, tc["seq_len"], tc["batch_size"], gen)

    budget = tc["time_budget_s"]
    t0 = time.time()
    curve, held_curve = [], []
    best, best_state, bad, step = float("inf"), None, 0, 0
    stop = "time budget"
    while True:
        frac = (time.time() - t0) / budget
        if frac >= 1:
            break
        if a.max_steps and step >= a.max_steps:
            stop = "max steps"
            break
        warm = min(1.0, (step + 1) / tc["warmup_steps"])
        cos = tc["min_lr_ratio"] + (1 - tc["min_lr_ratio"]) * 0.5 * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = tc["lr"] * warm * cos
        x, y = next(data)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with amp(device, dtype):
            logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tc["grad_clip"])
        opt.step()
        step += 1
        if step % 20 == 0 or step == 1:
            curve.append((step, loss.item()))
        if step % tc["eval_every"] == 0 or (a.max_steps and step == a.max_steps):
            hl = held_out_loss(model, held_ids, tc["seq_len"], tc["eval_windows"], device, dtype)
            held_curve.append((step, hl))
            print("train: step %d loss %.4f held-out %.4f (%.0f s)" %
                  (step, loss.item(), hl, time.time() - t0), flush=True)
            if hl < best:
                best, bad = hl, 0
                best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            else:
                bad += 1
                if bad >= tc["patience"]:
                    stop = "held-out loss"
                    break
    if best_state is not None:
        model.load_state_dict(best_state)
    train_s = time.time() - t0
    print("train: stopped (%s) after %d steps, %.0f s; best held-out loss %.4f" %
          (stop, step, train_s, best), flush=True)

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "loss.csv"), "w") as f:
        f.write("step,train_loss,heldout_loss\n")
        held = dict(held_curve)
        for s, l in curve:
            f.write("%d,%.5f,%s\n" % (s, l, "%.5f" % held[s] if s in held else ""))
        for s, l in held_curve:
            if s not in dict(curve):
                f.write("%d,,%.5f\n" % (s, l))
    plot_losses(os.path.join(a.out, "loss.png"), curve, held_curve)

    # The weights first, so a run cut short by the device's time limit still returns them.
    if not a.stand_in:
        folder = os.path.join(a.out, "model")
        model.save_pretrained(folder, max_shard_size="15MB", safe_serialization=True)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(HERE, f), folder)
    model.float().eval()
    samples = []
    if not a.stand_in:
        import transformers as tf
        tok = tf.PreTrainedTokenizerFast(tokenizer_file=os.path.join(HERE, "tokenizer.json"))
        for p in rc["prompts"]:
            prompt = tok.encode(p)
            seq = list(prompt)
            # Plain greedy over whole sequences in float32, never stopping at an end token: what
            # `deltallm run --temp 0 --ignore-eos -n N` must reproduce.
            with torch.no_grad():
                for _ in range(rc["greedy_tokens"]):
                    logits = model(input_ids=torch.tensor([seq], device=device)).logits
                    seq.append(int(logits[0, -1].float().argmax()))
            new = seq[len(prompt):]
            samples.append({"prompt": p, "prompt_ids": prompt, "greedy_ids": new,
                            "text": tok.decode(new)})
    with open(os.path.join(a.out, "samples.json"), "w") as f:
        json.dump(samples, f, ensure_ascii=False, indent=1)
    with open(os.path.join(a.out, "samples.txt"), "w") as f:
        for s in samples:
            f.write("### %s\n%s%s\n\n" % (s["prompt"], s["prompt"], s["text"]))
    ref = reference(model, text_ids, rc, device, os.path.join(a.out, "reference"))
    metrics = {"parameters": n_params, "steps": step, "train_seconds": train_s, "stop": stop,
               "best_heldout_loss": best, "tokens_seen": step * tc["batch_size"] * tc["seq_len"],
               "device": torch.cuda.get_device_name(0) if device.type == "cuda" else "cpu",
               "torch": torch.__version__, "heldout_perplexity": ref,
               "total_seconds": time.time() - t_start}
    with open(os.path.join(a.out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    print(json.dumps(metrics, indent=1))


if __name__ == "__main__":
    sys.exit(main())
