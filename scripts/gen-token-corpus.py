#!/usr/bin/env python3
"""Generate the tokenizer differential-test corpus (python3 stdlib only).

Writes a JSON array of strings to stdout (or to the path given). The corpus
is deterministic for a seed, so a failure names a string that reproduces:
source code in ten languages, JSON, unified diffs, shell output, CJK, emoji
and ZWJ sequences, combining marks, right-to-left scripts, whitespace runs,
tabs, CRLF, numbers of every length, control-token look-alikes and random
mixes. The categories are the ones issue 3 lists; each string is tagged
nowhere, the test reports failures by index and prints the string.

usage: gen-token-corpus.py [--seed N] [OUT.json]
"""
import json
import random
import sys

IDENTS = ["buffer", "count", "idx", "value", "result", "request", "handler", "config", "token", "offset",
          "length", "parser", "stream", "client", "server", "message", "ctx", "options", "items", "node",
          "cache", "prefix", "callback", "payload", "schema", "field", "header", "status", "worker", "queue",
          "MAX_LEN", "userId", "HTTPServer", "parse_json", "__init__", "i", "j", "kv", "tmp2", "xmlHttpRequest"]

CODE = {
    "c": ["#include <stdio.h>\n\nint {a}(const char *{b}, size_t {c})\n{{\n    for (size_t i = 0; i < {c}; i++)\n        if ({b}[i] == '\\n') return {n};\n    return -1;\n}}\n",
          "static inline uint32_t {a}_{b}(uint32_t x) {{ return (x << {n}) | (x >> (32 - {n})); }}",
          "    if (!{a}) {{\n\tfprintf(stderr, \"{b}: %s\\n\", strerror(errno));\n\tgoto fail;\n    }}"],
    "python": ["def {a}({b}, {c}=None):\n    \"\"\"Return {b} as a list.\"\"\"\n    if {c} is None:\n        {c} = []\n    return [x ** {n} for x in {b} if x]\n",
               "class {A}(Base):\n    def __init__(self, *args, **kwargs):\n        super().__init__(*args, **kwargs)\n        self.{a} = {{'{b}': {n}, \"{c}\": None}}\n",
               "    with open(f\"{{path}}/{a}.txt\", 'r', encoding='utf-8') as fh:\n        for line in fh:  # {b}\n            yield line.rstrip('\\r\\n')"],
    "javascript": ["const {a} = async ({b}, {c} = {{}}) => {{\n  const res = await fetch(`/api/${{{b}}}?n={n}`);\n  return res.ok ? res.json() : null;\n}};\n",
                   "export default function {A}({{ {b}, {c} }}) {{\n  return <div className=\"{a}\">{{{b}.map((x) => x * {n})}}</div>;\n}}",
                   "{a}.addEventListener('click', function (e) {{ e.preventDefault(); {b}[{n}] ??= {c}?.value; }});"],
    "typescript": ["interface {A} {{\n  {a}: string;\n  {b}?: number[];\n  readonly {c}: Map<string, {A}>;\n}}\n",
                   "type {A}<T extends object> = {{ [K in keyof T]-?: T[K] | undefined }};",
                   "function {a}<T>(xs: T[], n = {n}): T[] {{ return xs.filter((_, i) => i % n === 0); }}"],
    "rust": ["fn {a}(&mut self, {b}: &[u8]) -> Result<usize, Error> {{\n    let n = {b}.len().min({n});\n    self.{c}.extend_from_slice(&{b}[..n]);\n    Ok(n)\n}}\n",
             "#[derive(Debug, Clone, PartialEq)]\npub struct {A}<'a> {{ {a}: &'a str, {b}: Vec<u32>, {c}: Option<Box<{A}<'a>>> }}",
             "match {a} {{ Some(ref x) if x.len() > {n} => {{ println!(\"{{:?}}\", x); }} _ => unreachable!() }}"],
    "go": ["func (s *{A}) {a}({b} int, {c} string) error {{\n\tif {b} < 0 {{\n\t\treturn fmt.Errorf(\"bad %d\", {b})\n\t}}\n\ts.{c} = append(s.{c}, {n})\n\treturn nil\n}}\n",
           "for i, v := range {a} {{\n\tif v == nil {{ continue }}\n\t{b}[i] = v.{c}()\n}}",
           "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() {{ fmt.Println(os.Args[{n}:]) }}"],
    "java": ["public final class {A} implements Comparable<{A}> {{\n    private final int {a} = {n};\n    @Override public int compareTo({A} o) {{ return Integer.compare({a}, o.{a}); }}\n}}\n",
             "List<String> {a} = {b}.stream().map(String::trim).filter(s -> !s.isEmpty()).collect(Collectors.toList());",
             "try {{ {a}.close(); }} catch (IOException e) {{ throw new UncheckedIOException(\"{b}\", e); }}"],
    "cpp": ["template <typename T>\nstd::vector<T> {a}(const std::vector<T>& {b}) {{\n    std::vector<T> out;\n    out.reserve({b}.size());\n    for (auto&& x : {b}) out.push_back(x * {n});\n    return out;\n}}\n",
            "auto {a} = std::make_unique<{A}>(std::move({b}));  // owns {c}",
            "std::cout << \"{a}=\" << {b} << std::endl; static_assert(sizeof({A}) == {n});"],
    "ruby": ["def {a}({b}, {c}: nil)\n  {b}.each_with_index.map {{ |x, i| x * i + {n} }}.select(&:positive?)\nend\n",
             "class {A} < ActiveRecord::Base\n  has_many :{a}s, dependent: :destroy\n  validates :{b}, presence: true\nend",
             "puts \"#{{{a}}} -> #{{{b}.inspect}}\" unless {c}.nil?"],
    "shell": ["#!/usr/bin/env bash\nset -euo pipefail\nfor f in \"$@\"; do\n  [ -f \"$f\" ] || continue\n  grep -n '{a}' \"$f\" | head -{n}\ndone\n",
              "export {A}=\"${{{A}:-/usr/local}}\"; cd \"${A}/{a}\" && make -j{n} 2>&1 | tee build.log",
              "find . -name '*.{a}' -print0 | xargs -0 sed -i 's/{b}/{c}/g'"],
    "sql": ["SELECT {a}.id, COUNT(*) AS n FROM {a} JOIN {b} ON {b}.{a}_id = {a}.id WHERE {c} > {n} GROUP BY 1 ORDER BY n DESC;",
            "CREATE TABLE {a} (\n  id BIGSERIAL PRIMARY KEY,\n  {b} TEXT NOT NULL DEFAULT '',\n  {c} TIMESTAMPTZ\n);"],
}

