#!/usr/bin/env python3
"""Convert a llama.cpp vocab-only GGUF (BPE, byte-level) into a Hugging Face
tokenizer.json equivalent.  Python 3 stdlib only.

usage: gguf2tokjson.py IN.gguf OUT.json [--pre NAME] [--dump]
  --pre NAME   override tokenizer.ggml.pre
  --dump       print the GGUF key/values (arrays summarized) and exit
"""
import json
import struct
import sys

# ---------------------------------------------------------------- GGUF reader
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
_SCALAR = {T_U8: '<B', T_I8: '<b', T_U16: '<H', T_I16: '<h', T_U32: '<I', T_I32: '<i',
           T_F32: '<f', T_BOOL: '<?', T_U64: '<Q', T_I64: '<q', T_F64: '<d'}


class Reader:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def unpack(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.unpack('<Q')
        b = self.d[self.p:self.p + n]
        self.p += n
        return b.decode('utf-8', errors='surrogateescape')

    def value(self, t):
        if t in _SCALAR:
            return self.unpack(_SCALAR[t])
        if t == T_STR:
            return self.string()
        if t == T_ARR:
            it = self.unpack('<I')
            n = self.unpack('<Q')
            if it in _SCALAR:  # fast path
                fmt = _SCALAR[it]
                sz = struct.calcsize(fmt)
                vals = list(struct.unpack_from('<%d%s' % (n, fmt[1]), self.d, self.p))
                self.p += sz * n
                return vals
            return [self.value(it) for _ in range(n)]
        raise ValueError('unknown GGUF value type %d at offset %d' % (t, self.p))


def read_gguf_kv(path):
    with open(path, 'rb') as f:
        data = f.read()
    r = Reader(data)
    if data[:4] != b'GGUF':
        raise ValueError('not a GGUF file: %r' % data[:4])
    r.p = 4
    version = r.unpack('<I')
    if version == 1:
        raise ValueError('GGUF v1 (u32 counts) not supported')
    n_tensors = r.unpack('<Q')
    n_kv = r.unpack('<Q')
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        t = r.unpack('<I')
        kv[k] = r.value(t)
    return version, n_tensors, kv


# ------------------------------------------------------- pre-tokenizer table
# Values copied from the tokenizer.json files published on the HF hub for the
# model that each llama.cpp "tokenizer.ggml.pre" name refers to
# (see convert_hf_to_gguf_update.py); cross-checked against the regex_exprs in
# llama.cpp src/llama-vocab.cpp.
BYTELEVEL_GPT2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
BYTELEVEL_NOREGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
LLAMA3_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
             " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
QWEN2_RE = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
            " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def split_iso(pattern):
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


PRE = {
    # openai-community/gpt2, mosaicml/mpt-7b, allenai/OLMo: plain ByteLevel (GPT-2 regex)
    "gpt-2": BYTELEVEL_GPT2,
    "mpt": BYTELEVEL_GPT2,
    "olmo": BYTELEVEL_GPT2,
    # bigcode/starcoder2-3b, smallcloudai/Refact-1_6-base, HuggingFaceTB/SmolLM-135M:
    # Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]
    "starcoder": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, BYTELEVEL_GPT2]},
    "refact": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, BYTELEVEL_GPT2]},
    "smollm": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, BYTELEVEL_GPT2]},
    # meta-llama/Meta-Llama-3-8B
    "llama-bpe": {"type": "Sequence", "pretokenizers": [split_iso(LLAMA3_RE), BYTELEVEL_NOREGEX]},
    "smaug-bpe": {"type": "Sequence", "pretokenizers": [split_iso(LLAMA3_RE), BYTELEVEL_NOREGEX]},
    "dbrx": {"type": "Sequence", "pretokenizers": [split_iso(LLAMA3_RE), BYTELEVEL_NOREGEX]},
    # Qwen/Qwen1.5-7B (single-digit \p{N})
    "qwen2": {"type": "Sequence", "pretokenizers": [split_iso(QWEN2_RE), BYTELEVEL_NOREGEX]},
}

