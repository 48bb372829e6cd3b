// validate.js — the independent oracle for the grammar tests: reads JSONL
// lines {id, schema, docs: [text, ...]} and checks every doc with Ajv (JSON
// Schema draft-04/07/2019/2020 by the schema's $schema, formats from
// ajv-formats). Prints one line per failure and a closing
// "N passed, M failed" line; exits 1 when any doc fails or a schema does not compile.
'use strict';
const fs = require('fs');
const path = require('path');
const jsdir = path.join(__dirname, '..', 'js', 'node_modules');
const Ajv = require(path.join(jsdir, 'ajv')).default;
const Ajv2020 = require(path.join(jsdir, 'ajv', 'dist', '2020')).default;
const Ajv04 = require(path.join(jsdir, 'ajv-draft-04'));
const addFormats = require(path.join(jsdir, 'ajv-formats'));

function make(Cls) {
  const a = new Cls({ strict: false, allErrors: false, validateFormats: true, unicodeRegExp: true });
  addFormats(a);
  return a;
}
const ajv07 = make(Ajv), ajv20 = make(Ajv2020), ajv04 = make(Ajv04);

function pick(schema) {
  const s = schema && typeof schema === 'object' && schema.$schema || '';
  if (s.includes('draft-04')) return ajv04;
  if (s.includes('draft-07') || s.includes('draft-06')) return ajv07;
  return ajv20;
}

let passed = 0, failed = 0;
const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter(Boolean);
for (const line of lines) {
  const rec = JSON.parse(line);
  let validate;
  try {
    const schema = rec.schema;
    if (schema && typeof schema === 'object') delete schema.$id;
    validate = pick(schema).compile(schema);
  } catch (e) {
    console.log(`FAIL ${rec.id}: schema does not compile in Ajv: ${e.message}`);
    failed += rec.docs.length || 1;
    continue;
  }
  for (const doc of rec.docs) {
    let v;
    try { v = JSON.parse(doc); } catch (e) {
      console.log(`FAIL ${rec.id}: not JSON (${e.message}): ${JSON.stringify(doc).slice(0, 300)}`);
      failed++; continue;
    }
    if (validate(v)) passed++;
    else {
      failed++;
      console.log(`FAIL ${rec.id}: ${ajvErr(validate.errors)}: ${JSON.stringify(doc).slice(0, 300)}`);
    }
  }
}
function ajvErr(errs) { return (errs || []).map(e => `${e.instancePath} ${e.message}`).join('; '); }
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
