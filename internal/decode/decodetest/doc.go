// Package decodetest builds the JSON of server-shaped objects for tests
// and benchmarks of decoding: what an API server returns for a workload
// custom resource written by server-side apply (labels, a last-applied
// annotation, a nested spec, a status with conditions, managedFields).
// It is deterministic: ServerObject(i) is the same bytes on every call.
package decodetest
