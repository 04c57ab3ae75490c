// Package listwatch holds the server-facing half of an informer's list and
// watch: selectors and tweaks applied to every request, several namespaces
// merged into one collection, and the liveness layer that bounds how long
// the server may stay silent and reports whether it can be reached.
//
// Nothing here knows whether a resource is served; the gate (package gate)
// sits above it and decides whether to call it at all.
package listwatch