SHELL_OUT = [
    "$ ls -la\ntotal {n}\ndrwxr-xr-x  5 user staff   160 Jan  3 10:12 .\n-rw-r--r--  1 user staff  {n} Jan  3 10:12 {a}.py\n",
    "$ git status\nOn branch main\nChanges not staged for commit:\n  (use \"git add <file>...\" to update what will be committed)\n\tmodified:   src/{a}.c\n",
    "src/{a}.c:{n}:17: error: implicit declaration of function '{b}' [-Werror=implicit-function-declaration]\n   {n} |     {b}({c});\n      |     ^~~~~\n",
    "============================= test session starts ==============================\ncollected {n} items\n\ntests/test_{a}.py ..F.                                              [100%]\n",
    "Traceback (most recent call last):\n  File \"/app/{a}.py\", line {n}, in <module>\n    {b}()\nKeyError: '{c}'\n",
    "   Compiling {a} v0.1.{n}\nerror[E0502]: cannot borrow `{b}` as mutable because it is also borrowed as immutable\n",
    "PID   USER     %CPU %MEM COMMAND\n{n}  root     99.0  1.2 {a} --{b}={c}\n",
]

CJK = ["你好，世界！今天天气很好。", "这是一个测试：分词器必须与参考实现完全一致。", "東京都の天気は晴れです。",
       "ひらがなとカタカナ、漢字を混ぜた文章。", "안녕하세요, 세계! 토크나이저 테스트입니다.", "函数返回值为空时抛出异常",
       "「引用」と『二重引用』、そして…省略記号", "中文English混合text123测试", "我爱北京天安门", "ｆｕｌｌｗｉｄｔｈ　ＡＢＣ　１２３",
       "繁體中文與簡體中文", "日本語のテキスト：ソースコードのコメント", "한국어 주석 // 코드", "龍龘齉𠀀𪚥", "ㄅㄆㄇㄈ 注音符號"]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸🇯🇵🇫🇷", "❤️", "🧑🏿‍💻", "👩‍❤️‍💋‍👨", "🐈‍⬛", "1️⃣", "🤷‍♀️",
         "✅ done", "🚀🚀🚀", "☕", "🔥 hot 🔥", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🫠", "©️®️™️"]
