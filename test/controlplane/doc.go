// Package controlplane runs a real kube-apiserver backed by an embedded etcd
// inside the current process, for integration tests and for the
// crd-watcher's no-cluster demo.
//
// Nothing is downloaded: the API server is k8s.io/kubernetes compiled into
// the test binary, etcd is go.etcd.io/etcd/server embedded. Start one
// ControlPlane per test package (see RunMain for TestMain) and isolate tests
// by namespace and CRD group.
//
// Clients reach the API server through a loopback TCP proxy owned by the
// ControlPlane (Config), so that a client keeps one address across
// RestartAPIServer and so that tests can cut, stall or refuse connections
// (Proxy). TLS verification is relaxed in the returned configs because every
// restart brings a new self-signed serving certificate.
package controlplane
