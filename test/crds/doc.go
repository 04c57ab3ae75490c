// Package crds holds the CustomResourceDefinitions the integration suites
// install, so that every suite runs on a fresh clone with nothing beside it.
//
// The project's own CRDs (the edge.example.com API, embedded from
// testdata/; see testdata/README.md) have what makes real-world CRDs worth
// testing against:
//
//   - a large structural OpenAPI schema: EdgeProxy embeds the complete
//     schema of a Kubernetes PodTemplateSpec, as data-plane CRDs do (the
//     file is generated from Kubernetes' own OpenAPI definitions and is
//     several hundred KB);
//   - several served versions, with a storage version that is not the
//     preferred one (BackendGrant stores v1beta1 while v1 is preferred),
//     an unserved version (Route's v1alpha2), and versions whose schemas
//     differ (EdgeProxy's v1alpha1 keeps unknown fields);
//   - short names, one category shared by every kind ("edge"), and both
//     cluster-scoped (GatewayClass) and namespaced kinds.
//
// Third-party CRDs (Gateway API, prometheus-operator) are an opt-in
// corpus: CorpusDir and ReadCorpus read it from the directory the
// environment variable INFORMERKIT_TESTDATA names, and skip the calling
// test, saying how to enable it, when the variable is not set.
//
// Nothing here talks to a server or starts goroutines; the returned byte
// slices are fresh copies the caller may modify.
package crds