COMBINING = ["e\u0301", "cafe\u0301", "n\u0303", "a\u0300a\u0300a\u0300", "Z\u0351\u036b\u0343\u036a\u0302a\u0310l\u0367g\u0307o\u0351",
             "Vi\u1ec7t Nam", "Vie\u0323\u0302t Nam", "\u05e9\u05c1\u05b8\u05dc\u05d5\u05b9\u05dd", "o\u0308\u0304", "\u0915\u094d\u0937",
             "re\u0301sume\u0301", "A\u030a", "\u00c5", "\u212b", "fi\ufb01", "\u1100\u1161\u11a8", "x\u20d7"]
RTL = ["مرحبا بالعالم", "שלום עולם", "العربية 123 English", "\u200fمرحبا\u200e hello", "עִבְרִית", "فارسی: سلام",
       "اردو میں متن", "\u202eevil\u202c text", "def f(): # تعليق", "קוד: x = 1;"]
LOOKALIKES = ["<|im_start|>", "<|im_end|>", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "<think>",
              "</think>", "<think>\nreasoning\n</think>\n\nanswer", "<|eot_id|>", "<|begin_of_text|>", "<|end_of_text|>",
              "<|start_header_id|>user<|end_header_id|>", "<｜begin▁of▁sentence｜>", "<｜User｜>hi<｜Assistant｜>",
              "<｜tool▁calls▁begin｜>", "<|start|>assistant<|channel|>final<|message|>hi<|end|>", "<|return|>",
              "<|endoftext|>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "<|im_sta", "im_end|>", "< |im_end| >",
              "<<|im_end|>>", "<|im_end|><|im_end|>", "<|IM_END|>", "<|im_end |>", "<|fim_prefix|>", "<s>", "</s>",
              "[INST]", "<|reserved_special_token_5|>", "<|constrain|>", "<|endofprompt|>", "＜|im_end|＞", "<|im_end|",
              "|im_end|>", "<|<|<|", ">>|>>", "<|", "|>"]


def fill(r, tpl):
    a, b, c = (r.choice(IDENTS) for _ in range(3))
    return tpl.format(a=a, b=b, c=c, A=a[:1].upper() + a[1:], n=r.randint(0, 10 ** r.randint(1, 6)))


def rand_json(r, depth=0):
    k = r.random()
    if depth > 3 or k < 0.3:
        return r.choice([r.randint(-10 ** 9, 10 ** 9), r.random() * 1e3, True, False, None,
                         r.choice(IDENTS), r.choice(CJK), r.choice(EMOJI), "line1\nline2\ttab \"q\" \\ /"])
    if k < 0.65:
        return {r.choice(IDENTS): rand_json(r, depth + 1) for _ in range(r.randint(0, 5))}
    return [rand_json(r, depth + 1) for _ in range(r.randint(0, 5))]


def diff(r):
    a = r.choice(IDENTS)
    n = r.randint(1, 900)
    lines = [f"diff --git a/src/{a}.py b/src/{a}.py", "index 3f2a1b0..8c9d4e1 100644", f"--- a/src/{a}.py",
             f"+++ b/src/{a}.py", f"@@ -{n},7 +{n},8 @@ def {r.choice(IDENTS)}():"]
    for _ in range(r.randint(3, 9)):
        lines.append(r.choice([" ", "-", "+"]) + fill(r, r.choice(CODE["python"])).split("\n")[r.randint(0, 2)])
    if r.random() < 0.3:
        lines.append("\\ No newline at end of file")
    return "\n".join(lines) + "\n"


def number(r, n):
    digits = "".join(r.choice("0123456789") for _ in range(n))
    fmt = r.randint(0, 7)
    if fmt == 0:
        return digits
    if fmt == 1:
        return " " + digits
    if fmt == 2:
        return "-" + digits + "." + digits[::-1]
    if fmt == 3:
        return f"{int(digits or 0):,}"
    if fmt == 4:
        return "0x" + format(int(digits or 0), "X")
    if fmt == 5:
        return digits + "e-" + str(r.randint(1, 300))
    if fmt == 6:
        return "v" + ".".join(digits[i:i + 2] for i in range(0, len(digits), 2))
    return "x" + digits + "y" + digits + " " + digits


