#!/usr/bin/env python3
"""Write a tiny random-weight llama-architecture GGUF model for testing llama-server.

Tokenizer keys (tokenizer.ggml.*) are copied from the vocab-only GGUF shipped with
the vendored llama.cpp (models/ggml-vocab-llama-spm.gguf, SPM, 32000 tokens).

Usage: python3 make-tiny-gguf.py --out FILE.gguf --vocab VOCAB.gguf
                                  [--layers 2] [--embd 64] [--heads 4] [--ff 128]
                                  [--ctx 4096] [--seed 1234]
"""
import argparse

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter, GGUFValueType


def field_value(field):
    """Return (python value, value type, sub type) for a GGUFReader field."""
    vtype = field.types[0]
    if vtype == GGUFValueType.ARRAY:
        sub = field.types[1]
        if sub == GGUFValueType.STRING:
            vals = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
        else:
            vals = [field.parts[i].tolist()[0] for i in field.data]
        return vals, vtype, sub
    if vtype == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8"), vtype, None
    return field.parts[field.data[0]].tolist()[0], vtype, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    # --- tokenizer from the vocab-only gguf ---
    reader = GGUFReader(args.vocab)
    tok_fields = {k: field_value(f) for k, f in reader.fields.items()
                  if k.startswith("tokenizer.")}
    tokens = tok_fields["tokenizer.ggml.tokens"][0]
    n_vocab = len(tokens)

    n_embd, n_head, n_ff, n_layer = args.embd, args.heads, args.ff, args.layers
    assert n_embd % n_head == 0
    head_dim = n_embd // n_head

    w = GGUFWriter(args.out, arch="llama")
    w.add_name("tiny-random-llama")
    w.add_context_length(args.ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(n_layer)
    w.add_feed_forward_length(n_ff)
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    for key, (val, vtype, sub) in tok_fields.items():
        if vtype == GGUFValueType.ARRAY:
            w.add_key_value(key, val, vtype, sub_type=sub)
        else:
            w.add_key_value(key, val, vtype)

    # --- random weights (numpy shape = reversed ggml ne) ---
    rng = np.random.default_rng(args.seed)

    def rnd(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    ones = lambda n: np.ones((n,), dtype=np.float32)

    w.add_tensor("token_embd.weight", rnd(n_vocab, n_embd))
    for i in range(n_layer):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", ones(n_embd))
        w.add_tensor(p + "attn_q.weight", rnd(n_embd, n_embd))
        w.add_tensor(p + "attn_k.weight", rnd(n_embd, n_embd))
        w.add_tensor(p + "attn_v.weight", rnd(n_embd, n_embd))
        w.add_tensor(p + "attn_output.weight", rnd(n_embd, n_embd))
        w.add_tensor(p + "ffn_norm.weight", ones(n_embd))
        w.add_tensor(p + "ffn_gate.weight", rnd(n_ff, n_embd))
        w.add_tensor(p + "ffn_up.weight", rnd(n_ff, n_embd))
        w.add_tensor(p + "ffn_down.weight", rnd(n_embd, n_ff))
    w.add_tensor("output_norm.weight", ones(n_embd))
    w.add_tensor("output.weight", rnd(n_vocab, n_embd, scale=0.5))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {args.out}: n_vocab={n_vocab} n_embd={n_embd} n_head={n_head} "
          f"n_ff={n_ff} n_layer={n_layer} ctx={args.ctx}")


if __name__ == "__main__":
    main()
