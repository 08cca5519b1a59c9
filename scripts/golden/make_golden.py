#!/usr/bin/env python3
"""Golden reference data for the converter and the CPU chain.

Builds tiny random models with fixed seeds through the reference PyTorch implementation
(transformers: Qwen3.5 with H_v != H_k, Qwen3, Llama; with --moe the mixtures Qwen3.5-MoE, with
a shared expert and two attention layers, and Qwen3-MoE), saves each as a Hugging Face folder
(config.json, model.safetensors, tokenizer.json, tokenizer_config.json) and records float32
logits for every position of fixed token sequences plus their 32-token greedy continuations.

Needs torch, transformers (5.x, with qwen3_5), safetensors, tokenizers, numpy. Runs on the CPU
in float32 (no TF32, no fused kernels): the pure-torch Gated DeltaNet and eager attention paths.

    python3 make_golden.py OUT_DIR [--moe]
"""

import json
import os
import sys

import numpy as np
import torch

SEQ_LENS = [1, 7, 64, 65, 200]
N_GREEDY = 32
VOCAB = 320  # model vocabulary; the tokenizer has fewer tokens, the rest become padding tokens

# Pre-tokenizer regexes of the model families (the converter names them by pattern).
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = ("the quick brown fox jumps over the lazy dog. the dog sleeps in the sun; "
          "then the fox and the dog play together in the green field near the river. "
          "there is nothing better than a warm day, they think, and the other animals agree.")

CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
                 "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}"
                 "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def bytes_to_unicode():
    """The GPT-2 byte-level alphabet: printable bytes map to themselves, the rest to U+0100..."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def train_merges(n_merges):
    """A deterministic toy BPE training on CORPUS (split at spaces, byte-level symbols)."""
    b2u = bytes_to_unicode()
    words = {}
    for i, w in enumerate(CORPUS.split(" ")):
        w = (" " if i else "") + w
        sym = tuple(b2u[b] for b in w.encode("utf-8"))
        words[sym] = words.get(sym, 0) + 1
    merges = []
    for _ in range(n_merges):
        pairs = {}
        for sym, c in words.items():
            for a, b in zip(sym, sym[1:]):
                pairs[(a, b)] = pairs.get((a, b), 0) + c
        if not pairs:
            break
        best = sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        merges.append(best)
        new_words = {}
        for sym, c in words.items():
            out, i = [], 0
            while i < len(sym):
                if i + 1 < len(sym) and (sym[i], sym[i + 1]) == best:
                    out.append(sym[i] + sym[i + 1])
                    i += 2
                else:
                    out.append(sym[i])
                    i += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    return merges


def make_tokenizer(family):
    """tokenizer.json and tokenizer_config.json dicts for a tiny byte-level BPE."""
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = train_merges(40)
    for a, b in merges:
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
    if family == "llama":
        specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>"]
        regex = LLAMA3_REGEX
    else:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        regex = QWEN35_REGEX if family.startswith("qwen35") else QWEN2_REGEX
    added = []
    for s in specials:
        added.append({"id": len(vocab), "content": s, "single_word": False, "lstrip": False,
                      "rstrip": False, "normalized": False, "special": True})
        vocab[s] = len(vocab)
    # One non-special added token, to exercise the user-defined token type.
    added.append({"id": len(vocab), "content": "<think>", "single_word": False, "lstrip": False,
                  "rstrip": False, "normalized": False, "special": False})
    vocab["<think>"] = len(vocab)
    assert len(vocab) <= VOCAB

    post = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
            "use_regex": False}
    if family == "llama":
        bos = specials[0]
        post = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": bos, "type_id": 0}},
                           {"Sequence": {"id": "A", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": bos, "type_id": 0}},
                         {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": bos, "type_id": 1}},
                         {"Sequence": {"id": "B", "type_id": 1}}],
                "special_tokens": {bos: {"id": bos, "ids": [vocab[bos]], "tokens": [bos]}}}
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"} if family != "llama" else None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False}]},
        "post_processor": post,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "",
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    decoder = {str(a["id"]): {k: a[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                "single_word", "special")} for a in added}
    if family == "llama":
        cfg = {"bos_token": specials[0], "eos_token": specials[2], "add_bos_token": True,
               "added_tokens_decoder": decoder, "model_max_length": 4096,
               "tokenizer_class": "PreTrainedTokenizerFast",
               "chat_template": CHAT_TEMPLATE.replace("<|im_start|>", "<|begin_of_text|>")}
    else:
        cfg = {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
               "add_bos_token": False, "added_tokens_decoder": decoder,
               "model_max_length": 4096, "tokenizer_class": "Qwen2Tokenizer",
               "chat_template": CHAT_TEMPLATE}
    return tok, cfg


def fill_weights(model, seed):
    """Random weights that keep the forward well conditioned: matrices ~ 1/sqrt(fan_in),
    zero-centred norms around 0 (so a missing +1 shows), gated norms around 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            shape = p.shape
            if name.endswith("A_log"):
                v = torch.log(torch.rand(shape, generator=g) * 15 + 1)
            elif name.endswith("dt_bias"):
                v = torch.randn(shape, generator=g) * 0.5 + 0.5
            elif "conv1d" in name:
                v = torch.randn(shape, generator=g) * 0.4
            elif name.endswith("linear_attn.norm.weight"):
                v = 1 + 0.3 * torch.randn(shape, generator=g)
            elif "norm" in name:
                v = 0.3 * torch.randn(shape, generator=g)
                if getattr(model.config, "model_type", "") in ("llama", "qwen3", "qwen3_moe"):
                    v = v + 1  # plain RMSNorm (w), not zero-centred
            elif "embed_tokens" in name:
                v = torch.randn(shape, generator=g)
            elif p.dim() == 2:
                v = torch.randn(shape, generator=g) / shape[1] ** 0.5
                if "lm_head" in name:
                    v = v * 3
            else:
                v = torch.randn(shape, generator=g) * 0.1
            p.copy_(v)


