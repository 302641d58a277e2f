// Validates Kubernetes manifests offline against the API's schemas, as
// shipped in the npm package kubernetes-models. Usage:
//   python3 -c '...yaml to a JSON array...' | node validate_k8s.js
// (tests/k8s_manifest_test.sh does the YAML to JSON step with PyYAML, which
// reads YAML as Kubernetes does: YAML 1.1.)
// Two checks per document, each printing one line per problem:
//  1. the package's own validation (types, enums, required keys), as the
//     model classes' validate() runs it;
//  2. every key is one the schema knows. The schemas' validators ignore
//     unknown keys (the API server drops them with a warning, so a misspelt
//     `podFailurePolicy` or `imagePullPolicy` would silently do nothing).
//     The validator is run on a proxy of the document that records each key
//     it reads: a key it never reads is not in the schema.
// Exit status: 0 all valid, 1 a problem found, 2 usage (the module missing).
'use strict';
const path = require('path');
const fs = require('fs');

let modelsDir;
try {
  modelsDir = path.dirname(require.resolve('kubernetes-models/package.json'));
} catch (e) {
  console.error('validate_k8s.js: cannot find the npm module kubernetes-models (set NODE_PATH)');
  process.exit(2);
}
const version = require(path.join(modelsDir, 'package.json')).version;

// The kinds the manifests use: apiVersion/kind -> the schema's file.
const kSchemas = {
  'v1/ConfigMap': 'IoK8sApiCoreV1ConfigMap',
  'v1/Service': 'IoK8sApiCoreV1Service',
  'v1/PersistentVolumeClaim': 'IoK8sApiCoreV1PersistentVolumeClaim',
  'batch/v1/Job': 'IoK8sApiBatchV1Job',
};

// Wraps value so that reading an own key of any object inside it adds that
// key's path to `read`.
function tracked(value, where, read) {
  if (value === null || typeof value !== 'object') return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      const child = Reflect.get(target, key, receiver);
      if (typeof key !== 'string' || !Object.prototype.hasOwnProperty.call(target, key)) {
        return child;
      }
      const at = `${where}/${key}`;
      if (!Array.isArray(target)) read.add(at);
      return tracked(child, at, read);
    },
  });
}

// Every object key of value whose path is not in read.
function unread(value, where, read, out) {
  if (value === null || typeof value !== 'object') return out;
  for (const key of Object.keys(value)) {
    const at = `${where}/${key}`;
    if (!Array.isArray(value) && !read.has(at)) {
      out.push(at);  // and not the keys under it: one line per mistake
    } else {
      unread(value[key], at, read, out);
    }
  }
  return out;
}

const docs = JSON.parse(fs.readFileSync(0, 'utf8'));
let problems = 0;
const report = (line) => { problems++; console.log(line); };
console.log(`kubernetes-models ${version}: ${docs.length} documents`);
docs.forEach((doc, i) => {
  const name = `document ${i + 1} (${doc.kind} ${doc.metadata && doc.metadata.name})`;
  const schema = kSchemas[`${doc.apiVersion}/${doc.kind}`];
  if (!schema) return report(`${name}: no schema for apiVersion ${doc.apiVersion} kind ${doc.kind}`);
  const validate = require(path.join(modelsDir, '_schemas', `${schema}.js`)).validate;
  const read = new Set();
  const valid = validate(tracked(doc, '', read));
  for (const e of valid ? [] : validate.errors) {
    report(`${name}: ${e.instancePath || '/'} ${e.keyword}: ${JSON.stringify(e.params)}`);
  }
  const unknown = unread(doc, '', read, []);
  for (const at of unknown) report(`${name}: ${at}: unknown key (not in ${schema})`);
  if (valid && unknown.length === 0) {
    console.log(`${name}: valid, all ${read.size} keys known to ${schema}`);
  }
});
process.exit(problems === 0 ? 0 : 1);