WS = [" ", "  ", "\t", "\n", "\r\n", "\n\n", "   \n", "\t\t", " \t ", "\u00a0", "\u3000", "\u2028", "\u0085", "\ufeff",
      "\u200b", "\r", "\x0b", "\x0c", "\u2009", "        "]

BLOCKS = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x5FF), (0x600, 0x6FF),
          (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x22FF), (0x2500, 0x257F),
          (0x3040, 0x30FF), (0x4E00, 0x4F00), (0xAC00, 0xAD00), (0xFF00, 0xFFEF), (0x1F300, 0x1F64F),
          (0x1F900, 0x1F9FF), (0x10000, 0x1007F), (0x1D400, 0x1D4FF), (0x300, 0x36F)]


def rand_unicode(r, n):
    out = []
    for _ in range(n):
        lo, hi = r.choice(BLOCKS)
        cp = r.randint(lo, hi)
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out.append(chr(cp))
    return "".join(out)


def corpus(seed):
    r = random.Random(seed)
    out = []
    for lang, tpls in CODE.items():  # 11 languages x 50
        for i in range(50):
            s = fill(r, tpls[i % len(tpls)])
            if i % 5 == 4:
                s = s.replace("\n", "\r\n")
            if i % 7 == 6:
                s = s.replace("    ", "\t")
            out.append(s)
    for i in range(150):
        v = rand_json(r)
        out.append(json.dumps(v, ensure_ascii=(i % 3 == 0), indent=[None, 2, 4, "\t"][i % 4],
                              separators=None if i % 4 else (",", ":")))
    out += [diff(r) for _ in range(100)]
    out += [fill(r, SHELL_OUT[i % len(SHELL_OUT)]) for i in range(100)]
    for i in range(150):
        s = r.choice(CJK)
        if i % 3:
            s += r.choice([" ", "", "\n"]) + r.choice(CJK) + r.choice([" 123", "。", "!", " abc"])
        out.append(s)
    for i in range(120):
        out.append("".join(r.choice(EMOJI) + r.choice(["", " ", "x", "\n"]) for _ in range(r.randint(1, 6))))
    for i in range(120):
        out.append(r.choice(["", " ", "word"]) + r.choice(COMBINING) + r.choice(["", " ", ".", "\n"]) + r.choice(COMBINING))
    for i in range(80):
        out.append(r.choice(RTL) + r.choice([" ", "\n", " - "]) + r.choice(RTL + ["hello", "123"]))
    for i in range(200):
        parts = []
        for _ in range(r.randint(1, 8)):
            parts.append(r.choice(WS) * r.randint(1, 5))
            if r.random() < 0.6:
                parts.append(r.choice(["a", "word", "x = 1", "{", "}", ".", "🙂", "中", "123", "'s"]))
        out.append("".join(parts))
    for n in range(1, 41):  # numbers of every length, several formats each
        for _ in range(5):
            out.append(number(r, n))
    for i in range(200):
        s = r.choice(LOOKALIKES)
        if i % 2:
            s = r.choice(["text ", "", "\n", " "]) + s + r.choice(["", " more", "\n\n", "x"]) + r.choice(LOOKALIKES)
        out.append(s)
    for i in range(300):
        out.append(rand_unicode(r, r.randint(1, 40)))
    # apostrophe and case quirks the pre-tokenizer regexes treat specially
    for w in ["'s", "'S", "'re", "'RE", "'ll", "'LL", "'ve", "'d", "'m", "'t", "\u017ftuff's", "DON'T", "we've",
              "I'M", "o'clock", "rock'n'roll", "it's", "IT'S", "'", "''", "'''"]:
        out.append(w)
        out.append("Hello " + w + " world")
    out += ["", " ", "a", "\n", "\t", "\r\n", "Hello world", " Hello world", "Hello World!", "ied 4 ½ months"]
    return out


def main():
    args = sys.argv[1:]
    seed = 20260301
    if len(args) >= 2 and args[0] == "--seed":
        seed = int(args[1])
        args = args[2:]
    data = corpus(seed)
    text = json.dumps(data, ensure_ascii=False, indent=0)
    if args:
        with open(args[0], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
