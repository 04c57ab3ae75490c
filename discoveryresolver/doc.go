// Package discoveryresolver turns the names a kubectl user types ("ct",
// "crontabs.stable.example.com", "deploy", "Deployment.apps",
// "deployments.v1.apps"), a GroupVersionKind or a GroupVersionResource into
// a full description of a served resource (GVR, GVK, scope, verbs, short
// names, categories), from the API server's discovery, cached and refreshed
// when the set of served resources changes.
package discoveryresolver
