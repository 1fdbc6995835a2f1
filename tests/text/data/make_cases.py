#!/usr/bin/env python3
"""Split llama.cpp ggml-vocab-<m>.gguf.inp/.out into /tmp/tokdata/<m>.cases.

.inp: every case is written as  text + "\\n__ggml_vocab_test__\\n"
.out: one line per case, each id preceded by a space (" 1 2 3"), produced by
      HF AutoTokenizer.encode(text, add_special_tokens=False).

.cases format (UTF-8 text, one case = 2 lines):
  # <n> <python repr of the input, ASCII-escaped>      (comment, informational)
  <hex of the input's UTF-8 bytes, '-' if empty>\\t<ids separated by single spaces>
"""
import sys

SEP = "\n__ggml_vocab_test__\n"


def load(inp_path, out_path):
    raw = open(inp_path, "rb").read().decode("utf-8")
    assert raw.endswith(SEP), "inp does not end with separator"
    texts = raw[:-len(SEP)].split(SEP)
    lines = open(out_path, "r", encoding="utf-8").read().split("\n")
    assert lines[-1] == "", "out does not end with newline"
    lines = lines[:-1]
    assert len(texts) == len(lines), (len(texts), len(lines))
    ids = [[int(x) for x in l.split()] for l in lines]
    return list(zip(texts, ids))


def write(cases, path, note):
    with open(path, "w", encoding="utf-8") as f:
        f.write("# %s\n" % note)
        f.write("# format: per case a '# n repr' comment line, then HEX(utf8 input) TAB ids ('-' = empty input)\n")
        for n, (t, ids) in enumerate(cases):
            f.write("# %d %s\n" % (n, ascii(t)))
            f.write("%s\t%s\n" % (t.encode("utf-8").hex() or "-", " ".join(map(str, ids))))


if __name__ == "__main__":
    m = sys.argv[1]
    cases = load("src/ggml-vocab-%s.gguf.inp" % m, "src/ggml-vocab-%s.gguf.out" % m)
    write(cases, "%s.cases" % m, "llama.cpp models/ggml-vocab-%s.gguf.inp/.out; HF AutoTokenizer "
          "encode(text, add_special_tokens=False): no BOS/EOS added" % m)
    print(m, len(cases))
