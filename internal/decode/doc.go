// Package decode turns the JSON of one Kubernetes object into the
// map[string]interface{} of an *unstructured.Unstructured in one pass,
// with the results apimachinery's unstructured JSON decoding gives
// (unstructured.UnstructuredJSONScheme, which decodes with
// sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts):
//
//   - numbers without a '.' that fit an int64 become int64, every other
//     number float64; a number out of float64's range is an error;
//   - a key given twice keeps its last value;
//   - escapes (\uXXXX, surrogate pairs) and invalid UTF-8 become what
//     encoding/json makes of them (U+FFFD for each invalid byte or lone
//     surrogate);
//   - null is a nil interface{} (a top-level null is a nil map);
//   - nesting deeper than 10000 arrays and objects is an error.
//
// The result is reflect.DeepEqual to apimachinery's, but shares memory
// where an object is never written: within one top-level object, identical
// managed-fields sets (maps under metadata.managedFields[*].fieldsV1) are
// one map (see consTable); the strings of one object share allocations
// for their bytes (metadata.name excepted) and headers, so a string kept
// from an object keeps those of its siblings; short string values and
// keys come from
// process-wide intern tables (metadata.name, uid and resourceVersion,
// unique to an object, are not interned).
//
// Malformed input is an error of the same class as apimachinery's
// (IsSyntaxError for bad JSON, IsTypeError for a number out of range or a
// top level that is not an object), never a panic. The intern tables are
// bounded, so objects decoded anywhere in the process share one copy of
// each common key and short value.
//
// Options can skip fields that a transform would remove right after
// decoding (metadata.managedFields, the last-applied-configuration
// annotation): they are checked for syntax but never built, and the result
// equals decoding followed by cache.StripManagedFields or
// cache.DropLastAppliedConfiguration. Every rule is written once, in
// Options.step (projection.go), which all the decoders here follow: a new
// option is a field of Options and a case of step.
//
// TreeObject and TreeList write the compact tree encoding cache.Compact
// keeps straight from the JSON, with the same rules and the same scanner
// (scan.go),
// without building the object's maps; they return envelopes that only
// cache.Compactor consumes (see its documentation).
//
// Functions here start no goroutines and keep no reference to the input.
package decode
