// Package treecodec lets the module's packages use the compact tree
// encoding that package cache owns (the encoding a *cache.Compact keeps:
// a tag byte per value, lengths as uvarints, strings as their bytes; no
// JSON scanning, escaping or number parsing), without making it part of
// cache's public API. Package cache sets the functions below when it is
// initialized; a package that uses them imports cache (directly or not),
// so they are set before any of its code runs.
//
// The encoding is lossless for the JSON-like trees of
// *unstructured.Unstructured: Decode(Encode(m)) is reflect.DeepEqual to
// m (int64 stays int64, float64 float64, json.Number json.Number).
// Decoded strings share memory with the encoding, which must not be
// modified afterwards.
package treecodec

// Encode appends obj's encoding to dst. It fails for a value JSON
// decoding never produces (an int, a []string, a struct); obj is only
// read. Set by package cache.
var Encode func(dst []byte, obj map[string]interface{}) ([]byte, error)

// Decode returns a new tree from an encoding made by Encode; bytes Encode
// did not write give an error, never a panic. Set by package cache.
var Decode func(enc []byte) (map[string]interface{}, error)

// Encoding returns the encoding a *cache.Compact keeps (shared: it must
// not be modified), and false for any other value. Set by package cache.
var Encoding func(obj interface{}) ([]byte, bool)
