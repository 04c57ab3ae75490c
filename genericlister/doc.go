// Package genericlister reads a shared informer's cache of
// *unstructured.Unstructured objects: Get, List and namespace-scoped views,
// an adapter to client-go's cache.GenericLister, and a typed view that
// converts cached objects to a Go struct.
package genericlister