def force_torch_paths(model):
    """Make every Gated DeltaNet layer use the pure-torch chunked / recurrent rule and conv."""
    import importlib
    mods = []
    for mname in ("transformers.models.qwen3_5.modeling_qwen3_5",
                  "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe",
                  "transformers.models.qwen3_next.modeling_qwen3_next"):
        try:
            mods.append(importlib.import_module(mname))
        except ImportError:
            pass

    def find(name):
        for m in mods:
            if hasattr(m, name):
                return getattr(m, name)
        return None

    chunk = find("torch_chunk_gated_delta_rule")
    rec = find("torch_recurrent_gated_delta_rule")
    conv_upd = find("torch_causal_conv1d_update")
    n = 0
    for mod in model.modules():
        if type(mod).__name__.endswith("GatedDeltaNet"):
            n += 1
        if hasattr(mod, "chunk_gated_delta_rule"):
            assert chunk is not None, "torch_chunk_gated_delta_rule not found"
            mod.chunk_gated_delta_rule = chunk
            if rec is not None:
                mod.recurrent_gated_delta_rule = rec
            mod.causal_conv1d_fn = None
            if conv_upd is not None:
                mod.causal_conv1d_update = conv_upd
    return n


def build(family):
    import transformers as tf
    eager = {"attn_implementation": "eager"}
    if family == "qwen35":
        from transformers.models.qwen3_5 import modeling_qwen3_5 as mq
        layer_types = (["linear_attention"] * 3 + ["full_attention"]) * 2
        cfg = tf.Qwen3_5TextConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=8,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
            linear_value_head_dim=32, linear_conv_kernel_dim=4, layer_types=layer_types,
            full_attention_interval=4, rms_norm_eps=1e-6, tie_word_embeddings=False,
            max_position_embeddings=4096, bos_token_id=None, eos_token_id=VOCAB - 1,
            rope_parameters={"rope_type": "default", "rope_theta": 1e7,
                             "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1],
                             "mrope_interleaved": True}, **eager)
        model = mq.Qwen3_5ForCausalLM(cfg)
    elif family == "qwen35moe":
        # H_v != H_k, two attention layers, 8 experts of which 2 a token, a shared expert.
        from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as mqm
        layer_types = (["linear_attention"] * 3 + ["full_attention"]) * 2
        cfg = tf.Qwen3_5MoeTextConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=8, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, linear_num_key_heads=2, linear_num_value_heads=4,
            linear_key_head_dim=32, linear_value_head_dim=32, linear_conv_kernel_dim=4,
            layer_types=layer_types, full_attention_interval=4, num_experts=8,
            num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=48,
            norm_topk_prob=True, decoder_sparse_step=1, mlp_only_layers=[], rms_norm_eps=1e-6,
            tie_word_embeddings=False, max_position_embeddings=4096, bos_token_id=None,
            eos_token_id=VOCAB - 1,
            rope_parameters={"rope_type": "default", "rope_theta": 1e7,
                             "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1],
                             "mrope_interleaved": True}, **eager)
        model = mqm.Qwen3_5MoeForCausalLM(cfg)
    elif family == "qwen3moe":
        cfg = tf.Qwen3MoeConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
            num_key_value_heads=2, head_dim=32, num_experts=8, num_experts_per_tok=2,
            moe_intermediate_size=32, norm_topk_prob=True, decoder_sparse_step=1,
            mlp_only_layers=[], rms_norm_eps=1e-6, tie_word_embeddings=False,
            max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **eager)
        model = tf.Qwen3MoeForCausalLM(cfg)
    elif family == "qwen3":
        cfg = tf.Qwen3Config(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, head_dim=32, rms_norm_eps=1e-6,
            tie_word_embeddings=True, max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": 1e6}, **eager)
        model = tf.Qwen3ForCausalLM(cfg)
    else:
        cfg = tf.LlamaConfig(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
            num_attention_heads=4, num_key_value_heads=2, rms_norm_eps=1e-5,
            tie_word_embeddings=False, max_position_embeddings=4096, bos_token_id=VOCAB - 1,
            eos_token_id=VOCAB - 1,
            rope_parameters={"rope_type": "default", "rope_theta": 500000.0}, **eager)
        model = tf.LlamaForCausalLM(cfg)
    model.config._attn_implementation = "eager"
    if family.endswith("moe"):
        # The reference loop over the chosen experts: the grouped matrix products take no
        # float64, and the loop is the plainest statement of the math.
        model.set_experts_implementation("eager")
    return model


@torch.no_grad()
def logits_of(model, ids, dtype=torch.float32):
    x = torch.tensor([ids], dtype=torch.long)
    return model(input_ids=x, use_cache=False).logits[0].to(dtype)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "golden"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    import transformers
    import tokenizers
    summary = {"transformers": transformers.__version__, "torch": torch.__version__,
               "models": {}}
    print("transformers", transformers.__version__, "torch", torch.__version__, flush=True)
    families = (("qwen35", 1), ("qwen3", 2), ("llama", 3))
    if "--moe" in sys.argv[2:]:
        families = (("qwen35moe", 4), ("qwen3moe", 5))
    for family, seed in families:
        d = os.path.join(out, family)
        os.makedirs(d, exist_ok=True)
        torch.manual_seed(seed)
        model = build(family).float().eval()
        n_gdn = force_torch_paths(model)
        fill_weights(model, seed)
        model.save_pretrained(d, safe_serialization=True)
        for extra in ("generation_config.json",):
            p = os.path.join(d, extra)
            if os.path.exists(p):
                os.remove(p)
        tok, tok_cfg = make_tokenizer(family)
        with open(os.path.join(d, "tokenizer.json"), "w") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
        with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
            json.dump(tok_cfg, f, ensure_ascii=False, indent=1)
        # The tokenizer must load in the reference library; record a few encodings too.
        t = tokenizers.Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        samples = ["the quick brown fox", "Hello, world!  123 4567\n\nthe end",
                   "<|im_start|>user\nhi<|im_end|>", "caf\u00e9 na\u00efve \u4e2d\u6587 <think>"]
        tok_tests = [{"text": s, "ids": t.encode(s).ids} for s in samples]

        model64 = build(family).double().eval()
        force_torch_paths(model64)
        model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})

        rng = np.random.default_rng(100 + seed)
        seqs = []
        worst64 = 0.0
        min_margin = float("inf")
        for n in SEQ_LENS:
            ids = [int(v) for v in rng.integers(0, VOCAB, size=n)]
            lg = logits_of(model, ids)
            lg64 = logits_of(model64, ids, torch.float64)
            rel = ((lg.double() - lg64).norm(dim=-1) / lg64.norm(dim=-1)).max().item()
            worst64 = max(worst64, rel)
            assert torch.isfinite(lg).all()
            np.save(os.path.join(d, f"logits_{n}.npy"), lg.numpy().astype(np.float32))
            cur = list(ids)
            greedy, margins = [], []
            for _ in range(N_GREEDY):
                last = logits_of(model, cur)[-1]
                top2 = torch.topk(last, 2).values
                margins.append((top2[0] - top2[1]).item())
                min_margin = min(min_margin, margins[-1])
                nxt = int(torch.argmax(last).item())
                greedy.append(nxt)
                cur.append(nxt)
            seqs.append({"len": n, "ids": ids, "greedy": greedy,
                         "greedy_top2_margins": [round(m, 6) for m in margins], "logits": f"logits_{n}.npy"})
            print(f"{family} len {n}: logit rms {lg.pow(2).mean().sqrt().item():.3f}, "
                  f"f32 vs f64 rel {rel:.2e}", flush=True)
        meta = {"family": family, "seed": seed, "vocab": VOCAB, "gdn_layers": n_gdn,
                "sequences": seqs, "f32_vs_f64_max_rel": worst64,
                "greedy_min_top2_margin": min_margin, "tokenizer_tests": tok_tests,
                "transformers": transformers.__version__, "torch": torch.__version__}
        with open(os.path.join(d, "golden.json"), "w") as f:
            json.dump(meta, f, indent=1)
        summary["models"][family] = {"f32_vs_f64_max_rel": worst64,
                                     "greedy_min_top2_margin": min_margin,
                                     "gdn_layers": n_gdn}
        print(family, "f32 vs f64", worst64, "greedy min margin", min_margin, "gdn", n_gdn,
              flush=True)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
