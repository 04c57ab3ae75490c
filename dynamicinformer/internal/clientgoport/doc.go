// Package clientgoport holds client-go's own informer factory tests
// (dynamic/dynamicinformer and metadata/metadatainformer, v0.37.2), run
// against informerkit's factory: each directory is client-go's test file
// with its constructors swapped for informerkit's (adapter_test.go), to
// show that informerkit's factory with default options behaves as
// client-go's where client-go's tests look.
package clientgoport
