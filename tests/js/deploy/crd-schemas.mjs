// crd-schemas.mjs — JSON Schemas of the Gateway API Inference Extension's
// resources that deploy/k8s/ uses, written from the extension's CRDs
// (inference.networking.k8s.io_inferencepools.yaml, v1, and
// inference.networking.x-k8s.io_inferenceobjectives.yaml, v1alpha2, of its
// 1.x releases): types, required fields, ranges, enums and patterns of spec.
// Unknown fields are refused (the API server would prune them silently: a
// misspelt field is a setting lost).
const dnsGroup = '^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$';
const kindName = '^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$';
const labelValue = '^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$';
const port = {
  type: 'object', additionalProperties: false, required: ['number'],
  properties: { number: { type: 'integer', minimum: 1, maximum: 65535 } },
};

// An object of this kind: apiVersion, kind, a named metadata and spec.
const resource = (apiVersion, kind, spec) => ({
  type: 'object', additionalProperties: false, required: ['apiVersion', 'kind', 'metadata', 'spec'],
  properties: {
    apiVersion: { const: apiVersion },
    kind: { const: kind },
    metadata: { type: 'object', required: ['name'], properties: { name: { type: 'string', minLength: 1, maxLength: 253 } } },
    spec: { type: 'object', additionalProperties: false, ...spec },
  },
});

// A reference by group, kind and name (plus what else the referent needs).
const objectRef = (more = {}) => ({
  type: 'object', additionalProperties: false, required: ['name'],
  properties: {
    group: { type: 'string', maxLength: 253, pattern: dnsGroup },
    kind: { type: 'string', minLength: 1, maxLength: 63, pattern: kindName },
    name: { type: 'string', minLength: 1, maxLength: 253 },
    ...more,
  },
});

export const inferencePoolV1 = resource('inference.networking.k8s.io/v1', 'InferencePool', {
  required: ['selector', 'targetPorts', 'endpointPickerRef'],
  properties: {
    selector: {
      type: 'object', additionalProperties: false, required: ['matchLabels'],
      properties: {
        matchLabels: { type: 'object', additionalProperties: { type: 'string', maxLength: 63, pattern: labelValue } },
      },
    },
    targetPorts: { type: 'array', minItems: 1, maxItems: 8, items: port },
    appProtocol: { enum: ['http', 'kubernetes.io/h2c'] },
    endpointPickerRef: objectRef({ port, failureMode: { enum: ['FailOpen', 'FailClose'] } }),
  },
});

export const inferenceObjectiveV1alpha2 = resource('inference.networking.x-k8s.io/v1alpha2', 'InferenceObjective', {
  required: ['poolRef'],
  properties: { priority: { type: 'integer' }, poolRef: objectRef() },
});