# HF "ignore_merges" flag per pre type (Llama 3 tokenizer.json sets it true).
IGNORE_MERGES = {"llama-bpe": True, "smaug-bpe": True}

TOKEN_TYPE_NORMAL, TOKEN_TYPE_UNKNOWN, TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED = 1, 2, 3, 4


def is_convert_padding(tok, ttype, idx):
    """convert_hf_to_gguf.py pads the vocab up to the model's vocab_size with
    USER_DEFINED tokens named [PAD<id>]; they do not exist in the HF tokenizer."""
    return ttype == TOKEN_TYPE_USER_DEFINED and tok == "[PAD%d]" % idx


# gpt-neox-20b tokenizer (used by mosaicml/mpt-7b) has an NFC normalizer.
NORMALIZER = {"mpt": {"type": "NFC"}}


def build(kv, pre_name):
    model = kv.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise SystemExit("tokenizer.ggml.model is %r, only byte-level BPE ('gpt2') is supported" % model)
    if pre_name not in PRE:
        raise SystemExit("no pre-tokenizer mapping for tokenizer.ggml.pre=%r (known: %s)"
                         % (pre_name, ", ".join(sorted(PRE))))
    tokens = kv["tokenizer.ggml.tokens"]
    ttypes = kv.get("tokenizer.ggml.token_type", [TOKEN_TYPE_NORMAL] * len(tokens))
    merges = kv.get("tokenizer.ggml.merges", [])

    vocab = {}
    dropped = 0
    for i, t in enumerate(tokens):
        if is_convert_padding(t, ttypes[i], i):
            dropped += 1
            continue
        if t in vocab:
            sys.stderr.write("warning: duplicate token %r ids %d and %d (keeping first)\n" % (t, vocab[t], i))
            continue
        vocab[t] = i

    added = []
    for i, (t, ty) in enumerate(zip(tokens, ttypes)):
        if is_convert_padding(t, ty, i):
            continue
        if ty in (TOKEN_TYPE_CONTROL, TOKEN_TYPE_USER_DEFINED):
            added.append({"id": i, "content": t, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": ty != TOKEN_TYPE_CONTROL,
                          "special": ty == TOKEN_TYPE_CONTROL})

    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": NORMALIZER.get(pre_name),
        "pre_tokenizer": PRE[pre_name],
        # ByteLevel post-processor only fixes offsets; it adds no ids.  (HF's
        # Llama 3 tokenizer.json has a TemplateProcessing that prepends
        # <|begin_of_text|> when add_special_tokens=True; omitted on purpose.)
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": IGNORE_MERGES.get(pre_name, False),
            "vocab": vocab,
            "merges": merges,
        },
    }


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    pre_override = None
    if "--pre" in argv:
        pre_override = argv[argv.index("--pre") + 1]
        args.remove(pre_override)
    version, n_tensors, kv = read_gguf_kv(args[0])
    if "--dump" in argv:
        print("GGUF v%d tensors=%d kv=%d" % (version, n_tensors, len(kv)))
        for k, v in kv.items():
            if isinstance(v, list):
                print("%s: array[%d] %r ..." % (k, len(v), v[:5]))
            else:
                print("%s: %r" % (k, v))
        return
    pre = pre_override or kv.get("tokenizer.ggml.pre", "default")
    tj = build(kv, pre)
    with open(args[1], "w", encoding="utf-8", errors="surrogateescape") as f:
        json.dump(tj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
    sys.stderr.write("%s: pre=%s tokens=%d vocab=%d merges=%d added=%d ignore_merges=%s\n" % (
        args[0], pre, len(kv["tokenizer.ggml.tokens"]), len(tj["model"]["vocab"]), len(tj["model"]["merges"]),
        len(tj["added_tokens"]), tj["model"]["ignore_merges"]))


if __name__ == "__main__":
    main(sys.argv)
