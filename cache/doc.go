// Package cache holds indexers, transforms and key functions for informer
// caches of unstructured objects: a label index that listers use for
// selectors, field-path indexes, and transforms that make cached objects
// smaller.
package cache
